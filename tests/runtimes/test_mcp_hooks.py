"""The MCP server's ``hook`` tool, which Codex's ``mcp_tool`` hooks call on every turn instead of starting a
process (:mod:`scriptorium.runtimes.mcp.front`): answered by the hook daemon without loading the server, by
the front itself with the hook's own imports when no daemon is up (by the server where no front runs), as the
command answers, and confined to the runtimes' folders every way (a model can call the tool too)."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from scriptorium.runtimes.hooks import daemon as hook_daemon
from scriptorium.sessions import open_store
from scriptorium.settings import Settings
from tests.cluster.conftest import wait_for
from tests.helpers.daemon import socket_for
from tests.helpers.hooks import common, history, hook
from tests.helpers.mcp import INITIALIZED, VERSIONS, exchange, initialize
from tests.helpers.transcripts import claude_transcript

PROMPT = common("UserPromptSubmit", prompt="when do releases ship?")


def front(state: Path, loaded: Path) -> list[str]:
    """A ``scriptorium mcp --state STATE`` whose server marks ``loaded`` when it has to start."""
    program = textwrap.dedent(
        f"""
        from pathlib import Path
        from scriptorium.runtimes.mcp.front import serve

        def server():
            Path({str(loaded)!r}).touch()
            from scriptorium.cli.main import main
            return main(["mcp", "--state", {str(state)!r}])

        raise SystemExit(serve(server, ["--state", {str(state)!r}]))
        """
    )
    return [sys.executable, "-c", program]


def server_alone(state: Path) -> list[str]:
    """``scriptorium mcp --state STATE`` with no front before it: the SDK server answers everything (as where
    the front cannot read its listing)."""
    program = f"from scriptorium.cli.main import main; raise SystemExit(main(['mcp', '--state', {str(state)!r}]))"
    return [sys.executable, "-c", program]


def call_hook(command: list[str], payload: dict[str, Any], env: dict[str, str]) -> str:
    """The text the ``hook`` tool answers ``payload`` with, as a runtime's ``mcp_tool`` hook reads it."""
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "hook", "arguments": payload}}
    lines = exchange(command, [initialize(1, VERSIONS[-2]), INITIALIZED, call], env={**os.environ, **env})
    (answer,) = [line for line in lines if line.get("id") == 2]
    assert answer["result"]["isError"] is False
    (content,) = answer["result"]["content"]
    return str(content["text"])


def test_the_hook_daemon_answers_the_hook_tool_without_the_server_loading(
    state: Path, env: dict[str, str], tmp_path: Path
) -> None:
    expected = hook(state, PROMPT, SCRIPTORIUM_HOOK_DAEMON_IDLE_S="0").stdout.strip()
    assert "Releases ship on Thursdays" in expected
    hook(state, PROMPT, **env)  # the command starts the daemon
    path = socket_for(state)
    wait_for(lambda: path.exists() and hook_daemon.is_running(path), 30, "the hook daemon")
    loaded = tmp_path / "loaded"
    assert call_hook(front(state, loaded), PROMPT, env) == expected
    assert not loaded.exists(), "the daemon answered: the server never had to load"
    start = json.loads(call_hook(front(state, loaded), common("SessionStart", source="startup"), env))
    assert "The user is called Sam" in start["hookSpecificOutput"]["additionalContext"] and not loaded.exists()


