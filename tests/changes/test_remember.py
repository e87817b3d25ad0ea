"""``scriptorium remember`` and the ``memory_remember`` tool (issue 58): a standing instruction in the user's
words goes into the resident block — every project's, or one project's only — through the one transaction;
a model's is held pending; bad input changes nothing."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from scriptorium.audience import Principal
from scriptorium.runtimes.mcp.tools import call_tool
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.paths import conversation_file, source_path
from scriptorium.workspace.threads import split
from scriptorium.writers.verbatim import contradicted, standing_instructions, user_wide, with_standing
from tests.checks import by_message, records_citing
from tests.helpers.edge import console
from tests.helpers.hooks import common, context, hook
from tests.helpers.transcripts import cc

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
    conversation = conversation_file(source_path("scriptorium", "model", "x"))
    (source,) = split(conversation, (state / "memory" / conversation).read_bytes())
    promoted = console(["memory", "promote", source, "--state", str(state)])
    assert promoted.returncode == 0, promoted.stderr
    assert LINT in opening(state, tmp_path), "promoted by the owner: in every session's resident block"


def said(state: Path, tmp_path: Path, session: str, cwd: Path, turns: list[tuple[str, str]]) -> None:
    """A Claude Code session of ``turns`` (role, text) in ``cwd``, ended: written by the default writer."""
    lines = []
    for n, (role, text) in enumerate(turns):
        entry = json.loads(cc(n, f"e{n - 1}" if n else None, role, text))
        lines.append(json.dumps({**entry, "sessionId": session, "cwd": str(cwd)}))
    transcript = tmp_path / f"{session}.jsonl"
    transcript.write_text("".join(f"{line}\n" for line in lines))
    assert hook(state, common("SessionEnd", session=session, transcript=transcript, reason="exit")).returncode == 0


def test_the_default_writer_keeps_the_users_standing_instructions_for_their_project(tmp_path: Path) -> None:
    """What the user said as a rule (not the agent, not a passing "don't worry") opens the later sessions of
    that project, once, citing the message it was said in."""
    state = tmp_path / "state"
    harbour, lighthouse = repo(tmp_path / "harbour"), repo(tmp_path / "lighthouse")
    turns = [
        ("user", "Don't worry about the flaky test. From now on, run make check before every commit. Thanks!"),
        ("assistant", "Always happy to help. Never mind the flaky one."),
        ("user", "From now on, run make check before every commit."),
    ]
    said(state, tmp_path, "cc-rules", harbour, turns)

    core = (state / "memory" / "topics" / "core.md").read_text()
    rule = "From now on, run make check before every commit."
    assert core.count(rule) == 1 and "# Standing instructions" in core, core
    assert "flaky" not in core and "happy to help" not in core, "neither a passing remark nor the agent's words"
    # The rule quotes its turn, which its conversation's record holds: the turn counts as written once.
    assert set(by_message(records_citing(state / "memory")).values()) == {1}
    assert rule in opening(state, harbour)
    assert rule not in opening(state, lighthouse), "another project's rule stays there"


@pytest.mark.parametrize(
    ("said", "rules"),
    [
        ("Always run the linter before committing. Thanks!", ["Always run the linter before committing."]),
        ("From now on, use pnpm instead of npm.\nAlso fix the bug.", ["From now on, use pnpm instead of npm."]),
        ("I prefer small commits", ["I prefer small commits"]),
        ("Do not use var in this repo.", ["Do not use var in this repo."]),
        ("dont overwrite, error", []),  # about the task at hand
        ("Should we always run it?", []),
        ("Never mind, that was wrong.", []),
        ("Don't worry about it ever.", []),
        ("We always deploy on Thursdays", []),  # a convention told, not an instruction given
        # A list of rules, one item each; the list's own lead-in is not one.
        (
            "add a rule for PRs:\n- always use conventional commits\n- keep it short",
            ["always use conventional commits"],
        ),
        ("1. Never push to main directly", ["Never push to main directly"]),
        # Said within the sentence, or opened with a word or two before it.
        ("no, tasks.md should always use the normal format", ["no, tasks.md should always use the normal format"]),
        ("Migrations must never edit old files.", ["Migrations must never edit old files."]),
        ("update that rule to always create tasks in main", ["update that rule to always create tasks in main"]),
        ("go ahead. also, from now on, never ask me first.", ["also, from now on, never ask me first."]),
        ("and yes, apply the changes yourself, always", ["and yes, apply the changes yourself, always"]),
        (
            "Red tests should be treated as the top priority in all cases",
            ["Red tests should be treated as the top priority in all cases"],
        ),
        ("do it, dont just tell me what to do.", ["do it, dont just tell me what to do."]),
        ("And please never mind the docs.", []),
        ("dont show the diff, just the summary", []),  # about this answer
        ("It always fails when I run it", []),  # a report, not a rule
        ("Should it always be like this?", []),
    ],
)
def test_which_sentences_are_standing_instructions(said: str, rules: list[str]) -> None:
    assert standing_instructions(said) == rules


def test_an_instruction_the_user_says_is_for_every_project_opens_every_projects_sessions(tmp_path: Path) -> None:
    state = tmp_path / "state"
    harbour, lighthouse = repo(tmp_path / "harbour"), repo(tmp_path / "lighthouse")
    everywhere = "Always use uv for Python in all my projects."
    said(state, tmp_path, "cc-wide", harbour, [("user", f"{everywhere} Now fix the test."), ("user", PUSH)])
    core = (state / "memory" / "topics" / "core.md").read_text()
    assert (
        core.index("# Standing instructions")
        < core.index(PUSH)
        < core.index("## All projects")
        < core.index(everywhere)
    ), core
    assert everywhere in opening(state, harbour) and PUSH in opening(state, harbour)
    at_lighthouse = opening(state, lighthouse)
    assert everywhere in at_lighthouse, "said for every project: in every project's sessions"
    assert PUSH not in at_lighthouse, "said for this repo: in this project's only"


def test_of_two_instructions_that_say_the_opposite_the_newer_holds(tmp_path: Path) -> None:
    """ "Always …" in one session, "Never …" about the same thing in a later one: the newer names the older as
    superseded, and the resident block holds the newer alone; both stay in the core's history of records."""
    state = tmp_path / "state"
    harbour = repo(tmp_path / "harbour")
    older, newer = (
        "Always squash the commits of a branch in this repo.",
        "Never squash the commits of a branch in this repo.",
    )
    said(state, tmp_path, "cc-first", harbour, [("user", older)])
    assert older in opening(state, harbour)
    said(state, tmp_path, "cc-then", harbour, [("user", newer), ("user", LINT)])
    core = (state / "memory" / "topics" / "core.md").read_text()
    assert older in core and newer in core and core.count("[supersedes](topics/core.md#^") == 1, core
    resident = opening(state, harbour).split('<memory-context kind="project">')[0]  # the core's block
    assert resident.startswith('<memory-context kind="core">'), resident
    assert newer in resident and LINT in resident and older not in resident, resident


