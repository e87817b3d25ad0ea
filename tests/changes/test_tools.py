"""Model tools: definitions a function-calling model can use, and calls that return errors as values."""

from __future__ import annotations

import json

from scriptorium.runtimes.mcp.tools import call_tool, tool_definitions
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import State, message


def test_the_update_tool_exposes_only_the_four_official_operations() -> None:
    definitions = {d["function"]["name"]: d["function"] for d in tool_definitions()}
    assert set(definitions) == {"memory_status", "memory_get", "memory_search", "memory_update", "memory_remember"}
    text = json.dumps(definitions["memory_update"]["parameters"])
    ops = {op for op in ("create_record", "update_record", "delete_record", "move_records") if f'"{op}"' in text}
    assert ops == {"create_record", "update_record", "delete_record", "move_records"}
    assert "source_refs" not in text and "merge_records" not in text and "provenance" not in text
    json.dumps(tool_definitions())  # serializable as sent to a model


def test_a_model_creates_reads_and_gets_errors_it_can_act_on(seeded: MemoryWorkspace) -> None:
    created = call_tool(
        seeded,
        "memory_update",
        {
            "memory_changes": [
                {
                    "op": "create_record",
                    "content": "The user prefers tea.",
                    "time": "2026-11-02",
                    "sources": [{"source": "test/t1/m1", "label": "tea"}],
                    "destination": {"topic_path": "topics/preferences.md", "headings": ["Drinks"]},
                }
            ],
            "message": "remember tea",
        },
    )
    assert created["ok"] and created["git_committed"]
    (rid,) = created["created_ids"]
    got = call_tool(seeded, "memory_get", {"memory_id": rid})
    assert got["ok"] and got["sources"] == [{"source": "test/t1/m1", "label": "tea"}]
    assert call_tool(seeded, "memory_status", {})["records"] == 1
    state = State(seeded)
    missing = call_tool(seeded, "memory_get", {"memory_id": "m-000000000000"})
    assert missing == {**missing, "ok": False, "reason": "NOT_FOUND", "retryable": False}
    bad = call_tool(seeded, "memory_update", {"memory_changes": [{"op": "merge_records"}]})
    assert not bad["ok"] and bad["reason"] == "INVALID_ARGUMENT"
    uncited = call_tool(
        seeded,
        "memory_update",
        {"memory_changes": [{"op": "update_record", "memory_id": rid, "content": "x", "time": None, "sources": []}]},
    )
    assert not uncited["ok"] and uncited["reason"] == "INVALID_ARGUMENT" and "source" in uncited["message"]
    assert call_tool(seeded, "memory_forget", {})["reason"] == "INVALID_ARGUMENT"
    state.assert_unchanged(seeded)


def test_memory_search_finds_trusted_records_and_refuses_bad_arguments(seeded: MemoryWorkspace) -> None:
    with seeded.lock():
        paths = seeded.archive_sources([message(40, "hearsay", thread="web", trust="pending")])
    seeded.transact(lambda stage: None, message="archive", appended_sources=paths)
    seeded.apply_changes(
        [
            TopicChange("topics/tea.md", "create", "# Tea\n\nThe user drinks oolong tea daily [k](test/t1/m1).\n"),
            TopicChange("topics/rumour.md", "create", "# Rumour\n\nThe user hates oolong tea [k](test/web/m40).\n"),
        ],
        message="seed",
    )
    found = call_tool(seeded, "memory_search", {"query": "oolong tea", "limit": 3})
    assert found["ok"] and [r["topic"] for r in found["results"]] == ["topics/tea.md"]
    assert found["results"][0]["memory_id"] == seeded.snapshot().topics["topics/tea.md"].records[0].memory_id
    state = State(seeded)
    for bad in ({}, {"query": ""}, {"query": "tea", "limit": 0}, {"query": "tea", "limit": "5"}, {"query": 3}):
        refused = call_tool(seeded, "memory_search", bad)
        assert refused["ok"] is False and refused["reason"] == "INVALID_ARGUMENT", bad
    state.assert_unchanged(seeded)
