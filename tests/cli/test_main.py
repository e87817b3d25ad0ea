"""The ``scriptorium`` command: in this process (:func:`tests.helpers.cli.run`), and the installed console
script as a real process where the process boundary is the point (exit codes a shell sees, a lock another
process holds)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from scriptorium.workspace import MemoryWorkspace
from tests.helpers.cli import run, run_process


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with the example conversation archived, once per module; each test gets a copy."""
    root = tmp_path_factory.mktemp("cli") / "state"
    assert run("memory", "init", "--state", str(root)).returncode == 0
    assert run("memory", "archive", "examples/conversation.json", "--state", str(root)).returncode == 0
    return root


@pytest.fixture
def state(tmp_path: Path, archived: Path) -> Path:
    root = tmp_path / "state"
    shutil.copytree(archived, root, symlinks=True)
    return root


@pytest.mark.parametrize(
    "verb",
    [
        *("init", "status", "edit", "show", "archive", "rebuild", "ingest", "update", "get", "log", "revert", "core"),
        *("search", "promote", "backfill"),
    ],
)
def test_every_verb_has_help_and_takes_state(verb: str) -> None:
    out = run(*(["ingest"] if verb == "ingest" else ["memory", verb]), "--help")
    assert out.returncode == 0
    assert "--state" in out.stdout and "SCRIPTORIUM_STATE" in out.stdout
    description = out.stdout.split("\n\n")[1]
    assert len(description) > 15 and not description.startswith(("usage", "options"))


def test_the_quick_start_flow_installs_cited_records(state: Path) -> None:
    out = run(
        "memory", "edit", "topics/preferences.md", "--from", "examples/preferences.md", "--state", str(state), "--json"
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["git_committed"] and len(result["created_ids"]) == 3
    status = json.loads(run("memory", "status", "--state", str(state), "--json").stdout)
    assert status["records"] == 3 and status["sources"] == 3 and status["revision"] == result["revision"]
    shown = run("memory", "show", "topics/preferences.md", "--state", str(state)).stdout
    assert "](../sources/example/8b/first-session.md#source-m1)" in shown


def test_state_defaults_to_the_environment(state: Path) -> None:
    out = run("memory", "status", "--json", env={"SCRIPTORIUM_STATE": str(state)})
    assert out.returncode == 0 and json.loads(out.stdout)["sources"] == 3


def test_a_rejected_edit_exits_3_with_its_reason(state: Path) -> None:
    before = json.loads(run("memory", "status", "--state", str(state), "--json").stdout)["revision"]
    out = run("memory", "edit", "topics/x.md", "--from", "-", "--state", str(state), "--json", stdin="No citation.\n")
    assert out.returncode == 3
    error = json.loads(out.stderr)
    assert error["reason"] == "INVALID_TOPIC_FORMAT" and not error["retryable"] and error["guidance"]
    assert json.loads(run("memory", "status", "--state", str(state), "--json").stdout)["revision"] == before


def test_a_held_lock_exits_75_and_is_retryable(state: Path) -> None:
    ws = MemoryWorkspace(state / "memory")
    with ws.lock():
        out = run_process(
            "memory",
            "edit",
            "topics/x.md",
            "--from",
            "-",
            "--state",
            str(state),
            "--json",
            stdin="Fact [k](example/first-session/m1).\n",
        )
    ws.close()
    assert out.returncode == 75
    error = json.loads(out.stderr)
    assert error["reason"] == "LOCK_HELD" and error["retryable"]


def test_edit_runs_the_editor_and_keeps_a_rejected_draft(state: Path, tmp_path: Path) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "%s\\n" "$NEW_TEXT" >> "$1"\n')
    editor.chmod(0o755)
    good = run(
        "memory",
        "edit",
        "topics/notes.md",
        "--state",
        str(state),
        env={"EDITOR": str(editor), "NEW_TEXT": "2026-11-30: Uses an editor [editor](example/first-session/m2)."},
    )
    assert good.returncode == 0, good.stderr
    assert "^m-" in (state / "memory/topics/notes.md").read_text()
    bad = run(
        "memory", "edit", "topics/notes.md", "--state", str(state), env={"EDITOR": str(editor), "NEW_TEXT": "Uncited."}
    )
    assert bad.returncode == 3
    draft = Path(bad.stderr.split("kept in ")[1].split(";")[0])
    assert draft.read_text().endswith("Uncited.\n")
    draft.unlink()
    failing = run("memory", "edit", "topics/notes.md", "--state", str(state), env={"EDITOR": "false"})
    assert failing.returncode == 3 and "INVALID_ARGUMENT" in failing.stderr


def test_commands_on_a_missing_workspace_say_so(tmp_path: Path) -> None:
    out = run("memory", "status", "--state", str(tmp_path / "nowhere"))
    assert out.returncode == 3 and "WORKSPACE_NOT_INITIALIZED" in out.stderr
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("payload", "needle"),
    [("not json", "is not JSON"), ('{"a": 1}', "JSON list"), ('[{"provider": "p"}]', "lacks string field")],
)
def test_archive_rejects_malformed_input(state: Path, payload: str, needle: str) -> None:
    out = run("memory", "archive", "-", "--state", str(state), stdin=payload)
    assert out.returncode == 3 and needle in out.stderr


def test_status_shows_the_writer_history_after_ingest(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert run("ingest", "examples/transcript.jsonl", "--state", str(state)).returncode == 0
    out = run("memory", "status", "--state", str(state))
    assert out.returncode == 0
    assert "recent passes:" in out.stdout and "demo-session-0001: written, pending 0" in out.stdout
    history = json.loads(run("memory", "status", "--state", str(state), "--json").stdout)["writer_history"]
    assert history[-1]["outcome"] == "written" and history[-1]["writer"] == "verbatim"


def test_status_shows_the_days_writer_spend_against_the_budget(state: Path) -> None:
    from scriptorium.writing.budget import BudgetLimits, WriterBudget

    day = WriterBudget(state / "memory" / ".scriptorium", BudgetLimits()).charge(3, 1234).day
    env = {"SCRIPTORIUM_WRITER_DAILY_RUNS": "3", "SCRIPTORIUM_WRITER_OVER_BUDGET": "verbatim"}
    out = run("memory", "status", "--state", str(state), env=env)
    assert out.returncode == 0, out.stderr
    line = f"writer budget {day} (UTC): 3/3 runs, 1,234 tokens (no cap); spent: the verbatim writer writes until"
    assert line in out.stdout
    shown = json.loads(run("memory", "status", "--state", str(state), "--json").stdout)["writer_budget"]
    assert shown == {
        "day": day,
        "runs": 3,
        "runs_limit": 100,
        "tokens": 1234,
        "tokens_limit": 0,
        "spent": False,
        "over_budget": "wait",
    }


def test_the_installed_console_script_runs_end_to_end(state: Path) -> None:
    """The console script as a shell runs it: an edit read from stdin, its result as JSON on stdout, exit 0; a
    rejected one exits 3 with the reason as JSON on stderr; usage errors exit 2."""
    edit = ["memory", "edit", "topics/tea.md", "--from", "-", "--state", str(state), "--json"]
    good = run_process(*edit, stdin="2026-11-30: Likes tea [tea](example/first-session/m1).\n")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["git_committed"]
    bad = run_process(*edit, stdin="No citation.\n")
    assert bad.returncode == 3 and json.loads(bad.stderr)["reason"] == "INVALID_TOPIC_FORMAT"
    assert run_process("memory", "no-such-verb").returncode == 2