@pytest.mark.parametrize(
    ("older", "newer", "conflict"),
    [
        ("Always push to main.", "Never push to main.", True),
        ("Don't use var in this repo.", "From now on, use var in this repo.", True),
        ("Always run the linter before committing.", "Always run the tests before committing.", False),
        ("Always use npm.", "Always use pnpm.", False),  # two rules, or a change of mind: words cannot tell
        ("Never push.", "Always push.", False),  # too little said to be sure it is the same thing
    ],
)
def test_which_instructions_contradict_an_earlier_one(older: str, newer: str, conflict: bool) -> None:
    assert contradicted(older, newer) is conflict


@pytest.mark.parametrize(
    ("rule", "wide"),
    [
        ("Always use uv in all my projects.", True),
        ("Never commit secrets, in every repo.", True),
        ("I prefer tabs everywhere.", True),
        ("Always run make check in this repo.", False),
        ("Always run the linter before committing.", False),
    ],
)
def test_which_instructions_the_user_says_hold_in_every_project(rule: str, wide: bool) -> None:
    assert user_wide(rule) is wide


def test_the_hooks_shortcut_keeps_the_instructions_for_every_project_wherever_it_is_asked(
    seeded: MemoryWorkspace,
) -> None:
    """SessionStart reads the installed core without opening the workspace unless a record is another
    project's: one under "All projects" never is, so a core of those alone takes the shortcut anywhere."""
    from scriptorium.recall.context import installed_core_if_trusted

    def elsewhere(cited: Sequence[Sequence[str]]) -> list[bool]:
        return [True] * len(cited)  # every record cites another project's session

    wide = "# Standing instructions\n\n## All projects\n\n2026-11-02: Always use uv [k](test/t1/m1).\n"
    seeded.apply_changes([TopicChange("topics/core.md", "create", wide)], message="wide")
    assert "Always use uv" in (installed_core_if_trusted(seeded.root, foreign=elsewhere) or "")
    scoped = (seeded.root / "topics/core.md").read_text().replace("## All projects\n\n", "")  # IDs kept
    seeded.apply_changes([TopicChange("topics/core.md", "update", scoped)], message="scoped")
    assert installed_core_if_trusted(seeded.root, foreign=elsewhere) is None, "another project's: the full path"


def test_an_instruction_for_every_project_goes_into_the_standing_instructions_own_sub_section() -> None:
    """Under ``# Standing instructions``: made at its end when missing, extended when there, never another
    title's sub-section of the same name."""
    core = "# Standing instructions\n\nA [k](a)\n\n# Facts\n\n## All projects\n\nfact [k](b)\n"
    made = with_standing(core, ["B everywhere [k](c)"], "All projects")
    assert made.index("A [k](a)") < made.index("## All projects") < made.index("B everywhere") < made.index("# Facts")
    assert made.endswith("## All projects\n\nfact [k](b)\n"), "the other title's section is as it was"
    again = with_standing(made, ["C everywhere [k](d)"], "All projects")
    assert again.index("B everywhere") < again.index("C everywhere") < again.index("# Facts")
    assert (
        with_standing(None, ["D [k](e)"], "All projects") == "# Standing instructions\n\n## All projects\n\nD [k](e)\n"
    )
