"""The organizer never makes one record of two sibling branches: the offline one is told, a model is refused.

Real write passes into a real workspace, the session graph in SQLite and PostgreSQL, and for the model
the scripted OpenAI-compatible HTTP server: it reads the topic and merges the two branches' records.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from scriptorium.errors import ReasonCode
from scriptorium.sessions import Node, NodeKind, SessionStore
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writers.llm import LLMConfig, LLMOrganizer
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.outcomes import Failed
from scriptorium.writing.service import WriteService, WriteSettings
from tests.checks import records_citing
from tests.conftest import State
from tests.fake_openai import FakeOpenAI, serve
from tests.sessions_fixtures import T0

SAME = "The deploy script is ready to run."


def forked(store: SessionStore, twins_on_one_branch: bool = False) -> None:
    """m1, then two branches whose assistant turn says the very same words (or, for the control, the
    same words twice on one branch)."""
    turns: list[tuple[str, str | None, NodeKind, str]] = [("m1", None, NodeKind.USER, "Prepare the deploy.")]
    if twins_on_one_branch:
        turns += [("a2", "m1", NodeKind.ASSISTANT, SAME), ("a3", "a2", NodeKind.USER, "Again?"),
                  ("a4", "a3", NodeKind.ASSISTANT, SAME)]  # fmt: skip
        head = "a4"
    else:
        turns += [("a2", "m1", NodeKind.ASSISTANT, SAME), ("b2", "m1", NodeKind.ASSISTANT, SAME)]
        head = "b2"
    store.create_session("dep", {"provider": "test", "title": "Deploy"})
    nodes = [Node(n, "dep", p, str(k), k, t, T0 + timedelta(minutes=i)) for i, (n, p, k, t) in enumerate(turns)]
    store.add_nodes(nodes, head=head)


def service(ws: MemoryWorkspace, store: SessionStore, organizer: Any) -> WriteService:
    return WriteService(ws, store, VerbatimWriter(), organizer, WriteSettings(trigger_tokens=0))


def holding(ws: MemoryWorkspace, words: str) -> list[str]:
    return [r.memory_id for t in ws.snapshot().topics.values() for r in t.records if words in r.text]


def test_the_offline_organizer_merges_twins_on_one_branch_but_not_across_branches(
    ws: MemoryWorkspace, store: SessionStore
) -> None:
    forked(store)
    writes = service(ws, store, OfflineOrganizer())
    assert writes.write("dep", force=True).ok
    assert len(holding(ws, SAME)) == 2
    assert writes.reorganize().ok
    assert len(holding(ws, SAME)) == 2, "the same words on two branches are two alternatives"


def test_control_twins_on_one_branch_are_merged(ws: MemoryWorkspace, store: SessionStore) -> None:
    forked(store, twins_on_one_branch=True)
    writes = service(ws, store, OfflineOrganizer())
    assert writes.write("dep", force=True).ok
    assert writes.reorganize().ok
    assert len(holding(ws, SAME)) == 1
    assert records_citing(ws.root)["test/dep/a2"] == records_citing(ws.root)["test/dep/a4"] == 1


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    yield from serve()


def merging_model(fake: FakeOpenAI) -> None:
    """A model that reads the conversation's topic and rewrites the two branches' records as one."""

    def read(body: dict[str, Any]) -> dict[str, Any]:
        listing = next(m["content"] for m in body["messages"] if m["role"] == "user")
        path = re.search(r"topics/\S+\.md", listing)
        assert path is not None
        return {"tool_calls": [("read_topic", {"path": path.group(0)})]}

    def merge(body: dict[str, Any]) -> dict[str, Any]:
        call = next(m for m in reversed(body["messages"]) if m["role"] == "assistant" and m.get("tool_calls"))
        path = re.search(r'"path": "([^"]+)"', call["tool_calls"][0]["function"]["arguments"]).group(1)  # type: ignore[union-attr]
        text = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "tool")
        twins = [line for line in text.splitlines() if SAME in line]
        assert len(twins) == 2, text
        refs = re.findall(r"\[\^[^\]]+\]", " ".join(twins))
        ids = re.findall(r"\^(m-[0-9a-z]+)", " ".join(twins))
        merged = f"{twins[0].split(SAME)[0]}{SAME}{''.join(refs)} " + " ".join(f"^{i}" for i in ids)
        rest = [line for line in text.splitlines() if line not in twins]
        at = text.splitlines().index(twins[0])
        content = "\n".join([*rest[:at], merged, *rest[at:]]) + "\n"
        return {"tool_calls": [("write_topic", {"path": path, "content": content})]}

    fake.script = [read, merge, lambda body: {"tool_calls": [("commit_edits", {})]}]


def test_a_model_that_merges_sibling_branches_is_refused_with_its_reason_and_nothing_changes(
    ws: MemoryWorkspace, store: SessionStore, fake: FakeOpenAI
) -> None:
    forked(store)
    assert service(ws, store, OfflineOrganizer()).write("dep", force=True).ok
    before = State(ws)
    organizer = LLMOrganizer(lambda: LLMConfig(model="scripted", base_url=fake.base_url, timeout_s=10))
    merging_model(fake)
    outcome = service(ws, store, organizer).reorganize()
    assert isinstance(outcome, Failed) and outcome.reason == ReasonCode.BRANCHES_MERGED, outcome
    assert not fake.script, "the model did read the topic, merge and commit"
    before.assert_unchanged(ws)
    assert len(holding(ws, SAME)) == 2
