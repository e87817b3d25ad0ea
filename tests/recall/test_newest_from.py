"""A session's opening asks for the newest records of its project's sessions (:meth:`RecallIndex.newest_from`).
It looks them up by conversation, through a map from each thread to the records citing it, kept up to date by
every refresh — it scanned every record of the memory on every SessionStart, so an opening grew with the
year. The map must answer exactly what the scan did, after any edit."""

from __future__ import annotations

from pathlib import Path

from scriptorium.recall.index import RecallIndex
from scriptorium.recall.records import source_thread
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import message

THREADS = ("a", "b", "c", "d")


def _scan(index: RecallIndex, threads: set[str], limit: int) -> list[str]:
    """The reference: every live trusted record citing one of ``threads``, newest first."""
    state = index._state
    assert state is not None
    found = [
        (doc.date or "", doc.memory_id)
        for slot, doc in enumerate(state.docs)
        if doc is not None and state.trusted[slot] and any(source_thread(s) in threads for s in doc.sources)
    ]
    return [memory_id for _date, memory_id in sorted(found, reverse=True)[:limit]]


def _world(ws: MemoryWorkspace) -> None:
    with ws.lock():
        paths = ws.archive_sources([message(n, thread=t) for t in THREADS for n in range(4)])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)


def _topic(name: str, cites: list[tuple[str, int, int]]) -> TopicChange:
    body = "".join(f"2026-11-{day:02d}: Fact {t}{n} of {name} [k](test/{t}/m{n}).\n\n" for t, n, day in cites)
    return TopicChange(f"topics/{name}.md", "create", f"# {name}\n\n{body}")


def _check(index: RecallIndex) -> None:
    index.refresh()
    for wanted in ({"a"}, {"b"}, {"a", "c"}, {"d"}, {"zz"}, set(THREADS)):
        for limit in (1, 2, 5):  # a small limit ends the walk early: the threads' newest dates must be current
            got = [hit.memory_id for hit in index.newest_from(wanted, limit)]
            assert got == _scan(index, wanted, limit), (wanted, limit)


def test_the_opening_lookup_answers_what_a_scan_of_every_record_does_after_every_edit(tmp_path: Path) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    _world(ws)
    ws.apply_changes(
        [_topic("x", [("a", 0, 3), ("b", 1, 5), ("a", 2, 7)]), _topic("y", [("c", 0, 2), ("b", 2, 9)])],
        message="first",
    )
    index = RecallIndex(ws.root)
    _check(index)  # builds the map
    assert [h.memory_id for h in index.newest_from({"a"}, 5)], "thread a's records are found"

    # Topics go and come, their records citing other threads: the map follows every refresh.
    ws.apply_changes([TopicChange("topics/x.md", "delete"), _topic("w", [("c", 3, 11), ("b", 1, 5)])], message="x→w")
    _check(index)
    assert not index.newest_from({"a"}, 5)
    ws.apply_changes([TopicChange("topics/y.md", "delete"), _topic("z", [("a", 1, 12), ("d", 0, 1)])], message="y→z")
    _check(index)
    assert index.newest_from({"a"}, 5)
    # An old thread's new record becomes the newest of all: its thread's newest date moves up with it.
    ws.apply_changes([_topic("v", [("d", 2, 28)])], message="v")
    _check(index)
    assert [h.memory_id for h in index.newest_from(set(THREADS), 1)] == _scan(index, set(THREADS), 1)

    fresh = RecallIndex(ws.root)  # a new process: loaded from the disk cache, map made on first use
    _check(fresh)
    ws.close()


class _CountingDocs(list):  # type: ignore[type-arg]
    """The index's documents, counting the reads of one lookup."""

    reads = 0

    def __getitem__(self, key: object) -> object:
        type(self).reads += 1
        return super().__getitem__(key)  # type: ignore[index]


def test_an_opening_reads_the_newest_sessions_records_not_the_projects_whole_history(tmp_path: Path) -> None:
    """Forty conversations of one project, a record each on its own day: the five newest are found by reading
    about five records, not forty (an opening grew with the project's year)."""
    ws = MemoryWorkspace.init(tmp_path / "memory")
    threads = [f"t{n:02d}" for n in range(40)]
    with ws.lock():
        paths = ws.archive_sources([message(0, thread=t) for t in threads])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    body = "".join(
        f"2026-{1 + n // 28:02d}-{1 + n % 28:02d}: Fact of {t} [k](test/{t}/m0).\n\n" for n, t in enumerate(threads)
    )
    ws.apply_changes([TopicChange("topics/p.md", "create", f"# p\n\n{body}")], message="p")
    index = RecallIndex(ws.root)
    index.refresh()
    first = [hit.memory_id for hit in index.newest_from(set(threads), 5)]  # learns each thread's newest date
    assert first == _scan(index, set(threads), 5)
    state = index._state
    assert state is not None
    state.docs = _CountingDocs(state.docs)
    _CountingDocs.reads = 0
    assert [hit.memory_id for hit in index.newest_from(set(threads), 5)] == first
    assert _CountingDocs.reads <= 2 * 5, f"{_CountingDocs.reads} records read for the 5 newest of 40"
    ws.close()
