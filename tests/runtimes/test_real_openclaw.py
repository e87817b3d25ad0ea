"""The released OpenClaw (``openclaw agent --local``, pinned in tests/runtimes/openclaw with the Node it needs)
against the scripted model server, with the memory plugin ``scriptorium setup openclaw`` installs."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.cluster.conftest import wait_for
from tests.conftest import trusted_and_pending_world
from tests.model_server import Reply, ToolCall
from tests.runtimes.real import SCRIPT, Machine, kill_group, machine

# One worker runs these in turn: OpenClaw checks and records its package's lifecycle in the one installed copy
# (tests/runtimes/openclaw), and two runs at once found it half done ("package lifecycle is incomplete").
pytestmark = pytest.mark.xdist_group("openclaw")

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
    on that first turn. ``openclaw agent --local`` ends its process with its run and never sends session_end,
    and the run is far below the unforced pass's trigger: with the idle window an hour long (and the watcher's
    sweeps spaced as far), only the forced pass the plugin runs at the run's end can have written it, once.
    The next one-shot run's first model request recalls what the first one said; uninstall leaves OpenClaw's
    config as it was. (One test: each OpenClaw run costs some 15 s of CPU.)"""
    with machine(tmp_path, SCRIPTORIUM_IDLE_MINUTES="60", SCRIPTORIUM_SWEEP_INTERVAL_S="3600") as user:
        user.openclaw_config()
        trusted_and_pending_world(user.state / "memory")
        before = openclaw_files(user)
        user.scriptorium("setup", "openclaw")
        again = json.loads(user.scriptorium("setup", "openclaw", "--json").stdout)
        assert {c["action"] for c in again["changes"]} == {"unchanged"}, again

        search = ToolCall("tool_call", {"id": "memory_search", "args": {"query": "release day"}})
        user.model.script = [Reply(tool_calls=(search,)), Reply(text="Thursdays, noted.")]
        user.openclaw("Our sailing boat Heron is moored at Lymington. When do releases ship?", "--session-id", "first")
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
        assert sessions(user) == ["first"]
        user.wait_written("first", 2, 90, "the prompt and the reply, each written once, when the run ended")

        user.model.default = Reply(text="Noted.")
        user.openclaw("Where is our sailing boat moored?", "--session-id", "second")
        asked = next(r for r in user.model.conversation() if "Where is our sailing boat moored?" in r.text)
        assert "moored at Lymington" in asked.text, "the first run's words, recalled in the next run's request"

        user.scriptorium("setup", "openclaw", "--uninstall")
        assert openclaw_files(user) == before, "OpenClaw's config as it was, no extension of ours left"


def compactions(user: Machine, session: str) -> int:
    database = user.home / ".openclaw" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT event_json FROM transcript_events WHERE session_id = ?", (session,))
        return sum(json.loads(text)["type"] == "compaction" for (text,) in rows if text)


def test_a_session_openclaw_compacts_loses_no_turn_and_its_summary_is_never_written(tmp_path: Path) -> None:
    """Usage reported near the model's context window makes OpenClaw compact the session before the next
    turn (OpenClaw's pre-compaction memory flush is where its users lose memory): every turn, before and
    after the compaction, is written exactly once, and the compaction's summary is not written at all."""
    with machine(tmp_path, **IDLE) as user:
        user.openclaw_config(context_window=32_000)
        user.scriptorium("setup", "openclaw")
        user.model.input_tokens = 30_000
        user.model.default = lambda request: Reply(
            text="Summary: the dinghy and its oars." if "summarization assistant" in request.text else "Noted."
        )
        user.openclaw("First: the dinghy is painted blue.", "--session-id", "harbour")
        user.openclaw("Second: the oars are painted red.", "--session-id", "harbour")
        assert compactions(user, "harbour") == 1, "OpenClaw compacted the session"
        user.wait_written("harbour", 4, 90, "both turns of each run, each written once")
        topics = "".join(p.read_text() for p in (user.state / "memory" / "topics").rglob("*.md"))
        assert "dinghy is painted blue" in topics and "oars are painted red" in topics
        assert "Summary: the dinghy" not in topics and "Latest user request context" not in topics


def test_openclaw_killed_mid_turn_has_its_prompt_written_by_the_watcher(tmp_path: Path) -> None:
    """SIGKILL while the model is still answering: no agent_end, no session end. The hook daemon's sweep
    finds the agent database the prompt hooks named and, once the session is idle, writes the prompt, once."""
    with machine(tmp_path, **IDLE) as user:
        user.openclaw_config()
        trusted_and_pending_world(user.state / "memory")
        user.scriptorium("setup", "openclaw")
        user.model.default = Reply(text="Too late.", delay_s=30)
        argv = user.openclaw_argv("The mooring fee is due in March.", "--session-id", "cut")
        proc = user.popen(argv, stderr=subprocess.DEVNULL, env=user.openclaw_env)
        try:
            wait_for(lambda: bool(user.model.conversation()), 120, "OpenClaw's model request")
        finally:
            kill_group(proc)
        user.wait_written("cut", 1, 90, "the killed session's prompt, written once by the watcher")


def test_set_up_for_a_requester_openclaw_sees_its_records_and_the_shared_ones_never_anothers(tmp_path: Path) -> None:
    """``setup openclaw --token`` with bob's write token: the recall in OpenClaw's first request and its
    memory_search answer hold bob's and the shared memos, never alice's private one (the owner's plugin would
    show all three); the config file holding the token is the user's alone."""
    from tests.requesters_fixtures import requesters_world

    with machine(tmp_path, **IDLE) as user:
        user.openclaw_config()
        requesters_world(user.state)
        token = user.scriptorium("token", "create", "--scope", "write", "--requester", "bob").stdout.split()[-1]
        owner = user.run([str(SCRIPT), "setup", "openclaw", "--token", "not-a-token"])
        assert owner.returncode != 0 and "FORBIDDEN" in owner.stderr, "a token that is not one: refused"
        assert not (user.home / ".openclaw" / "extensions").exists(), "and nothing installed"
        user.scriptorium("setup", "openclaw", "--token", token)
        wiring = user.home / ".openclaw" / "extensions" / "scriptorium" / "scriptorium.json"
        assert wiring.stat().st_mode & 0o077 == 0, "the token's file is the user's alone"

        search = ToolCall("tool_call", {"id": "memory_search", "args": {"query": "memo", "limit": 20}})
        user.model.script = [Reply(tool_calls=(search,)), Reply(text="Noted.")]
        user.openclaw("memo: what do the memos say?", "--session-id", "bobs")
        first, answered = user.model.conversation()[:2]
        results = "".join(
            json.dumps(block)
            for message in answered.body["messages"]
            for block in (message["content"] if isinstance(message["content"], list) else [])
            if block.get("type") == "tool_result"
        )
        for seen in (first.text, results):
            assert "tea recipes" not in seen, "alice's private memo reached bob's OpenClaw"
        assert "deploy keys" in results and "standup" in results, results[:2000]
        assert "deploy keys" in first.text or "standup" in first.text, "the recall holds what bob may see"
