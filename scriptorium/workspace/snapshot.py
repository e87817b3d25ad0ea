"""A parsed view of one installed tree, derived incrementally from the previous one.

A transaction reads its baseline as a :class:`Snapshot` of the installed tree
(never of the staging copy). The snapshot keeps the indexes validation and the
views need — which topic holds each record ID, the records in creation order,
the topics of each Timeline file, the block links, the conversations each topic
cites — and parses a topic only when asked for it (:class:`Topics`), through the
workspace's parse cache (by ``(path, blob sha)``, bounded by memory): a year of
topics is never held parsed all at once. The next snapshot is derived from the
previous one by replacing only the changed topics, so a small edit costs what it
changes, not the workspace size.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from scriptorium.workspace.paths import topic_name_key
from scriptorium.workspace.topics import CreationKey, ParsedTopic, Record, creation_key

CreationEntry = tuple[CreationKey, str, int]
Edge = tuple[str, str, str]
"""(record, linked record, the record's topic): one block link."""


class Topics(Mapping[str, ParsedTopic]):
    """A snapshot's topics by path: those a transaction changed, held; every other one parsed when asked
    for, from its blob (``load``: the workspace's parse cache, which keeps what memory allows)."""

    __slots__ = ("_held", "_load", "_shas")

    def __init__(
        self, shas: Mapping[str, str], load: Callable[[str, str], ParsedTopic], held: dict[str, ParsedTopic]
    ) -> None:
        self._shas = shas
        self._load = load
        self._held = held

    def __getitem__(self, path: str) -> ParsedTopic:
        topic = self._held.get(path)
        return topic if topic is not None else self._load(path, self._shas[path])

    def __contains__(self, path: object) -> bool:
        return path in self._shas

    def __iter__(self) -> Iterator[str]:
        return iter(self._shas)

    def __len__(self) -> int:
        return len(self._shas)

    def settle(self) -> dict[str, ParsedTopic]:
        """Let go of the held topics (their blobs are installed: the parse cache can answer for them); returns
        them, for the cache."""
        held, self._held = self._held, {}
        return held


@dataclass(slots=True)
class Snapshot:
    """Topics of one installed tree and the indexes validation and views need."""

    tree: str
    commit: str | None
    topic_shas: dict[str, str]
    topics: Topics
    id_to_topic: dict[str, str] = field(default_factory=dict)
    timeline_members: dict[str, set[str]] = field(default_factory=dict)
    creation: list[CreationEntry] = field(default_factory=list)
    """Every record as (creation key, topic, position), sorted: Recent is its tail."""
    name_keys: dict[str, tuple[str, ...]] | None = None
    """Topic paths by what they look like (:func:`~scriptorium.workspace.paths.topic_name_key`): made the
    first time a new topic is named (:meth:`topics_named_like`), then kept by :meth:`derive` at the cost of
    the changed topics."""
    edges: dict[str, list[Edge]] = field(default_factory=dict)
    """Topic → its block links (topics with none left out): the relations view and the links into removed
    records, without parsing every topic."""
    citing: dict[str, set[str]] = field(default_factory=dict)
    """Conversation folder (``sources/<provider>/<shard>/<thread>``) → the topics citing one of its messages: a forget
    parses only those."""
    shared: set[int] = field(default_factory=set)
    """The member sets of ``timeline_members`` and ``citing`` this snapshot shares with the one it was
    derived from (by identity): copied before this one changes them, so a derive costs the keys, not every
    membership (a year of days and conversations)."""

    @classmethod
    def build(
        cls,
        tree: str,
        commit: str | None,
        topic_shas: Mapping[str, str],
        parse: Callable[[str, str], ParsedTopic],
    ) -> Snapshot:
        shas = dict(topic_shas)
        snap = cls(tree, commit, shas, Topics(shas, parse, {}))
        for path, sha in shas.items():
            topic = parse(path, sha)  # indexed, not held: the parse cache keeps what memory allows
            snap._index(topic)
            snap.creation += [(creation_key(r), path, r.position) for r in topic.records]
        snap.creation.sort()
        return snap

    @classmethod
    def restore(cls, data: Mapping[str, Any], parse: Callable[[str, str], ParsedTopic]) -> Snapshot:
        """A snapshot from indexes a process kept (:mod:`scriptorium.workspace.snapshot_cache`)."""
        shas = dict(data["topic_shas"])
        return cls(
            str(data["tree"]),
            data["commit"],
            shas,
            Topics(shas, parse, {}),
            data["id_to_topic"],
            data["timeline_members"],
            data["creation"],
            None,
            data["edges"],
            data["citing"],
        )

    def to_cache(self) -> dict[str, Any]:
        """What :meth:`restore` takes: the indexes, no parsed topic and no text."""
        return {
            "tree": self.tree,
            "commit": self.commit,
            "topic_shas": self.topic_shas,
            "id_to_topic": self.id_to_topic,
            "timeline_members": self.timeline_members,
            "creation": self.creation,
            "edges": self.edges,
            "citing": self.citing,
        }

    def _members(self, index: dict[str, set[str]], key: str) -> set[str]:
        """``index[key]``'s set, made or copied so that this snapshot may change it (:attr:`shared`)."""
        members = index.get(key)
        if members is None:
            members = index[key] = set()
        elif id(members) in self.shared:
            self.shared.discard(id(members))
            members = index[key] = set(members)
        return members

    def _index(self, topic: ParsedTopic) -> None:
        for record in topic.records:
            for bid in record.block_ids:
                self.id_to_topic[bid] = topic.path
        for key in topic.by_timeline:
            self._members(self.timeline_members, key).add(topic.path)
        if topic.edges:
            self.edges[topic.path] = topic.edges
        for folder in _cited_folders(topic):
            self._members(self.citing, folder).add(topic.path)

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
        topic = self.topics.get(path)
        if topic is None:
            return
        self.edges.pop(path, None)
        for folder in _cited_folders(topic):
            if folder in self.citing:
                members = self._members(self.citing, folder)
                members.discard(path)
                if not members:
                    del self.citing[folder]
        for record in topic.records:
            for bid in record.block_ids:
                if self.id_to_topic.get(bid) == path:
                    del self.id_to_topic[bid]
            entry = (creation_key(record), path, record.position)
            index = bisect.bisect_left(self.creation, entry)
            if index < len(self.creation) and self.creation[index] == entry:
                del self.creation[index]
        for key in topic.by_timeline:
            members = self._members(self.timeline_members, key)
            members.discard(path)
            if not members:
                del self.timeline_members[key]

    def derive(self, changed: Mapping[str, tuple[str, ParsedTopic] | None]) -> Snapshot:
        """A new snapshot: this one with ``changed`` topics replaced (None removes).

        The new snapshot keeps this one's tree and commit until the caller
        installs it and sets them.
        """
        shas = dict(self.topic_shas)
        held = dict(self.topics._held)
        snap = Snapshot(
            self.tree,
            self.commit,
            shas,
            Topics(shas, self.topics._load, held),
            dict(self.id_to_topic),
            dict(self.timeline_members),
            list(self.creation),
            dict(self.name_keys) if self.name_keys is not None else None,
            dict(self.edges),
            dict(self.citing),
            {id(members) for index in (self.timeline_members, self.citing) for members in index.values()},
        )
        for path in changed:
            snap._unindex(path)
            if path in snap.topic_shas:
                snap._unindex_name(path)
            snap.topic_shas.pop(path, None)
            held.pop(path, None)
        for path, entry in changed.items():
            if entry is not None:
                sha, topic = entry
                snap._index_name(path)
                snap.topic_shas[path] = sha
                held[path] = topic
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
        sources = {source for edges in self.edges.values() for source, target, _ in edges if target in targets}
        return [record for bid in sorted(sources) if (record := self.record(bid)) is not None]

    def all_edges(self) -> list[Edge]:
        """Every block link of the snapshot's records, sorted, once each (the relations view)."""
        return sorted({edge for edges in self.edges.values() for edge in edges})

    def topics_citing(self, folders: set[str]) -> list[str]:
        """The topics citing a message of one of the conversation ``folders``
        (``sources/<provider>/<shard>/<thread>``)."""
        return sorted({path for folder in folders for path in self.citing.get(folder, ())})


def _cited_folders(topic: ParsedTopic) -> set[str]:
    """The conversation folders of the sources ``topic``'s footnotes cite."""
    return {path.rsplit("/", 1)[0] for note in topic.footnotes.values() if (path := note.source_path)}
