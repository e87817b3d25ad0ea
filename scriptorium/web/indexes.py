"""What the Memory page looks up across all of memory, kept per topic blob so that a new revision costs what
changed: how many records each date holds (the Timeline's periods and badges) and which topics cite each
archived source (a source's "Cited by").

Each index remembers, per topic, the blob it last read and what that topic added. Brought up to a snapshot
(:meth:`PerTopic.refresh`), it compares blob IDs — one lookup per topic, no parsing — and reads again only
the topics whose blob changed, appeared or went; the same snapshot again costs nothing. Dates are the
Timeline files' own (:func:`~scriptorium.workspace.topics.timeline_path`): a day, or a month or a year for
records dated only so far.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.topics import ParsedTopic, Record, timeline_path

T = TypeVar("T")


def file_date(path: str) -> str:
    """The date a Timeline file holds: ``timeline/2026/2026-11/2026-11-02.md`` → ``2026-11-02``."""
    return path.rsplit("/", 1)[1].removesuffix(".md")


class PerTopic(Generic[T]):
    """Something each topic adds to an index, kept by the topic's blob ID."""

    def __init__(self) -> None:
        self.tree: str | None = None
        """The tree the index was last brought up to."""
        self.reads = 0
        """Topics read so far (what refreshes cost; tests count it)."""
        self._seen: dict[str, tuple[str, T]] = {}
        self._lock = threading.Lock()

    def contribution(self, topic: ParsedTopic) -> T:
        raise NotImplementedError

    def add(self, path: str, value: T) -> None:
        raise NotImplementedError

    def remove(self, path: str, value: T) -> None:
        raise NotImplementedError

    def refresh(self, snap: Snapshot) -> None:
        """Bring the index up to ``snap``: only topics whose blob differs from the one last read are read."""
        with self._lock:
            if snap.tree == self.tree:
                return
            seen = self._seen
            for path, sha in snap.topic_shas.items():
                old = seen.get(path)
                if old is not None and old[0] == sha:
                    continue
                if old is not None:
                    self.remove(path, old[1])
                value = self.contribution(snap.topics[path])
                self.reads += 1
                seen[path] = (sha, value)
                self.add(path, value)
            if len(seen) > len(snap.topic_shas):  # every topic of snap is in seen: the rest went
                for path in [p for p in seen if p not in snap.topic_shas]:
                    self.remove(path, seen.pop(path)[1])
            self.tree = snap.tree


@dataclass(frozen=True, slots=True)
class Calendar:
    """The years, months and days that hold records, newest first, and how many records each holds."""

    under: dict[str, int]
    """Records under each year, month and day: its own (dated only so far) and its months' or days'."""
    years: list[str]
    months: dict[str, list[str]]
    """Year → its months."""
    days: dict[str, list[str]]
    """Month → its days."""


class DateCounts(PerTopic[dict[str, int]]):
    """Records by date, over every topic: ``counts[date]``, dates as the Timeline files hold them."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}
        self._calendar: Calendar | None = None

    def contribution(self, topic: ParsedTopic) -> dict[str, int]:
        return {file_date(path): len(records) for path, records in topic.by_timeline.items()}

    def add(self, path: str, value: dict[str, int]) -> None:
        self._calendar = None
        for date, count in value.items():
            self.counts[date] = self.counts.get(date, 0) + count

    def remove(self, path: str, value: dict[str, int]) -> None:
        self._calendar = None
        for date, count in value.items():
            left = self.counts[date] - count
            if left:
                self.counts[date] = left
            else:
                del self.counts[date]

    def calendar(self) -> Calendar:
        """The calendar of :attr:`counts` (made again only after a refresh changed them: one pass over the
        dates, never over records)."""
        calendar = self._calendar
        if calendar is None:
            under: dict[str, int] = {}
            months: dict[str, set[str]] = {}
            days: dict[str, list[str]] = {}
            for date, count in self.counts.items():
                for period in {date[:4], date[:7], date}:
                    under[period] = under.get(period, 0) + count
                months.setdefault(date[:4], set())
                if len(date) >= 7:
                    months[date[:4]].add(date[:7])
                if len(date) == 10:
                    days.setdefault(date[:7], []).append(date)
            calendar = self._calendar = Calendar(
                under,
                sorted(months, reverse=True),
                {year: sorted(found, reverse=True) for year, found in months.items()},
                {month: sorted(found, reverse=True) for month, found in days.items()},
            )
        return calendar


def records_on(snap: Snapshot, date: str) -> list[Record]:
    """The records of one Timeline date in the Timeline files' order (topic path, then position in it)."""
    key = timeline_path(date)
    topics = sorted(snap.timeline_topics(key), key=lambda topic: topic.path)
    return [record for topic in topics for record in topic.by_timeline.get(key, ())]


class Citations(PerTopic[frozenset[str]]):
    """Which topics' footnotes cite each archived source (``citing(path)``)."""

    def __init__(self) -> None:
        super().__init__()
        self._citing: dict[str, set[str]] = {}

    def contribution(self, topic: ParsedTopic) -> frozenset[str]:
        return frozenset(note.source_path for note in topic.footnotes.values() if note.source_path)

    def add(self, path: str, value: frozenset[str]) -> None:
        for source in value:
            self._citing.setdefault(source, set()).add(path)

    def remove(self, path: str, value: frozenset[str]) -> None:
        for source in value:
            topics = self._citing[source]
            topics.discard(path)
            if not topics:
                del self._citing[source]

    def citing(self, source: str) -> list[str]:
        """The topics with a footnote citing ``source`` (an archive path), sorted."""
        return sorted(self._citing.get(source, ()))


def cited_by(snap: Snapshot, source: str, topics: Iterable[str]) -> list[Record]:
    """The records of ``topics`` that cite ``source``, in topic and then record order."""
    found: list[Record] = []
    for path in topics:
        topic = snap.topics.get(path)
        if topic is not None:
            found += [record for record in topic.records if source in topic.cited_paths(record)]
    return found
