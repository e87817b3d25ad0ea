"""The released OpenClaw (``openclaw agent --local``, pinned in tests/runtimes/openclaw with the Node it needs)
against the scripted model server, with the memory plugin ``scriptorium setup openclaw`` installs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.conftest import trusted_and_pending_world
from tests.model_server import Reply, ToolCall
from tests.runtimes.real import Machine, machine

IDLE = {"SCRIPTORIUM_IDLE_MINUTES": "0.02", "SCRIPTORIUM_SWEEP_INTERVAL_S": "1"}


def openclaw_files(user: Machine) -> dict[Path, bytes]:
    """OpenClaw's config and extensions: what setup may touch (its sessions, state and workspace are its own)."""
    folder = user.home / ".openclaw"
    mine = [folder / "openclaw.json", *(folder / "extensions").rglob("*")]
    return {p: p.read_bytes() for p in mine if p.is_file()}


def sessions(user: Machine) -> list[str]:
    database = user.home / ".openclaw" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return [row[0] for row in db.execute("SELECT DISTINCT session_id FROM transcript_events ORDER BY 1")]


def test_setup_openclaw_fills_the_memory_slot_brings_memory_to_each_turn_and_writes_the_session(
    tmp_path: Path,
) -> None:
    """After ``scriptorium setup openclaw``: the first model request carries the core, once, and the prompt's
    recall; OpenClaw's memory_search (reached through its tool search, ``tool_call``) answers from Scriptorium
    on that first turn; the session is written once (OpenClaw's one-shot run sends no session end: the
    watcher writes it once idle); uninstall leaves OpenClaw's config as it was."""
    with machine(tmp_path, **IDLE) as user:
        user.openclaw_config()
        trusted_and_pending_world(user.state / "memory")
        before = openclaw_files(user)
        user.scriptorium("setup", "openclaw")
        again = json.loads(user.scriptorium("setup", "openclaw", "--json").stdout)
        assert {c["action"] for c in again["changes"]} == {"unchanged"}, again

        search = ToolCall("tool_call", {"id": "memory_search", "args": {"query": "release day"}})
        user.model.script = [Reply(tool_calls=(search,)), Reply(text="Thursdays, noted.")]
        user.openclaw("When do releases ship?")
        first, answered = user.model.conversation()[:2]
        assert first.text.count("The user is called Sam") == 1, "the core, once"
        assert "Releases ship on Thursdays" in first.text, "the prompt's recall"
        assert "memory_search (scriptorium)" in first.text, "OpenClaw lists our memory_search, not memory-core's"
        results = [
            json.dumps(block)
            for message in answered.body["messages"]
            for block in (message["content"] if isinstance(message["content"], list) else [])
            if block.get("type") == "tool_result"
        ]
        assert len(results) == 1 and '\\"ok\\": true' in results[0], results
        assert "Releases ship on Thursdays" in results[0], "the search answered from Scriptorium"
        (session,) = sessions(user)
        user.wait_written(session, 2, 90, "the prompt and the reply, each written once")

        user.scriptorium("setup", "openclaw", "--uninstall")
        assert openclaw_files(user) == before, "OpenClaw's config as it was, no extension of ours left"
