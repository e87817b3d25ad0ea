"""Where a record came from: its archived sources and the commits that introduced and last changed it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scriptorium.changes.provenance import provenance
from scriptorium.errors import NotFound
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import State, message
from tests.helpers.cli import run


def test_a_records_sources_and_history_follow_its_writing_rewriting_and_move(seeded: MemoryWorkspace) -> None:
    first = seeded.apply_changes(
        [
            TopicChange(
                "topics/a.md", "create", "# A\n\n2026-11-02: Tea at nine [tea](test/t1/m1) [again](test/t1/m2).\n"
            )
        ],
        message="write a",
    )
    rid = seeded.snapshot().topics["topics/a.md"].records[0].memory_id
    seeded.apply_changes([TopicChange("topics/b.md", "create", "Unrelated [k](test/t1/m3).\n")], message="write b")
    found = provenance(seeded, rid)["provenance"]
    assert found["introduced"]["commit"] == first.commit == found["last_changed"]["commit"]
    assert found["changes"] == 1, "a commit not touching the record is not part of its history"
    assert [s["source"] for s in found["sources"]] == ["test/t1/m1", "test/t1/m2"]
    m1 = found["sources"][0]
    assert (m1["session"], m1["message"], m1["role"], m1["trust"]) == ("t1", "m1", "user", "trusted")
    assert m1["time"] == "2026-11-02T10:00:00Z" and m1["path"] == "sources/test/e5/t1/m1.md"

    text = seeded.read_topic("topics/a.md").replace("Tea at nine", "Tea at ten")
    rewritten = seeded.apply_changes([TopicChange("topics/a.md", "update", text)], message="rewrite")
    moved_text = text.replace("# A", "# C")
    moved = seeded.apply_changes(
        [TopicChange("topics/c.md", "create", moved_text), TopicChange("topics/a.md", "delete")], message="move"
    )
    after = provenance(seeded, rid)
    assert after["topic_path"] == "topics/c.md" and "Tea at ten" in after["content"]
    history = after["provenance"]
    assert history["introduced"]["commit"] == first.commit
    assert history["last_changed"]["commit"] == moved.commit and history["last_changed"]["message"] == "move"
    assert history["changes"] == 3 and rewritten.commit not in (first.commit, moved.commit)


@pytest.mark.parametrize("memory_id", ["m-000000000000", "x.*", "^", "m-1' --all"])
def test_an_unknown_record_is_not_found_and_nothing_changes(seeded: MemoryWorkspace, memory_id: str) -> None:
    before = State(seeded)
    with pytest.raises(NotFound):
        provenance(seeded, memory_id)
    before.assert_unchanged(seeded)


def test_memory_why_at_the_shell(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert run("ingest", "examples/transcript.jsonl", "--state", str(state)).returncode == 0
    ws = MemoryWorkspace(state / "memory")
    rid = next(iter(ws.snapshot().id_to_topic))
    ws.close()
    out = run("memory", "why", rid, "--state", str(state), "--json")
    assert out.returncode == 0, out.stderr
    payload = json.loads(out.stdout)
    assert payload["memory_id"] == rid and payload["provenance"]["sources"]
    assert payload["provenance"]["introduced"]["commit"]
    human = run("memory", "why", rid, "--state", str(state))
    assert "cites " in human.stdout and "introduced: " in human.stdout
    missing = run("memory", "why", "m-000000000000", "--state", str(state))
    assert missing.returncode == 3 and "NOT_FOUND" in missing.stderr


def test_a_conversations_sources_are_listed_in_order_with_the_records_citing_them(seeded: MemoryWorkspace) -> None:
    from scriptorium.changes.provenance import conversation_sources

    seeded.apply_changes(
        [
            TopicChange(
                "topics/a.md", "create", "Tea [tea](test/t1/m1) [again](test/t1/m2).\n\nCoffee [c](test/t1/m2).\n"
            )
        ],
        message="write a",
    )
    ids = [r.memory_id for r in seeded.snapshot().topics["topics/a.md"].records]
    by_thread = conversation_sources(seeded, thread="test/t1")
    assert conversation_sources(seeded, session="t1")["sources"] == by_thread["sources"]
    listed = {s["message"]: s for s in by_thread["sources"]}
    assert sorted(listed) == sorted(f"m{n}" for n in range(10))
    assert [s["time"] for s in by_thread["sources"]] == sorted(s["time"] for s in by_thread["sources"])
    assert listed["m1"]["cited_by"] == [ids[0]] and listed["m2"]["cited_by"] == sorted(ids)
    assert listed["m3"]["cited_by"] == [] and listed["m3"]["trust"] == "trusted"


@pytest.mark.parametrize(
    ("thread", "session", "error"),
    [
        (None, None, "INVALID_ARGUMENT"),
        ("test/t1", "t1", "INVALID_ARGUMENT"),
        ("no-slash", None, "INVALID_ARGUMENT"),
        ("test/t9", None, "NOT_FOUND"),
        ("test/../../etc", None, "NOT_FOUND"),
        (None, "../t1", "NOT_FOUND"),
    ],
)
def test_naming_no_conversation_or_an_unknown_one_is_refused(
    seeded: MemoryWorkspace, thread: str | None, session: str | None, error: str
) -> None:
    from scriptorium.changes.provenance import conversation_sources
    from scriptorium.errors import ScriptoriumError

    with pytest.raises(ScriptoriumError) as raised:
        conversation_sources(seeded, thread=thread, session=session)
    assert str(raised.value.reason) == error


def test_memory_sources_at_the_shell(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert run("ingest", "examples/transcript.jsonl", "--state", str(state)).returncode == 0
    ws = MemoryWorkspace(state / "memory")
    rid = next(iter(ws.snapshot().id_to_topic))
    session = provenance(ws, rid)["provenance"]["sources"][0]["session"]
    ws.close()
    out = run("memory", "sources", "--session", session, "--state", str(state), "--json")
    assert out.returncode == 0, out.stderr
    sources = json.loads(out.stdout)["sources"]
    assert sources and any(rid in s["cited_by"] for s in sources)
    assert rid in run("memory", "sources", "--session", session, "--state", str(state)).stdout
    assert run("memory", "sources", "--state", str(state)).returncode == 2, "one of --thread or --session"


def test_a_conversations_sources_parse_only_the_topics_citing_it(
    seeded: MemoryWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing reads the topics the snapshot's citation index names, not every topic of the memory."""
    from scriptorium.changes.provenance import conversation_sources
    from scriptorium.workspace import topics

    with seeded.lock():
        archived = seeded.archive_sources([message(n, thread="t2") for n in range(30)])
        seeded.transact(lambda stage: None, message="archive t2", appended_sources=archived)
    others = [TopicChange(f"topics/other-{n}.md", "create", f"Fact {n} [k](test/t2/m{n}).\n") for n in range(30)]
    seeded.apply_changes([TopicChange("topics/a.md", "create", "Tea [tea](test/t1/m1).\n"), *others], message="w")
    fresh = MemoryWorkspace(seeded.root)  # a new process: nothing parsed yet
    try:
        fresh.snapshot()
        parses = []
        parse = topics._parse_topic
        monkeypatch.setattr(topics, "_memo", topics.BoundedCache(1_000_000, 1))
        monkeypatch.setattr(topics, "_parse_topic", lambda path, text: parses.append(path) or parse(path, text))
        fresh._caches.parsed.clear()
        listed = {s["message"]: s for s in conversation_sources(fresh, thread="test/t1")["sources"]}
        assert listed["m1"]["cited_by"] == [fresh.snapshot().topics["topics/a.md"].records[0].memory_id]
        assert set(parses) <= {"topics/a.md"}, parses
    finally:
        fresh.close()
