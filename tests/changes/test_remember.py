"""``scriptorium remember`` and the ``memory_remember`` tool (issue 58): a standing instruction in the user's
words goes into the resident block — every project's, or one project's only — through the one transaction;
a model's is held pending; bad input changes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

from scriptorium.access.audience import Principal
from scriptorium.runtimes.tools import call_tool
from scriptorium.workspace import MemoryWorkspace
from tests.helpers.edge import console
from tests.helpers.hooks import common, context, hook

LINT = "Always run the linter before committing."
PUSH = "Never push straight to main in this repo."


def repo(folder: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder


def opening(state: Path, cwd: Path) -> str:
    """The context a new session in ``cwd`` opens with (SessionStart; "" when it opens with none)."""
    out = hook(state, common("SessionStart", session="cc-new", cwd=str(cwd), source="startup"))
    return context(out, "SessionStart") if out.stdout.strip() else ""


def test_a_standing_instruction_opens_every_session_and_a_projects_only_that_projects(tmp_path: Path) -> None:
    state = tmp_path / "state"
    harbour, lighthouse = repo(tmp_path / "harbour"), repo(tmp_path / "lighthouse")
    assert console(["memory", "init", "--state", str(state)]).returncode == 0
    everywhere = console(["remember", LINT, "--state", str(state), "--json"])
    assert everywhere.returncode == 0, everywhere.stderr
    here = console(["remember", PUSH, "--project", str(harbour / "src"), "--state", str(state), "--json"])
    assert here.returncode == 0, here.stderr

    core = (state / "memory" / "topics" / "core.md").read_text()
    assert (
        core.index("# Standing instructions") < core.index(LINT) < core.index("## Project harbour") < core.index(PUSH)
    )
    at_harbour, at_lighthouse = opening(state, harbour), opening(state, lighthouse)
    assert LINT in at_harbour and PUSH in at_harbour
    assert LINT in at_lighthouse and PUSH not in at_lighthouse, "a project's instruction stays in that project"
    asked = context(
        hook(state, common("UserPromptSubmit", cwd=str(lighthouse), prompt="can I push straight to main?")),
        "UserPromptSubmit",
    )
    assert PUSH not in asked or "from project harbour" in asked.lower() or "From project harbour" in asked


def test_nothing_to_remember_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert console(["memory", "init", "--state", str(state)]).returncode == 0
    before = MemoryWorkspace(state / "memory").revision
    for args in (["remember", "  \n "], ["remember", "x" * 70_000, "--project"]):
        refused = console([*args, "--state", str(state)], cwd=tmp_path)
        assert refused.returncode == 3 and "INVALID_ARGUMENT" in refused.stderr, refused.stderr
    assert MemoryWorkspace(state / "memory").revision == before
    assert not (state / "memory" / "topics" / "core.md").exists()


def test_a_models_note_waits_for_the_owner_and_a_requester_may_not_write_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert console(["memory", "init", "--state", str(state)]).returncode == 0
    with MemoryWorkspace(state / "memory") as workspace:
        refused = call_tool(workspace, "memory_remember", {"text": LINT}, principal=Principal("bob", "write"))
        assert refused["ok"] is False and refused["reason"] == "FORBIDDEN"
        done = call_tool(workspace, "memory_remember", {"text": LINT})
        assert done["ok"] is True, done
    assert LINT in (state / "memory" / "topics" / "core.md").read_text()
    assert LINT not in opening(state, tmp_path), "a model's note is pending: not in the resident block"
    (source,) = (state / "memory" / "sources" / "scriptorium" / "model").glob("*.md")
    promoted = console(["memory", "promote", f"scriptorium/model/{source.stem}", "--state", str(state)])
    assert promoted.returncode == 0, promoted.stderr
    assert LINT in opening(state, tmp_path), "promoted by the owner: in every session's resident block"
