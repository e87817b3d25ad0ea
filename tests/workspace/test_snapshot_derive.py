"""A derived snapshot answers as one built from its topics, leaves the snapshot it came from as it was, and
costs the change: its indexes share with the base what the change leaves alone (persistent maps and the
creation order in chunks), so deriving at a year's size allocates what it does at a month's."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scriptorium.workspace import snapshot as snapshot_module
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.topics import ParsedTopic, parse_topic

PATHS = [f"topics/t{n}.md" for n in range(6)]


def _text(path: str, records: list[tuple[int, int, int, int | None]]) -> str:
    """Records as (day, id number, cited conversation, linked id number or None); record IDs are unique, as
    validation keeps them in a workspace (the topic's name is part of each)."""
    name = path.rsplit("/", 1)[1].removesuffix(".md")
    lines = [f"# {path}", ""]
    for day, number, thread, link in records:
        linked = f" see [[topics/t0.md#^t0-{link}|it]]" if link is not None else ""
        cite = f"[k](../sources/p/t{thread}/m{number}.md)"
        lines += [f"2026-03-{day:02d}: Fact {number}{linked} {cite} ^{name}-{number}", ""]
    return "\n".join(lines)


def _topic(path: str, records: list[tuple[int, int, int, int | None]]) -> tuple[str, ParsedTopic]:
    text = _text(path, records)
    return f"sha-{hash(text) & 0xFFFFFFFF:x}", parse_topic(path, text)


def _indexes(snap: Snapshot) -> tuple[Any, ...]:
    return (
        dict(snap.topic_shas),
        dict(snap.id_to_topic),
        {key: set(members) for key, members in snap.timeline_members.items()},
        list(snap.creation),
        {path: list(edges) for path, edges in snap.edges.items()},
        {key: set(members) for key, members in snap.citing.items()},
        snap.name_keys and dict(snap.name_keys),
    )


RECORD = st.tuples(st.integers(1, 28), st.integers(0, 40), st.integers(0, 3), st.none() | st.integers(0, 40))
RECORDS = st.lists(RECORD, max_size=6, unique_by=lambda r: r[1])
CHANGE = st.dictionaries(st.sampled_from(PATHS), st.none() | RECORDS, min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.lists(CHANGE, min_size=1, max_size=8), st.booleans(), st.booleans())
def test_derived_snapshots_answer_as_built_ones_and_leave_their_bases_as_they_were(
    changes: list[dict[str, list[tuple[int, int, int, int | None]] | None]], named: bool, restored: bool
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(snapshot_module, "CHUNK", 2)  # chunks split and empty at these sizes
        topics: dict[str, tuple[str, ParsedTopic]] = {}

        def load(path: str, sha: str) -> ParsedTopic:
            return parsed[(path, sha)]

        parsed: dict[tuple[str, str], ParsedTopic] = {}
        snap = Snapshot.build("tree", None, {}, load)
        if restored:  # the plain dicts a process reads from the cache
            snap = Snapshot.restore({"tree": "tree", "commit": None, **snap.to_cache()}, load)
        history: list[tuple[Snapshot, tuple[Any, ...]]] = []
        for change in changes:
            if named:
                snap.topics_named_like("x")
            history.append((snap, _indexes(snap)))
            entries = {path: None if records is None else _topic(path, records) for path, records in change.items()}
            for path, entry in entries.items():
                if entry is None:
                    topics.pop(path, None)
                else:
                    topics[path] = entry
                    parsed[(path, entry[0])] = entry[1]
            snap = snap.derive(entries)
            built = Snapshot.build("tree", None, {path: sha for path, (sha, _t) in topics.items()}, load)
            if snap.name_keys is not None:
                built.topics_named_like("x")
            assert _indexes(snap) == _indexes(built)
            assert [r.block_ids for r in snap.newest(5)] == [r.block_ids for r in built.newest(5)]
        for base, kept in history:
            assert _indexes(base) == kept, "a derive changed the snapshot it came from"


def _year(records: int) -> tuple[Snapshot, dict[str, tuple[str, ParsedTopic]]]:
    """A snapshot of ``records`` records, 50 a topic, and one more topic's change to derive."""
    topics = {
        f"topics/t{n}.md": _topic(f"topics/t{n}.md", [(1 + i % 28, n * 50 + i, n, None) for i in range(50)])
        for n in range(records // 50)
    }
    snap = Snapshot.build("tree", None, {path: sha for path, (sha, _t) in topics.items()}, lambda p, s: topics[p][1])
    return snap, {"topics/new.md": _topic("topics/new.md", [(3, 10**7 + i, 1, None) for i in range(20)])}


def _allocated(snap: Snapshot, change: dict[str, tuple[str, ParsedTopic]]) -> int:
    tracemalloc.start()
    try:
        derived = snap.derive(change)
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert "topics/new.md" in derived.topic_shas
    return size


def test_a_derive_allocates_for_its_change_not_for_the_memory() -> None:
    small, change = _year(2_000)
    large, _ = _year(40_000)
    _allocated(small, change), _allocated(large, change)  # warm: the persistent maps' first use
    at_month, at_year = _allocated(small, change), _allocated(large, change)
    # A copy of the year's indexes is megabytes (a dict of 40,000 record IDs alone over 1 MB).
    assert at_year < 2 * at_month + 64 * 1024, (at_month, at_year)
