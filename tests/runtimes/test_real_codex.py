"""The released Codex (``codex exec``, pinned in tests/runtimes/clis) with Scriptorium set up as a user
would, against the scripted model server (OpenAI Responses): the tools in the first request, a search
and an update round trip under ``approval never``, and the session written once once its hooks are
trusted."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scriptorium.sessions import open_store
from scriptorium.settings import Settings
from tests.cluster.conftest import wait_for
from tests.conftest import trusted_and_pending_world
from tests.model_server import Logged, Reply, ToolCall
from tests.requirements import cli
from tests.runtimes.real import AppServer, Machine, kill_group, machine


@pytest.fixture
def user(tmp_path: Path) -> Iterator[Machine]:
    with machine(tmp_path) as found:
        found.codex_config()
        trusted_and_pending_world(found.state / "memory")
        yield found


def codex(user: Machine, prompt: str) -> dict[str, Any]:
    """``codex exec --json PROMPT``: the thread it ran and the items it reported."""
    done = user.run([str(cli("codex")), "exec", "--skip-git-repo-check", "--json", prompt], timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    thread = next(e["thread_id"] for e in events if e.get("type") == "thread.started")
    return {"thread": thread, "events": events}


def tool_outputs(request: Logged) -> list[dict[str, Any]]:
    """The memory tools' answers a request carries back (``function_call_output`` items, JSON)."""
    found = []
    for item in request.body.get("input") or []:
        if item.get("type") == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else "".join(p.get("text", "") for p in output or [])
            found.append(json.loads(text[text.index("{") :]))
    return found


def memory_tools(request: Logged) -> set[str]:
    return {
        tool["name"]
        for namespace in request.body.get("tools") or []
        if namespace.get("type") == "namespace" and namespace.get("name") == "mcp__scriptorium"
        for tool in namespace.get("tools") or []
    }


def test_the_tools_are_in_the_first_request_and_search_and_update_round_trip(user: Machine) -> None:
    user.scriptorium("setup", "codex", "--no-writer", "--allow-updates")
    listed = user.run([str(cli("codex")), "mcp", "list"], timeout=60)
    assert "scriptorium" in listed.stdout and "enabled" in listed.stdout, listed.stdout + listed.stderr

    change = {
        "op": "create_record",
        "content": "The user prefers tea.",
        "time": "2026-12-02",
        "destination": {"topic_path": "topics/preferences.md"},
        "sources": [{"source": "new-source-1", "label": "said"}],
    }
    update = {"memory_changes": [change], "new_sources": [{"id": "new-source-1", "text": "I prefer tea."}]}
    user.model.script = [
        Reply(tool_calls=(ToolCall("memory_search", {"query": "when do releases ship"}),)),
        Reply(tool_calls=(ToolCall("memory_update", update),)),
    ]
    codex(user, "When do releases ship? And remember that I prefer tea.")
    first, second, third = user.model.conversation()[:3]
    assert {"memory_search", "memory_get", "memory_status", "memory_update"} <= memory_tools(first)
    (found,) = tool_outputs(second)
    assert found["ok"] is True and any("Releases ship on Thursdays" in r["snippet"] for r in found["results"])
    updated = tool_outputs(third)[-1]
    assert updated["ok"] is True, "approval_mode approve: no approval asked under `approval never`"
    assert "The user prefers tea." in (user.state / "memory" / "topics" / "preferences.md").read_text()


def test_trusted_hooks_inject_the_core_and_recall_and_write_the_session_once(user: Machine) -> None:
    user.scriptorium("setup", "codex", "--no-writer", "--trust-hooks", str(cli("codex")))
    ran = codex(user, "When do releases ship?")
    first = user.model.conversation()[0]
    assert "The user is called Sam" in first.text, "the core, from SessionStart"
    assert "Releases ship on Thursdays" in first.text, "the recall, from UserPromptSubmit"
    user.wait_written(ran["thread"], 2, 60, "the thread's two turns, each written once")


def test_untrusted_hooks_stay_silent_and_uninstall_removes_the_trust(user: Machine) -> None:
    user.scriptorium("setup", "codex", "--no-writer")
    codex(user, "When do releases ship?")
    assert "Releases ship on Thursdays" not in user.model.conversation()[0].text, "Codex skips untrusted hooks"
    user.scriptorium("setup", "codex", "--no-writer", "--trust-hooks", str(cli("codex")))
    assert "trusted_hash" in (user.home / ".codex" / "config.toml").read_text()
    user.scriptorium("setup", "codex", "--uninstall")
    assert "trusted_hash" not in (user.home / ".codex" / "config.toml").read_text()


