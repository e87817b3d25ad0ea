"""A parsed view of one installed tree, derived incrementally from the previous one.

A transaction reads its baseline as a :class:`Snapshot` of the installed tree
(never of the staging copy). Parsed topics are cached by ``(path, blob sha)``
and the next snapshot is derived from the previous one by replacing only the
changed topics, so a small edit costs what it changes, not the workspace size.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scriptorium.workspace.paths import topic_name_key
from scriptorium.workspace.topics import CreationKey, ParsedTopic, Record, creation_key

CreationEntry = tuple[CreationKey, str, int]


@dataclass(slots=True)
class Snapshot:
    """Topics of one installed tree and the indexes validation and views need."""

    tree: str
    commit: str | None
    topic_shas: dict[str, str]
    topics: dict[str, ParsedTopic]
    id_to_topic: dict[str, str] = field(default_factory=dict)
    timeline_members: dict[str, set[str]] = field(default_factory=dict)
    creation: list[CreationEntry] = field(default_factory=list)
    """Every record as (creation key, topic, position), sorted: Recent is its tail."""
    name_keys: dict[str, tuple[str, ...]] | None = None
    """Topic paths by what they look like (:func:`~scriptorium.workspace.paths.topic_name_key`): made the
    first time a new topic is named (:meth:`topics_named_like`), then kept by :meth:`derive` at the cost of
    the changed topics."""

    @classmethod
    def build(
        cls,
        tree: str,
        commit: str | None,
        topic_shas: Mapping[str, str],
        parse: Callable[[str, str], ParsedTopic],
    ) -> Snapshot:
        snap = cls(tree, commit, dict(topic_shas), {})
        for path, sha in topic_shas.items():
            topic = parse(path, sha)
            snap._index(topic)
            snap.creation += [(creation_key(r), path, r.position) for r in topic.records]
        snap.creation.sort()
        return snap

    def _index(self, topic: ParsedTopic) -> None:
        self.topics[topic.path] = topic
        for record in topic.records:
            for bid in record.block_ids:
                self.id_to_topic[bid] = topic.path
        for key in topic.by_timeline:
            self.timeline_members.setdefault(key, set()).add(topic.path)

    def _index_name(self, path: str) -> None:
        if self.name_keys is not None:
            key = topic_name_key(path)
            self.name_keys[key] = (*self.name_keys.get(key, ()), path)

    def _unindex_name(self, path: str) -> None:
        if self.name_keys is not None:
            key = topic_name_key(path)
            kept = tuple(p for p in self.name_keys.get(key, ()) if p != path)
            if kept:
                self.name_keys[key] = kept
            else:
                self.name_keys.pop(key, None)

    def topics_named_like(self, key: str) -> tuple[str, ...]:
        """The topics whose path has ``key`` (:func:`~scriptorium.workspace.paths.topic_name_key`)."""
        if self.name_keys is None:
            self.name_keys = {}
            for path in self.topic_shas:
                self._index_name(path)
        return self.name_keys.get(key, ())

    def _unindex(self, path: str) -> None:
        topic = self.topics.pop(path, None)
        if topic is None:
            return
        for record in topic.records:
            for bid in record.block_ids:
                if self.id_to_topic.get(bid) == path:
                    del self.id_to_topic[bid]
            entry = (creation_key(record), path, record.position)
            index = bisect.bisect_left(self.creation, entry)
            if index < len(self.creation) and self.creation[index] == entry:
                del self.creation[index]
        for key in topic.by_timeline:
            members = self.timeline_members[key]
            members.discard(path)
            if not members:
                del self.timeline_members[key]

    def derive(self, changed: Mapping[str, tuple[str, ParsedTopic] | None]) -> Snapshot:
        """A new snapshot: this one with ``changed`` topics replaced (None removes).

        The new snapshot keeps this one's tree and commit until the caller
        installs it and sets them.
        """
        snap = Snapshot(
            self.tree,
            self.commit,
            dict(self.topic_shas),
            dict(self.topics),
            dict(self.id_to_topic),
            {key: set(members) for key, members in self.timeline_members.items()},
            list(self.creation),
            dict(self.name_keys) if self.name_keys is not None else None,
        )
        for path in changed:
            snap._unindex(path)
            if path in snap.topic_shas:
                snap._unindex_name(path)
            snap.topic_shas.pop(path, None)
        for path, entry in changed.items():
            if entry is not None:
                sha, topic = entry
                snap._index_name(path)
                snap.topic_shas[path] = sha
                snap._index(topic)
                for record in topic.records:
                    bisect.insort(snap.creation, (creation_key(record), path, record.position))
        return snap

    def record(self, block_id: str) -> Record | None:
        path = self.id_to_topic.get(block_id)
        if path is None:
            return None
        return next((r for r in self.topics[path].records if block_id in r.block_ids), None)

    def newest(self, limit: int) -> list[Record]:
        """The ``limit`` most recently created records, newest first."""
        return [self.topics[path].records[position] for _, path, position in reversed(self.creation[-limit:])]

    def timeline_topics(self, key: str) -> list[ParsedTopic]:
        """The topics with records in Timeline file ``key``."""
        return [self.topics[path] for path in self.timeline_members.get(key, ())]

    def incoming_links(self, targets: set[str]) -> list[Record]:
        """Records anywhere that link to one of ``targets``."""
        if not targets:
            return []
        sources = {source for topic in self.topics.values() for source, target, _ in topic.edges if target in targets}
        return [record for bid in sorted(sources) if (record := self.record(bid)) is not None]
