"""An organize costs what changed, not what is stored: after many conversations are written, a pass that
writes one more (and organizes) reads and parses a bounded number of topics, however many exist; the next
process's first organize too (what changed since the last organize is kept with its counters). The nightly
organize still looks at every topic, and duplicates the passes left are merged when their topic changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scriptorium.sessions import SessionStore
from scriptorium.workspace import MemoryWorkspace, staging, topics
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.service import WriteService, WriteSettings
from tests.sessions_fixtures import T0, chain


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[MemoryWorkspace]:
    workspace = MemoryWorkspace.init(tmp_path / "memory")
    yield workspace
    workspace.close()


def service(ws: MemoryWorkspace, store: SessionStore) -> WriteService:
    return WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(organize_batches=1))


def conversation(store: SessionStore, n: int) -> str:
    sid = f"s{n}"
    store.create_session(sid, {"provider": "test", "title": f"Conversation number {n}"}, created_at=T0)
    store.add_nodes(chain(sid, [f"u{n}", f"a{n}"]), head=f"a{n}")
    return sid


class Reads:
    """Topic reads in staging and real parses (the memo's misses) while counting."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = self.parses = 0
        read, parse = staging.Staging.read, topics._parse_topic

        def counted_read(stage: staging.Staging, path: str) -> str:
            self.reads += 1
            return read(stage, path)

        def counted_parse(path: str, text: str) -> topics.ParsedTopic:
            self.parses += 1
            return parse(path, text)

        monkeypatch.setattr(staging.Staging, "read", counted_read)
        monkeypatch.setattr(topics, "_parse_topic", counted_parse)

    def reset(self) -> None:
        self.reads = self.parses = 0


@pytest.mark.parametrize("stored", [20, 80])
def test_a_pass_organizes_what_changed_not_every_topic(
    ws: MemoryWorkspace, store: SessionStore, monkeypatch: pytest.MonkeyPatch, stored: int
) -> None:
    writes = service(ws, store)
    for n in range(stored):
        assert writes.write(conversation(store, n), force=True).ok
    assert len(ws.topics()) >= stored
    topics.clear_memo()
    counted = Reads(monkeypatch)
    later = service(ws, store)  # a new process: nothing settled in memory
    assert later.write(conversation(store, stored), force=True).ok
    assert counted.reads <= 12, counted.reads
    assert counted.parses <= 12, counted.parses


def test_the_nightly_organize_looks_at_every_topic(
    ws: MemoryWorkspace, store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = service(ws, store)
    for n in range(12):
        assert writes.write(conversation(store, n), force=True).ok
    counted = Reads(monkeypatch)
    writes.reorganize()
    assert counted.reads >= 12


def test_duplicates_an_edit_left_are_merged_when_their_topic_changes(ws: MemoryWorkspace, store: SessionStore) -> None:
    from scriptorium.workspace import TopicChange

    writes = service(ws, store)
    sid = conversation(store, 1)
    assert writes.write(sid, force=True).ok
    [path] = [p for p in ws.topics() if "conversation-number-1" in p]
    text = ws.read_topic(path)
    record = next(line for line in text.splitlines() if "u1: the" in line)
    # A person pastes the same statement again (same words, its own citation and no block ID of its own).
    again = record.rsplit(" ^", 1)[0]
    ws.apply_changes([TopicChange(path, "update", text.rstrip("\n") + "\n\n" + again + "\n")], message="paste")
    assert ws.read_topic(path).count("u1: the") == 2
    store.add_nodes(chain(sid, ["u1b", "a1b"], parent="a1", start=2), head="a1b")
    assert writes.write(sid, force=True).ok
    assert ws.read_topic(path).count("u1: the") == 1
