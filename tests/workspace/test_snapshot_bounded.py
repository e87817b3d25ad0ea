"""A snapshot holds its indexes, not its topics: every topic but those a transaction changed is parsed when
asked for, through the workspace's parse cache, which is bounded by memory — so a process's parsed topics do
not grow with the memory (a year's snapshot held every topic parsed: hundreds of MB in every server, worker
and forget). Its block-link and citation indexes, kept by every derive, answer what a scan of every topic
would."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange, topics
from scriptorium.workspace import workspace as workspace_module
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.topics import ParsedTopic

TOPICS = 40


def _archive(ws: MemoryWorkspace) -> None:
    messages = [SourceMessage("test", f"t{n % 5}", f"m{n}", "user", "2026-11-01T00:00:00Z", f"m{n}") for n in range(10)]
    with ws.lock():
        paths = ws.archive_sources(messages)
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)


def _topic(n: int, links: str = "") -> TopicChange:
    body = "".join(
        f"2026-11-0{k + 1}: Fact {n}.{k} of a topic [k](test/t{(n + k) % 5}/m{(n + k) % 10}).\n\n" for k in range(3)
    )
    return TopicChange(f"topics/t{n:02d}.md", "create", f"# T{n}\n\n{body}{links}")


def _live_parsed() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is ParsedTopic)


def _check_indexes(snap: Snapshot) -> None:
    every = [snap.topics[path] for path in snap.topic_shas]
    assert snap.all_edges() == sorted({edge for topic in every for edge in topic.edges})
    for folder in {f"sources/test/t{n}" for n in range(6)}:
        cited = sorted(
            t.path for t in every if any((n.source_path or "").startswith(folder + "/") for n in t.footnotes.values())
        )
        assert snap.topics_citing({folder}) == cited, folder


def test_a_snapshot_of_many_topics_keeps_few_parsed_and_its_indexes_match_a_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    _archive(ws)
    ws.apply_changes([_topic(n) for n in range(TOPICS)], message="many")
    ids = [line.rsplit("^", 1)[1] for line in ws.read_topic("topics/t00.md").splitlines() if " ^" in line]
    link = f"See [[topics/t00.md#^{ids[0]}|the first fact]] [k](test/t1/m1).\n"
    ws.apply_changes([TopicChange("topics/links.md", "create", f"# Links\n\n{link}")], message="links")
    ws.close()

    # A memory far larger than the parse caches: room for about three parsed topics in each.
    one = topics.parsed_size(len((tmp_path / "memory/topics/t00.md").read_bytes()))
    monkeypatch.setattr(workspace_module, "PARSE_CACHE_BYTES", 3 * one)
    monkeypatch.setattr(topics, "_memo", topics.BoundedCache(1_000_000, 3 * one))
    before = _live_parsed()
    fresh = MemoryWorkspace(tmp_path / "memory")
    try:
        snap = fresh.snapshot()
        assert len(snap.topics) == TOPICS + 1
        assert _live_parsed() - before <= 8, "the snapshot holds the topics it parsed to build its indexes"
        _check_indexes(snap)
        assert [r.memory_id for r in snap.incoming_links({ids[0]})] == [
            snap.topics["topics/links.md"].records[0].memory_id
        ]

        # A change: the derived snapshot holds the changed topic until it is installed, then lets it go;
        # the snapshot it was derived from keeps its indexes as they were (they share what neither changes).
        def indexes(snap: Snapshot) -> tuple[dict[str, set[str]], ...]:
            return tuple({k: set(v) for k, v in index.items()} for index in (snap.timeline_members, snap.citing))

        kept = indexes(snap), dict(snap.id_to_topic), list(snap.creation)
        fresh.apply_changes([_topic(TOPICS), TopicChange("topics/t01.md", "delete")], message="one more, one less")
        assert (indexes(snap), dict(snap.id_to_topic), list(snap.creation)) == kept
        after = fresh.snapshot()
        assert after is not snap and len(after.topics) == TOPICS + 1 and "topics/t01.md" not in after.topics
        assert not after.topics._held, "installed topics are the parse cache's to keep, not the snapshot's"
        _check_indexes(after)
        assert _live_parsed() - before <= 10
    finally:
        fresh.close()
