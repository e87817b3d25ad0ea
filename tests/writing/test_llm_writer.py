"""The LLM writer against a real local HTTP server speaking the chat API with scripted tool calls."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scriptorium.errors import ReasonCode
from scriptorium.sessions import SessionStore
from scriptorium.settings import Settings
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writers.llm import LLMConfig, LLMOrganizer, LLMWriter
from scriptorium.writing.outcomes import Failed, Pending, Written
from scriptorium.writing.service import WriteService, WriteSettings
from tests.fake_openai import FakeOpenAI, serve, source_refs, tools
from tests.sessions_fixtures import chain


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    yield from serve()


def make(ws: MemoryWorkspace, store: SessionStore, config: Any) -> WriteService:
    source = config if callable(config) else (lambda: config)
    return WriteService(ws, store, LLMWriter(source), LLMOrganizer(source), WriteSettings(trigger_tokens=0))


def good_edit(body: dict[str, Any], path: str = "topics/trips/plan.md") -> dict[str, Any]:
    refs = source_refs(body)
    content = "# Trip\n\n" + "\n\n".join(f"2026-11-01: Fact from {r} [trip plan]({r})" for r in refs) + "\n"
    return {"tool_calls": [("write_topic", {"path": path, "content": content})]}


def config(fake: FakeOpenAI, model: str = "scripted-1", timeout: float = 10.0) -> LLMConfig:
    return LLMConfig(model=model, base_url=fake.base_url, timeout_s=timeout)


def test_the_model_edits_staged_topics_and_commits(
    ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI
) -> None:
    fake.script = [tools(("list_topics", {})), good_edit, tools(("commit_edits", {}))]
    outcome = make(ws, sessions, config(fake)).write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.records_created == 4
    text = (ws.root / "topics/trips/plan.md").read_text()
    assert text.count("[trip plan](../../sources/test/64/s1.md#source-") == 4
    first = fake.requests[0]
    assert first["model"] == "scripted-1"
    assert {t["function"]["name"] for t in first["tools"]} >= {"write_topic", "edit_topic", "commit_edits"}
    assert "never in `topics/core.md`" in first["messages"][0]["content"]  # the writer prompt file
    assert fake.requests[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": fake.requests[1]["messages"][-2]["tool_calls"][0]["id"],
        "content": "(no topics yet)",
    }
    assert all(sessions.get_node("s1", n).written_for(ws.key) for n in ("u1", "a1", "u2", "a2"))  # type: ignore[union-attr]


def test_an_invalid_edit_gets_one_repair_with_guidance(
    ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI
) -> None:
    bad = tools(("write_topic", {"path": "topics/trips/plan.md", "content": "Uncited claim.\n"}))
    fake.script = [bad, tools(("commit_edits", {})), good_edit, tools(("commit_edits", {}))]
    outcome = make(ws, sessions, config(fake)).write("s1", force=True)
    assert isinstance(outcome, Written)
    repair_prompt = fake.requests[2]["messages"][1]["content"]
    assert "previous edit was rejected" in repair_prompt and "INVALID_TOPIC_FORMAT" in repair_prompt
    assert "Uncited claim." in repair_prompt
    assert len(fake.requests[2]["messages"]) == 2, "the repair starts a fresh conversation on a fresh baseline"


def test_two_rejections_end_commit_rejected(ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI) -> None:
    bad = tools(("write_topic", {"path": "topics/x.md", "content": "x"}))
    fake.script = [bad, tools(("commit_edits", {})), bad, tools(("commit_edits", {}))]
    revision = ws.revision
    outcome = make(ws, sessions, config(fake)).write("s1", force=True)
    assert isinstance(outcome, Failed) and outcome.reason is ReasonCode.COMMIT_REJECTED
    assert ws.revision == revision and not (ws.root / "topics/x.md").exists()
    assert not sessions.get_node("s1", "u1").written_for(ws.key)  # type: ignore[union-attr]


def test_tool_errors_go_back_to_the_model(ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI) -> None:
    fake.script = [
        tools(("read_topic", {"path": "sources/test/64/s1/u1.md"}), ("read_topic", {"path": "topics/none.md"})),
        tools(("edit_topic", {"path": "topics/none.md", "old": "a", "new": "b"})),
        good_edit,
        tools(("commit_edits", {})),
    ]
    outcome = make(ws, sessions, config(fake)).write("s1", force=True)
    assert isinstance(outcome, Written)
    results = [m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("error INVALID_PATH") and results[1].startswith("error NOT_FOUND")


def test_a_timeout_leaves_the_turns_pending(ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI) -> None:
    fake.script = [lambda body: ("sleep", 3.0)]
    outcome = make(ws, sessions, config(fake, timeout=0.5)).write("s1", force=True)
    assert isinstance(outcome, Pending) and outcome.reason is ReasonCode.WRITER_TIMEOUT and outcome.retryable
    assert not sessions.get_node("s1", "u1").written_for(ws.key)  # type: ignore[union-attr]


def test_a_refused_connection_is_model_unreachable(ws: MemoryWorkspace, sessions: SessionStore) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    unreachable = LLMConfig(model="m", base_url=f"http://127.0.0.1:{port}/v1", timeout_s=2)
    outcome = make(ws, sessions, unreachable).write("s1", force=True)
    assert isinstance(outcome, Pending) and outcome.reason is ReasonCode.MODEL_UNREACHABLE


@pytest.mark.parametrize(
    ("status", "reason"), [(500, ReasonCode.MODEL_UNREACHABLE), (401, ReasonCode.WRITER_START_FAILED)]
)
def test_http_errors_map_to_reason_codes(
    ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI, status: int, reason: ReasonCode
) -> None:
    fake.script = [lambda body: ("http", status)]
    outcome = make(ws, sessions, config(fake)).write("s1", force=True)
    assert isinstance(outcome, Pending) and outcome.reason is reason


def test_a_model_that_never_commits_fails_terminally(
    ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI
) -> None:
    fake.script = [lambda body: {"content": "I think we are done."}]
    outcome = make(ws, sessions, config(fake)).write("s1", force=True)
    assert isinstance(outcome, Failed) and outcome.reason is ReasonCode.WRITER_FAILED


def test_a_model_change_takes_effect_on_the_next_pass(
    ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    settings = Settings(state=state, writer="llm", writer_base_url=fake.base_url, writer_model="model-a")
    svc = make(ws, sessions, settings.llm_config_source())
    fake.script = [good_edit, tools(("commit_edits", {}))]
    assert isinstance(svc.write("s1", force=True), Written)
    sessions.add_nodes(chain("s1", ["u3", "a3"], parent="a2", start=10), head="a3")
    (state / "writer.json").write_text(json.dumps({"model": "model-b"}))
    fake.script = [lambda body: good_edit(body, "topics/trips/later.md"), tools(("commit_edits", {}))]
    assert isinstance(svc.write("s1", force=True), Written)
    assert [r["model"] for r in fake.requests] == ["model-a", "model-a", "model-b", "model-b"]


def test_the_organizer_cannot_read_sources(ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI) -> None:
    fake.script = [good_edit, tools(("commit_edits", {}))]
    svc = make(ws, sessions, config(fake))
    svc.write("s1", force=True)
    fake.script = [tools(("read_topic", {"path": "sources/test/64/s1/u1.md"})), tools(("commit_edits", {}))]
    outcome = svc.reorganize()
    assert outcome.ok
    assert "Organize them." in fake.requests[2]["messages"][1]["content"]
    assert fake.requests[3]["messages"][-1]["content"].startswith("error INVALID_PATH")
    assert "You cannot see the conversation" in fake.requests[2]["messages"][0]["content"]
