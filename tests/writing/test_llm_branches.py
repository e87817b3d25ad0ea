"""The LLM writer is told where a batch stands when the conversation forked, and may cite both branches."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from scriptorium.recall.branches import BranchView
from scriptorium.recall.index import RecallIndex
from scriptorium.sessions import Node, NodeKind, SessionStore
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writers.llm import LLMConfig, LLMOrganizer, LLMWriter
from scriptorium.writing.service import WriteService, WriteSettings
from tests.fake_openai import FakeOpenAI, serve, source_refs
from tests.sessions_fixtures import T0


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    yield from serve()


def user_text(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in body["messages"] if m["role"] == "user"))


def each_ref(body: dict[str, Any]) -> dict[str, Any]:
    if body["messages"][-1]["role"] == "tool":
        return {"tool_calls": [("commit_edits", {})]}
    lines = "\n\n".join(f"2026-11-01: Atlas API note from {ref} [note]({ref})" for ref in source_refs(body))
    return {"tool_calls": [("write_topic", {"path": "topics/atlas.md", "content": f"# Atlas\n\n{lines}\n"})]}


TURNS = [
    ("m1", None, NodeKind.USER, "Atlas needs a web framework."),
    ("m2", "m1", NodeKind.ASSISTANT, "Flask or FastAPI would do."),
    ("a3", "m2", NodeKind.USER, "Use Flask."),
    ("a4", "a3", NodeKind.ASSISTANT, "Atlas runs on Flask now."),
]


def test_a_batch_on_a_forked_branch_is_told_its_place_and_its_siblings(
    ws: MemoryWorkspace, store: SessionStore, fake: FakeOpenAI
) -> None:
    store.create_session("atlas", {"provider": "test", "title": "Atlas"})
    nodes = [Node(n, "atlas", p, str(k), k, t, T0 + timedelta(minutes=i)) for i, (n, p, k, t) in enumerate(TURNS)]
    store.add_nodes(nodes, head="a4")
    config = LLMConfig(model="scripted", base_url=fake.base_url, timeout_s=10)
    fake.organizer_commits = True
    fake.default = each_ref
    service = WriteService(
        ws, store, LLMWriter(lambda: config), LLMOrganizer(lambda: config), WriteSettings(trigger_tokens=0)
    )
    assert service.write("atlas", force=True).ok
    assert "forked" not in user_text(fake.requests[0]), "no fork yet: nothing to say"
    store.add_nodes(
        [
            Node("b3", "atlas", "m2", "user", NodeKind.USER, "No, use FastAPI.", T0 + timedelta(minutes=9)),
            Node(
                "b4",
                "atlas",
                "b3",
                "assistant",
                NodeKind.ASSISTANT,
                "Atlas runs on FastAPI.",
                T0 + timedelta(minutes=10),
            ),
        ],
        head="b4",
    )
    seen: list[str] = []

    def qualified(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "tool":
            return {"tool_calls": [("commit_edits", {})]}
        seen.append(user_text(body))
        text = (
            (ws.root / "topics/atlas.md").read_text()
            + "\n2026-11-01: Atlas uses FastAPI, chosen over Flask [fastapi](test/atlas/b4) [flask](test/atlas/a4)"
            + " [ask](test/atlas/b3)\n"
        )
        return {"tool_calls": [("write_topic", {"path": "topics/atlas.md", "content": text})]}

    fake.default = qualified
    assert service.write("atlas", force=False).ok
    (told,) = seen
    assert "This conversation forked" in told and "the branch the conversation is on now" in told
    assert (
        "after m2" in told
        and "[test/atlas/a3] Use Flask." in told
        and "[test/atlas/a4] Atlas runs on Flask now." in told
    )
    hits = RecallIndex(ws.root).search("Atlas FastAPI chosen over Flask", 1, branches=BranchView(store))
    assert "chosen over Flask" in hits[0].snippet and hits[0].branch == "current", "a writer may cite both"
