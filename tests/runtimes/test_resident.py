"""``setup claude-code --server``: the hooks and MCP reach a running ``scriptorium serve`` over HTTP.

The settings it writes (HTTP hooks, none for SessionStart, an HTTP MCP server, the tokens, the modes), what
it refuses, and what the server does with them: the prompt that opens a session carries the core, a writing
hook is answered at once and run in turn, a session that dies in its first turn is still written; ``/mcp``
answers the tools behind the same tokens as ``mcp --http``.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from scriptorium.access.tokens import TokenStore
from scriptorium.runtimes.base import is_our_hook
from tests.cluster.conftest import wait_for
from tests.conftest import trusted_and_pending_world
from tests.helpers.hooks import SCRIPT, common
from tests.helpers.mcp import payload
from tests.helpers.runtime_setup import CLAUDE_JSON, CLAUDE_SETTINGS, setup
from tests.helpers.served import ThreadServer
from tests.helpers.tokens import runtime_token
from tests.helpers.transcripts import claude_transcript

URL = "http://127.0.0.1:8765"
HTTP_EVENTS = ("UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionEnd")


def ours(settings: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {
        event: [h for g in groups for h in g["hooks"] if is_our_hook(h)] for event, groups in settings["hooks"].items()
    }


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_server_setup_posts_the_hooks_and_reaches_mcp_at_the_server_then_uninstalls(home: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    settings_file, claude_json = home / ".claude" / "settings.json", home / ".claude.json"
    settings_file.chmod(0o644)
    claude_json.chmod(0o644)
    setup(home, state, "claude-code", "--server", URL, "--no-writer")

    settings = json.loads(settings_file.read_text())
    hooks = ours(settings)
    assert "SessionStart" not in hooks, "Claude Code runs no HTTP SessionStart: the first prompt opens instead"
    tokens = set()
    for event in HTTP_EVENTS:
        (hook,) = hooks[event]
        assert (hook["type"], hook["url"]) == ("http", f"{URL}/api/hooks?core=first-prompt"), event
        tokens.add(hook["headers"]["Authorization"].removeprefix("Bearer "))
    (token,) = tokens
    record = TokenStore(state).verify(token)
    assert record is not None and (record.scope, record.requester) == ("runtime", None)
    assert any(h.get("command") == "notify-done" for g in settings["hooks"]["Stop"] for h in g["hooks"])
    owner = (state / "owner-token").read_text().strip()
    server = json.loads(claude_json.read_text())["mcpServers"]["scriptorium"]
    assert server == {
        "type": "http",
        "url": f"{URL}/mcp",
        "headers": {"Authorization": f"Bearer {owner}"},
        "alwaysLoad": True,
    }
    assert (mode(settings_file), mode(claude_json)) == (0o600, 0o600), "the files holding the tokens are private"
    assert mode(settings_file.with_name("settings.json.scriptorium-backup")) == 0o644

    again = setup(home, state, "claude-code", "--server", URL, "--no-writer")
    assert {c["action"] for c in again["changes"]} == {"unchanged"}, "the live token is reused"  # type: ignore[index, union-attr]

    setup(home, state, "claude-code", "--uninstall")
    assert settings_file.read_text() == CLAUDE_SETTINGS and claude_json.read_text() == CLAUDE_JSON
    assert (mode(settings_file), mode(claude_json)) == (0o644, 0o644), "the originals come back as they were"
    assert TokenStore(state).verify(token) is None, "the hooks' token is revoked with them"


def test_a_server_setup_over_a_command_setup_leaves_no_command_hook(home: Path, tmp_path: Path) -> None:
    """Set up with command hooks first, then with --server: every hook of ours posts to the server, the
    SessionStart command is gone (it would start a process and inject the core twice); the user's own
    hooks stay where they were."""
    state = tmp_path / "state"
    setup(home, state, "claude-code", "--no-writer")
    assert ours(json.loads((home / ".claude" / "settings.json").read_text()))["SessionStart"]
    setup(home, state, "claude-code", "--server", URL, "--no-writer")
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    hooks = ours(settings)
    assert set(hooks) >= set(HTTP_EVENTS) and not hooks.get("SessionStart"), hooks.keys()
    assert all(hook["type"] == "http" for found in hooks.values() for hook in found)
    assert any(h.get("command") == "notify-done" for g in settings["hooks"]["Stop"] for h in g["hooks"])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("claude-code", "--server", "https://127.0.0.1:8765"), "loopback"),
        (("claude-code", "--server", "http://example.com:8765"), "loopback"),
        (("claude-code", "--server", "http://127.0.0.1"), "loopback"),
        (("claude-code", "--server", "http://127.0.0.1:8765/api"), "without a path"),
        (("claude-code", "--server", URL, "--scope", "project"), "user scope only"),
        (("codex", "--server", URL), "command hooks only"),
    ],
)
def test_a_server_setup_that_cannot_work_is_refused_and_writes_nothing(
    home: Path, tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    state = tmp_path / "state"
    done = subprocess.run(
        [str(SCRIPT), "setup", *args, "--state", str(state), "--no-writer"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},
        cwd=home,
    )
    assert done.returncode != 0 and "INVALID_ARGUMENT" in done.stderr and says in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in home.rglob("*") if p.is_file()} == before
    assert not (state / "tokens.json").exists(), "no token is made for a setup that is refused"


@pytest.fixture
def served(tmp_path: Path) -> Any:
    state = tmp_path / "state"
    trusted_and_pending_world(state / "memory")
    token = runtime_token(state)
    server = ThreadServer(state, SCRIPTORIUM_TRIGGER_TOKENS="0", SCRIPTORIUM_HOOK_TRANSCRIPT_ROOTS=str(tmp_path))
    try:
        yield server, {"Authorization": f"Bearer {token}"}
    finally:
        server.close()


def test_a_writing_hook_is_answered_at_once_and_written_in_turn(served: Any, tmp_path: Path) -> None:
    """While another write holds the state folder's turn, the server still answers Stop at once; the pass
    runs when the turn is free."""
    server, auth = served
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
    with open(server.state / "hooks.lock", "a+b") as turn:
        fcntl.flock(turn, fcntl.LOCK_EX)  # as a detached writing hook of the same memory would
        started = time.monotonic()
        answer = httpx.post(f"{server.url}/api/hooks", json=common("Stop", transcript=transcript), headers=auth)
        assert (answer.status_code, answer.json()) == (200, {})
        assert time.monotonic() - started < 5, "the runtime's turn does not wait for the write"
        assert not written(server.state), "nothing runs while the turn is another's"
    wait_for(lambda: written(server.state), 60, "the Stop's pass once the turn is free")


def written(state: Path) -> bool:
    return any("/cc-hooks.md#" in p.read_text() for p in (state / "memory" / "topics").rglob("*.md"))


def test_serve_answers_the_memory_tools_at_mcp_behind_its_tokens(served: Any) -> None:
    server, auth = served

    async def search(token: str) -> dict[str, Any]:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
            streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = {tool.name for tool in (await session.list_tools()).tools}
            assert {"memory_status", "memory_get", "memory_search", "memory_update"} <= listed
            return payload(await session.call_tool("memory_search", {"query": "when do releases ship"}))

    found = anyio.run(search, server.token)
    assert found["ok"] and "Thursdays" in json.dumps(found["results"]), found
    assert httpx.post(f"{server.url}/mcp", json={}).status_code == 401
    refused = httpx.post(f"{server.url}/mcp", json={}, headers=auth)  # a runtime token is not an MCP caller
    assert (refused.status_code, refused.json()["reason"]) == (403, "FORBIDDEN")


def opening_prompt(server: Any, auth: dict[str, str], session: str, transcript: Path, prompt: str) -> str:
    """What ``/api/hooks?core=first-prompt`` adds to ``session``'s prompt."""
    body = common("UserPromptSubmit", session=session, transcript=transcript, prompt=prompt)
    answer = httpx.post(f"{server.url}/api/hooks?core=first-prompt", json=body, headers=auth)
    assert answer.status_code == 200, answer.text
    return str(answer.json().get("hookSpecificOutput", {}).get("additionalContext", ""))