def test_an_interrupted_codex_turn_is_written_once_after_the_idle_time(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) while the model is still answering: whatever Codex writes and whichever hooks it
    still runs, the prompt is written once, at the latest by the watcher once the thread is idle."""
    with machine(tmp_path, SCRIPTORIUM_IDLE_MINUTES="0.02", SCRIPTORIUM_SWEEP_INTERVAL_S="1") as user:
        user.codex_config()
        trusted_and_pending_world(user.state / "memory")
        user.scriptorium("setup", "codex", "--no-writer", "--trust-hooks", str(cli("codex")))
        user.model.script = [Reply(text="never sent", delay_s=120)]
        proc = user.popen([str(cli("codex")), "exec", "--skip-git-repo-check", "--json", "Our boat is Heron."])
        assert proc.stdout is not None
        try:
            started = json.loads(proc.stdout.readline())
            assert started["type"] == "thread.started"
            wait_for(lambda: user.model.conversation(), 60, "the interrupted turn's model request")
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                kill_group(proc)
        thread = started["thread_id"]
        user.wait_written(thread, 1, 90, "the interrupted prompt, written once")


def test_a_compaction_summary_is_never_written_as_a_reply(user: Machine) -> None:
    """A small auto-compact limit and a large reported usage make Codex compact mid-turn: the model's
    summary lands in the rollout as an assistant message marked as compaction output; memory keeps the
    conversation, not the summary."""
    config = user.home / ".codex" / "config.toml"
    config.write_text("model_auto_compact_token_limit = 1000\n" + config.read_text())
    user.scriptorium("setup", "codex", "--no-writer", "--trust-hooks", str(cli("codex")))
    user.model.input_tokens = 50_000
    user.model.script = [
        Reply(tool_calls=(ToolCall("memory_status", {}),)),
        Reply(text="SUMMARY OF THE CONVERSATION SO FAR"),
        Reply(text="The memory is in order."),
    ]
    ran = codex(user, "Is the memory in order?")
    (rollout,) = (user.home / ".codex" / "sessions").rglob("*.jsonl")
    assert "SUMMARY OF THE CONVERSATION SO FAR" in rollout.read_text() and '"compacted"' in rollout.read_text()
    topics = user.state / "memory" / "topics"

    def written() -> str:
        return "\n".join(p.read_text() for p in topics.rglob("*.md"))

    wait_for(lambda: "The memory is in order." in written(), 60, "the thread's reply in memory")
    assert "Is the memory in order?" in written() and "SUMMARY OF THE CONVERSATION" not in written()
    user.wait_written(ran["thread"], 2, 60, "the prompt and the reply, each written once")


def test_a_reverted_thread_keeps_every_turn_once_with_the_retry_current(user: Machine) -> None:
    """An IDE reverts a thread to before its second turn (``thread/revert``) and asks again: Codex goes on in
    a second rollout of the same thread. Every turn of both is written once, the retry on the current
    branch and the reverted turn on the one left."""
    user.scriptorium("setup", "codex", "--no-writer", "--trust-hooks", str(cli("codex")))
    user.model.default = Reply(text="Noted.")
    server = AppServer(user)
    try:
        thread = str(server.request("thread/start", {"cwd": str(user.project)})["thread"]["id"])
        server.turn(thread, "Our boat is called Heron.")
        second = server.turn(thread, "The harbour is Brixham.")
        server.request("thread/revert", {"threadId": thread, "beforeTurnId": second})
        server.turn(thread, "The harbour is Dartmouth.")
    finally:
        server.close()
    rollouts = sorted((user.home / ".codex" / "sessions").rglob("*.jsonl"))
    assert len(rollouts) == 2 and thread in rollouts[1].name, "the revert went on in a second rollout"
    user.wait_written(thread, 6, 90, "the three turns of both rollouts, each written once")
    store = open_store(Settings(state=user.state).session_store_url)
    try:
        head = [n.content for n in store.get_branch(thread) if n.is_content]
        left = [
            [n.content for n in store.get_branch(thread, tip) if n.is_content]
            for tip in store.branch_tips(thread)
            if tip != store.get_branch(thread)[-1].id
        ]
    finally:
        store.close()
    assert head == ["Our boat is called Heron.", "Noted.", "The harbour is Dartmouth.", "Noted."]
    assert left == [["Our boat is called Heron.", "Noted.", "The harbour is Brixham.", "Noted."]]
