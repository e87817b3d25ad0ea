"""The released Claude Code (``claude -p``, pinned in tests/runtimes/clis) with Scriptorium set up as a user
would, against the scripted model server: what reaches the model, what comes back from the tools, and
what is written — once — even when the runtime is killed mid-turn."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.conftest import free_port, wait_for
from tests.conftest import trusted_and_pending_world
from tests.helpers.served import up as served
from tests.model_server import Reply, ToolCall, tool_results
from tests.requirements import cli
from tests.runtimes.real import SCRIPT, Machine, kill_group, machine

# One worker runs these in turn: each starts the released CLI, its MCP server and hooks against SessionStart's
# 10 s; beside each other on a loaded CI worker set, a first request went out without the core now and then.
pytestmark = pytest.mark.xdist_group("claude-code")


@pytest.fixture
def user(tmp_path: Path) -> Iterator[Machine]:
    """A machine whose memory holds a trusted core and topics, set up for Claude Code at user scope."""
    with machine(tmp_path) as found:
        trusted_and_pending_world(found.state / "memory")
        found.scriptorium("setup", "claude-code", "--no-writer")
        yield found


def test_setup_is_accepted_and_the_core_and_recall_reach_the_first_request(user: Machine) -> None:
    listed = user.run([str(cli("claude")), "mcp", "list"], timeout=60)
    assert "scriptorium" in listed.stdout and "Connected" in listed.stdout, listed.stdout + listed.stderr

    result = user.claude("When do releases ship?")
    assert result["is_error"] is False
    first = user.model.conversation()[0]
    assert first.text.count("The user is called Sam") == 1, "the core, once, with the opening prompt"
    assert "Releases ship on Thursdays" in first.text, "the recall, from UserPromptSubmit"
    assert {"mcp__scriptorium__memory_search", "mcp__scriptorium__memory_get"} <= set(first.tool_names), (
        "the memory tools are in the first request, not deferred behind tool search"
    )
    assert "mcp__scriptorium__hook" not in first.tool_names, "the tool the recall came through is the hooks' alone"
    session = str(result["session_id"])
    user.wait_written(session, 2, 60, "the session's two turns, each written once")

    seen = len(user.model.requests)
    resumed = user.claude("And who am I?", "--resume", session)
    assert resumed["session_id"] == session
    again = next(r for r in user.model.requests[seen:] if r.path.endswith("/messages"))
    assert again.text.count("The user is called Sam") == 1, "the resumed context holds the core: not again"
    user.wait_written(session, 4, 60, "the resumed session's four turns, each written once")


def test_memory_search_round_trips_on_the_first_turn(user: Machine) -> None:
    user.model.script = [Reply(tool_calls=(ToolCall("memory_search", {"query": "when do releases ship"}),))]
    result = user.claude("Look it up in memory: when do releases ship?")
    assert result["permission_denials"] == [], "setup's permission rule lets a headless run call the tool"
    first, second = user.model.conversation()[:2]
    assert "mcp__scriptorium__memory_search" in first.tool_names
    (answer,) = tool_results(second)
    assert answer["ok"] is True and any("Releases ship on Thursdays" in r["snippet"] for r in answer["results"])


def test_memory_update_needs_allow_updates(user: Machine) -> None:
    change = {
        "op": "create_record",
        "content": "The user prefers tea.",
        "time": "2026-12-02",
        "destination": {"topic_path": "topics/preferences.md"},
        "sources": [{"source": "new-source-1", "label": "said"}],
    }
    update = {"memory_changes": [change], "new_sources": [{"id": "new-source-1", "text": "I prefer tea."}]}
    call = Reply(tool_calls=(ToolCall("memory_update", update),))
    user.model.script = [call]
    denied = user.claude("Remember that I prefer tea.")
    assert [d["tool_name"] for d in denied["permission_denials"]] == ["mcp__scriptorium__memory_update"]

    user.scriptorium("setup", "claude-code", "--no-writer", "--allow-updates")
    user.model.script = [call]
    allowed = user.claude("Remember that I prefer tea.")
    assert allowed["permission_denials"] == []
    (answer,) = tool_results(user.model.conversation()[-1])
    assert answer["ok"] is True, answer
    assert "The user prefers tea." in (user.state / "memory" / "topics" / "preferences.md").read_text()


def killed_mid_turn(user: Machine) -> Path:
    """``claude -p`` SIGKILLed while the model is still answering its first prompt (no Stop, no SessionEnd):
    the transcript it left, holding the prompt."""
    user.model.script = [Reply(text="never sent", delay_s=120)]
    proc = user.popen([str(cli("claude")), "-p", "Our boat is called Heron.", "--output-format", "json"])
    projects = user.home / ".claude" / "projects"

    def prompt_on_disk() -> list[Path]:
        return [p for p in projects.rglob("*.jsonl") if "Heron" in p.read_text()] if projects.is_dir() else []

    try:
        wait_for(lambda: user.model.conversation(), 60, "the killed turn's model request")
        (transcript,) = wait_for(prompt_on_disk, 60, "the prompt in the transcript")
    finally:
        kill_group(proc)
    return transcript  # type: ignore[no-any-return]


def test_a_session_killed_mid_turn_is_written_after_the_idle_time(tmp_path: Path) -> None:
    """SIGKILL while the model is still answering the first prompt: no Stop, no SessionEnd. The hook daemon's
    sweep finds the transcript the context hooks named and, once the session is idle, writes it — once."""
    idle = {"SCRIPTORIUM_IDLE_MINUTES": "0.02", "SCRIPTORIUM_SWEEP_INTERVAL_S": "1"}
    with machine(tmp_path, **idle) as user:
        trusted_and_pending_world(user.state / "memory")
        user.scriptorium("setup", "claude-code", "--no-writer")
        session = killed_mid_turn(user).stem
        user.wait_written(session, 1, 120, "the killed session's prompt, written once by the watcher")
        history = user.state / "memory" / ".scriptorium" / "history.jsonl"

        def ours_written() -> list[dict[str, object]]:
            """The session's write passes, once one that wrote is in the history (the pass adds its line after
            its install and marks: what wait_written sees comes first)."""
            lines = history.read_text().splitlines() if history.exists() else []
            passes = [json.loads(line) for line in lines]
            found = [h for h in passes if h.get("op") == "write" and h.get("session") == session]
            return found if any(h.get("nodes_written") for h in found) else []

        ours = wait_for(ours_written, 30, "the written pass's line in the history")
        # Written once, by a forced pass. Under load a context hook may store the prompt after the sweep's
        # pass read the session: the session is due again, and a second forced pass finds nothing to write.
        assert [h["force"] for h in ours if h.get("nodes_written")] == [True], ours


def test_a_session_killed_after_a_completed_turn_is_written_after_the_idle_time(tmp_path: Path) -> None:
    """A session kept open (stream-json input) answers one prompt, its Stop hook runs, and then the runtime
    is SIGKILLed before a second one: no SessionEnd. Its turns are written once, by the forced writes the
    watcher gives the idle session (the Stop hook's unforced pass wrote nothing below the trigger)."""
    idle = {"SCRIPTORIUM_IDLE_MINUTES": "0.02", "SCRIPTORIUM_SWEEP_INTERVAL_S": "1"}
    with machine(tmp_path, **idle) as user:
        trusted_and_pending_world(user.state / "memory")
        user.scriptorium("setup", "claude-code", "--no-writer")
        user.model.default = Reply(text="Heron is a fine name.")
        argv = [str(cli("claude")), "-p", "--input-format", "stream-json", "--output-format", "stream-json"]
        proc = user.popen([*argv, "--verbose"], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            message = {"type": "user", "message": {"role": "user", "content": "Our boat is called Heron."}}
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            result = next(e for line in proc.stdout if (e := json.loads(line)).get("type") == "result")
            session = str(result["session_id"])
            history = user.state / "memory" / ".scriptorium" / "history.jsonl"

            def stop_ran() -> bool:
                # the Stop hook's own (unforced) pass, not the sweep's: the sweep may come first, and
                # killing the runtime before the Stop's pass is recorded would lose that record
                lines = history.read_text().splitlines() if history.exists() else []
                passes = [json.loads(line) for line in lines]
                return any(h.get("session") == session and h.get("force") is False for h in passes)

            wait_for(stop_ran, 60, "the Stop hook's pass")
        finally:
            kill_group(proc)
        user.wait_written(session, 2, 90, "the killed session's turn, written once")
        passes = [json.loads(line) for line in history.read_text().splitlines()]
        mine = [(h["force"], h["outcome"]) for h in passes if h.get("op") == "write" and h.get("session") == session]
        # Either may run first: the Stop's pass waits out its settle time, the sweep comes every second. Each
        # turn is written once (wait_written), by the sweep's forced passes only: under load the prompt can be
        # idle long enough for a sweep to write it before the Stop hook stores the answer, which a later sweep
        # writes; a sweep may also find the session due again and write nothing.
        assert mine and all(force for force, outcome in mine if outcome == "written"), mine
        assert any(outcome == "written" for _f, outcome in mine), mine
        assert (False, "nothing_due") in mine and all(o in ("written", "nothing_due") for _f, o in mine), mine


def test_wired_to_a_running_server_the_hooks_and_tools_start_no_process_and_write_once(tmp_path: Path) -> None:
    """``setup --server``: the hooks post to ``scriptorium serve`` (none for SessionStart) and the tools are
    its ``/mcp``. The first request still holds the core (once), the recall and the tools; a search
    round-trips; the session is written once; uninstall takes it all back."""
    with machine(tmp_path) as user:
        trusted_and_pending_world(user.state / "memory")
        port = free_port()
        serve = user.popen([str(SCRIPT), "serve", "--port", str(port)], stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: served(f"http://127.0.0.1:{port}"), 60, "scriptorium serve")
            user.scriptorium("setup", "claude-code", "--no-writer", "--server", f"http://127.0.0.1:{port}")
            listed = user.run([str(cli("claude")), "mcp", "list"], timeout=60)
            assert "scriptorium" in listed.stdout and "Connected" in listed.stdout, listed.stdout + listed.stderr

            user.model.script = [Reply(tool_calls=(ToolCall("memory_search", {"query": "when do releases ship"}),))]
            result = user.claude("When do releases ship?")
            assert result["permission_denials"] == []
            first, second = user.model.conversation()[:2]
            assert first.text.count("The user is called Sam") == 1, "the core, once, from the opening prompt"
            assert "Releases ship on Thursdays" in first.text, "the recall, from the server"
            assert "mcp__scriptorium__memory_search" in first.tool_names, "the server's tools, in the first request"
            (answer,) = tool_results(second)
            assert answer["ok"] is True and any("Releases ship on Thursdays" in r["snippet"] for r in answer["results"])
            session = str(result["session_id"])
            user.wait_written(session, 2, 60, "the prompt and the reply, each written once")

            user.scriptorium("setup", "claude-code", "--uninstall")
            assert not (user.home / ".claude" / "settings.json").exists(), "setup made it: uninstall removes it"
            assert "scriptorium" not in (user.home / ".claude.json").read_text()
        finally:
            serve.terminate()
            serve.wait(10)


def test_wired_to_a_running_server_a_session_killed_mid_turn_is_written_by_the_servers_watcher(
    tmp_path: Path,
) -> None:
    """``setup --server`` runs no SessionStart command: the server notes the transcript the opening prompt
    names, and its own watcher writes the session SIGKILLed mid-turn once it is idle — once."""
    idle = {"SCRIPTORIUM_IDLE_MINUTES": "0.02", "SCRIPTORIUM_SWEEP_INTERVAL_S": "1"}
    with machine(tmp_path, **idle) as user:
        trusted_and_pending_world(user.state / "memory")
        port = free_port()
        serve = user.popen([str(SCRIPT), "serve", "--port", str(port)], stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: served(f"http://127.0.0.1:{port}"), 60, "scriptorium serve")
            user.scriptorium("setup", "claude-code", "--no-writer", "--server", f"http://127.0.0.1:{port}")
            session = killed_mid_turn(user).stem
            user.wait_written(session, 1, 120, "the killed session's prompt, written once by serve's watcher")
        finally:
            serve.terminate()
            serve.wait(10)