def test_the_prompt_that_opens_a_session_carries_the_core_where_no_session_start_runs(
    served: Any, tmp_path: Path
) -> None:
    """First prompt: the core, then the recall; second: the recall alone; after a PreCompact, the core
    again once; a session the store holds turns of (resumed) opens without it; without the parameter
    (a runtime whose SessionStart hook gave it) a prompt never carries it."""
    server, auth = served
    core, recall = '<memory-context kind="core">', '<memory-context kind="recall">'
    transcript = tmp_path / "fresh.jsonl"
    first = opening_prompt(server, auth, "fresh", transcript, "when do releases ship?")
    assert first.startswith(core) and "The user is called Sam" in first and "yacht" not in first, first
    assert recall in first and "Releases ship on Thursdays" in first
    second = opening_prompt(server, auth, "fresh", transcript, "when do releases ship?")
    assert second.startswith(recall) and core not in second, "the context holds the core already"

    compact = httpx.post(
        f"{server.url}/api/hooks?core=first-prompt", json=common("PreCompact", session="fresh"), headers=auth
    )
    assert compact.status_code == 200
    assert opening_prompt(server, auth, "fresh", transcript, "what now").startswith(core), "compaction lost it"
    assert core not in opening_prompt(server, auth, "fresh", transcript, "what now"), "once"

    resumed = claude_transcript(tmp_path / "cc-hooks.jsonl", 2)
    stop = httpx.post(
        f"{server.url}/api/hooks", json=common("Stop", transcript=resumed), headers=auth
    )  # imported by the classic route: this server has not seen its prompts
    assert stop.status_code == 200
    wait_for(lambda: written(server.state), 60, "the resumed session's earlier turns")
    assert core not in opening_prompt(server, auth, "cc-hooks", resumed, "when do releases ship?")

    plain = common("UserPromptSubmit", session="other", prompt="when do releases ship?")
    answer = httpx.post(f"{server.url}/api/hooks", json=plain, headers=auth).json()
    assert core not in answer["hookSpecificOutput"]["additionalContext"], "SessionStart's job, not the prompt's"


def test_a_session_that_dies_in_its_first_turn_is_written_by_the_servers_sweep(tmp_path: Path) -> None:
    """Only its opening prompt reached the server (then the runtime was killed): the server's own watcher,
    which no SessionStart command started, imports the transcript the prompt named and writes it once idle."""
    state = tmp_path / "state"
    trusted_and_pending_world(state / "memory")
    auth = {"Authorization": f"Bearer {runtime_token(state)}"}
    server = ThreadServer(
        state,
        SCRIPTORIUM_TRIGGER_TOKENS="0",
        SCRIPTORIUM_HOOK_TRANSCRIPT_ROOTS=str(tmp_path),
        SCRIPTORIUM_SWEEP_INTERVAL_S="0.5",
        SCRIPTORIUM_IDLE_MINUTES="0.005",
    )
    try:
        transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 2)
        opening_prompt(server, auth, "cc-hooks", transcript, "hello")
        wait_for(lambda: written(state), 60, "the sweep's forced write of the killed session")
    finally:
        server.close()