def test_with_no_daemon_up_the_front_answers_the_hook_tool_itself_and_starts_one(
    state: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """A cold first prompt waits on the answer within the runtime's hook timeout: the front answers it with the
    hook's own imports, never the SDK server's (four times theirs)."""
    expected = hook(state, PROMPT, SCRIPTORIUM_HOOK_DAEMON_IDLE_S="0").stdout.strip()
    path = socket_for(state)
    assert not hook_daemon.is_running(path)
    loaded = tmp_path / "loaded"
    assert call_hook(front(state, loaded), PROMPT, env) == expected
    assert not loaded.exists(), "no daemon: the front answered in process, the server never loaded"
    wait_for(lambda: path.exists() and hook_daemon.is_running(path), 30, "the daemon it starts for the next hook")


def test_where_no_front_runs_the_server_answers_the_hook_tool(state: Path, env: dict[str, str]) -> None:
    expected = hook(state, PROMPT, SCRIPTORIUM_HOOK_DAEMON_IDLE_S="0").stdout.strip()
    assert "Releases ship on Thursdays" in expected
    assert call_hook(server_alone(state), PROMPT, {**env, "SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "0"}) == expected


@pytest.mark.parametrize("route", ["daemon", "front", "server"])
def test_the_hook_tool_reads_no_transcript_outside_the_runtimes_folders(
    state: Path, env: dict[str, str], tmp_path: Path, route: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command takes any path (the runtime gave it); the tool is the model's to call as well, so a
    transcript it names must lie in the runtimes' folders, as on the HTTP hook route."""
    roots = tmp_path / "runtimes"
    roots.mkdir()
    settings = {
        **env,
        "SCRIPTORIUM_HOOK_TRANSCRIPT_ROOTS": str(roots),
        "SCRIPTORIUM_HOOK_WRITE_SETTLE_S": "0",
    }
    if route == "daemon":
        hook(state, PROMPT, **settings)
        for key, value in settings.items():  # the settings are part of the socket's name
            monkeypatch.setenv(key, value)
        path = socket_for(state)
        wait_for(lambda: path.exists() and hook_daemon.is_running(path), 30, "the hook daemon")
    outside = claude_transcript(tmp_path / "cc-hooks.jsonl", 2)
    loaded = tmp_path / "loaded"
    command = server_alone(state) if route == "server" else front(state, loaded)
    assert call_hook(command, common("Stop", transcript=outside), settings) == ""
    assert not loaded.exists(), "the daemon or the front answered: the server never loaded"
    refused = lambda: any(h.get("hook") == "Stop" and h.get("reason") == "FORBIDDEN" for h in history(state))  # noqa: E731
    wait_for(refused, 60, "the Stop hook's refusal in the writer history")
    assert "cc-hooks" not in imported(state), "a transcript outside the runtimes' folders was read"
    inside = claude_transcript(roots / "cc-hooks.jsonl", 2)
    assert call_hook(command, common("Stop", transcript=inside), settings) == ""
    wait_for(lambda: "cc-hooks" in imported(state), 60, "the transcript inside the runtimes' folders, imported")


def imported(state: Path) -> set[str]:
    """The sessions the state's store holds (their runtime-qualified IDs end in the runtime's own)."""
    if not (state / "sessions" / "sessions.db").exists():
        return set()
    store = open_store(Settings(state=state).session_store_url)
    try:
        return {s.id.rsplit("/", 1)[-1] for s in store.list_sessions()}
    finally:
        store.close()


def test_the_opening_prompt_carries_the_core_once_whichever_process_answers_it(
    state: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Claude Code's stdio setup runs no SessionStart hook for a new session: its first prompt asks for the
    core (``core=first-prompt``). The front answers the first (no daemon up), the daemon it starts the
    next: the core comes once between them, and never to a session the store holds (a resumed one)."""
    core = "The user is called Sam"
    first = {**PROMPT, "session_id": "fresh", "core": "first-prompt"}
    path = socket_for(state)
    loaded = tmp_path / "loaded"
    opening = call_hook(front(state, loaded), first, env)
    assert not loaded.exists(), "no daemon: the front answered"
    assert opening.count(core) == 1 and "Releases ship on Thursdays" in opening
    wait_for(lambda: path.exists() and hook_daemon.is_running(path), 30, "the daemon the front starts")
    second = call_hook(front(state, loaded), first, env)
    assert not loaded.exists(), "the daemon answered"
    assert core not in second and "Releases ship on Thursdays" in second, "the context holds the core already"

    transcript = claude_transcript(tmp_path / "stored.jsonl", 2)  # its session: cc-hooks
    hook(state, common("Stop", transcript=transcript), **env)
    wait_for(lambda: "cc-hooks" in imported(state), 60, "the session's earlier turns in the store")
    resumed = call_hook(front(state, loaded), {**PROMPT, "core": "first-prompt"}, env)
    assert core not in resumed and "Releases ship on Thursdays" in resumed, "a resumed context holds it too"
    plain = call_hook(front(state, loaded), {**PROMPT, "session_id": "other"}, env)
    assert core not in plain, "without the argument (a runtime whose SessionStart gave it) never"
