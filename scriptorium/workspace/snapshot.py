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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from immutables import Map, MapMutation

from scriptorium.workspace.paths import topic_name_key
from scriptorium.workspace.topics import CreationKey, ParsedTopic, Record, creation_key

CreationEntry = tuple[CreationKey, str, int]
Edge = tuple[str, str, str]
"""(record, linked record, the record's topic): one block link."""


CHUNK = 512
"""Entries of one chunk of :class:`Creation` (split at twice as many): a derive copies the chunks it changes."""


class Creation:
    """Every record's creation entry, sorted, in chunks: a derived snapshot's shares with its base every chunk
    its change leaves alone, so a derive copies a few hundred pointers and the chunks it touches, not
    the year's records."""

    __slots__ = ("_chunks", "_len")

    def __init__(self, entries: Iterable[CreationEntry], chunks: list[list[CreationEntry]] | None = None) -> None:
        if chunks is None:
            items = list(entries)  # sorted by the caller
            chunks = [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]
        self._chunks = chunks
        self._len = sum(map(len, chunks))

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[CreationEntry]:
        for chunk in self._chunks:
            yield from chunk

    def newest(self, limit: int) -> Iterator[CreationEntry]:
        """The last ``limit`` entries, last first."""
        for chunk in reversed(self._chunks):
            for entry in reversed(chunk):
                if limit <= 0:
                    return
                limit -= 1
                yield entry

    def edit(self) -> CreationEdit:
        return CreationEdit(self._chunks)


class CreationEdit:
    """Entries added to and removed from a :class:`Creation`, which stays as it was; :meth:`finish` makes the
    new one. A chunk is copied the first time the edit changes it."""

    __slots__ = ("_chunks", "_mine")

    def __init__(self, chunks: list[list[CreationEntry]]) -> None:
        self._chunks = list(chunks)
        self._mine: set[int] = set()
        """``id()`` of the chunks this edit made: its to change in place (the base's stay alive meanwhile, so
        none of theirs can be reused)."""

    def _find(self, entry: CreationEntry) -> int:
        """The chunk ``entry`` belongs in: the first whose last entry is not below it (the last one past all)."""
        return min(bisect.bisect_left(self._chunks, entry, key=lambda chunk: chunk[-1]), len(self._chunks) - 1)

    def _own(self, index: int) -> list[CreationEntry]:
        chunk = self._chunks[index]
        if id(chunk) not in self._mine:
            chunk = self._chunks[index] = list(chunk)
            self._mine.add(id(chunk))
        return chunk

    def add(self, entry: CreationEntry) -> None:
        if not self._chunks:
            self._chunks.append([entry])
            self._mine.add(id(self._chunks[0]))
            return
        index = self._find(entry)
        chunk = self._own(index)
        bisect.insort(chunk, entry)
        if len(chunk) > 2 * CHUNK:
            upper = chunk[CHUNK:]
            del chunk[CHUNK:]
            self._chunks.insert(index + 1, upper)
            self._mine.add(id(upper))

    def remove(self, entry: CreationEntry) -> None:
        """Take ``entry`` out, when it is there."""
        if not self._chunks:
            return
        index = self._find(entry)
        chunk = self._chunks[index]
        position = bisect.bisect_left(chunk, entry)
        if position == len(chunk) or chunk[position] != entry:
            return
        if len(chunk) == 1:
            del self._chunks[index]
            self._mine.discard(id(chunk))
        else:
            del self._own(index)[position]

    def finish(self) -> Creation:
        return Creation((), self._chunks)


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


Members = frozenset[str]
"""The topics of one Timeline file, or citing one conversation: a frozen set, replaced whole when it changes
(a day's or a conversation's topics: a few)."""


def persistent(index: Mapping[str, Any]) -> Map[str, Any]:
    """``index`` as a persistent map: itself when it is one already; else built once (a snapshot restored
    from the cache holds plain dicts until its first derive)."""
    return index if isinstance(index, Map) else Map(index)


@dataclass(slots=True)
class Snapshot:
    """Topics of one installed tree and the indexes validation and views need.

    The indexes are persistent maps (:class:`immutables.Map`, a hash array mapped trie): a derived snapshot
    shares every part of them its change does not touch with the one it came from, so a derive costs the
    changed topics' keys, not the memory's (a year holds about 100,000 records). A snapshot restored from the
    cache holds plain dicts, made persistent at its first derive."""

    tree: str
    commit: str | None
    topic_shas: Mapping[str, str]
    topics: Topics
    id_to_topic: Mapping[str, str] = field(default_factory=Map)
    timeline_members: Mapping[str, Members] = field(default_factory=Map)
    creation: Creation = field(default_factory=lambda: Creation(()))
    """Every record as (creation key, topic, position), sorted: Recent is its tail."""
    name_keys: Mapping[str, tuple[str, ...]] | None = None
    """Topic paths by what they look like (:func:`~scriptorium.workspace.paths.topic_name_key`): made the
    first time a new topic is named (:meth:`topics_named_like`), then kept by :meth:`derive` at the cost of
    the changed topics."""
    edges: Mapping[str, list[Edge]] = field(default_factory=Map)
    """Topic → its block links (topics with none left out): the relations view and the links into removed
    records, without parsing every topic."""
    citing: Mapping[str, Members] = field(default_factory=Map)
    """Conversation folder (``sources/<provider>/<shard>/<thread>``) → the topics citing one of its messages: a forget
    parses only those."""

    @classmethod
    def build(
        cls,
        tree: str,
        commit: str | None,
        topic_shas: Mapping[str, str],
        parse: Callable[[str, str], ParsedTopic],
    ) -> Snapshot:
        ids: dict[str, str] = {}
        timeline: dict[str, set[str]] = {}
        edges: dict[str, list[Edge]] = {}
        citing: dict[str, set[str]] = {}
        creation: list[CreationEntry] = []
        for path, sha in topic_shas.items():
            topic = parse(path, sha)  # indexed, not held: the parse cache keeps what memory allows
            for record in topic.records:
                ids.update(dict.fromkeys(record.block_ids, path))
                creation.append((creation_key(record), path, record.position))
            for key in topic.by_timeline:
                timeline.setdefault(key, set()).add(path)
            if topic.edges:
                edges[path] = topic.edges
            for folder in _cited_folders(topic):
                citing.setdefault(folder, set()).add(path)
        creation.sort()
        shas = Map(topic_shas)
        return cls(
            tree,
            commit,
            shas,
            Topics(shas, parse, {}),
            Map(ids),
            Map({key: frozenset(members) for key, members in timeline.items()}),
            Creation(creation),
            None,
            Map(edges),
            Map({key: frozenset(members) for key, members in citing.items()}),
        )

    @classmethod
    def restore(cls, data: Mapping[str, Any], parse: Callable[[str, str], ParsedTopic]) -> Snapshot:
        """A snapshot from indexes a process kept (:mod:`scriptorium.workspace.snapshot_cache`): plain
        dicts, loaded as they are (a process that only reads never builds the persistent maps)."""
        shas = data["topic_shas"]
        return cls(
            str(data["tree"]),
            data["commit"],
            shas,
            Topics(shas, parse, {}),
            data["id_to_topic"],
            data["timeline_members"],
            Creation(data["creation"]),
            None,
            data["edges"],
            data["citing"],
        )

    def to_cache(self) -> dict[str, Any]:
        """What :meth:`restore` takes: the indexes as plain dicts and a list, no parsed topic and no text."""
        return {
            "tree": self.tree,
            "commit": self.commit,
            "topic_shas": dict(self.topic_shas),
            "id_to_topic": dict(self.id_to_topic),
            "timeline_members": dict(self.timeline_members),
            "creation": list(self.creation),
            "edges": dict(self.edges),
            "citing": dict(self.citing),
        }

    def topics_named_like(self, key: str) -> tuple[str, ...]:
        """The topics whose path has ``key`` (:func:`~scriptorium.workspace.paths.topic_name_key`)."""
        if self.name_keys is None:
            names: dict[str, tuple[str, ...]] = {}
            for path in self.topic_shas:
                name = topic_name_key(path)
                names[name] = (*names.get(name, ()), path)
            self.name_keys = Map(names)
        return self.name_keys.get(key, ())

    def derive(self, changed: Mapping[str, tuple[str, ParsedTopic] | None]) -> Snapshot:
        """A new snapshot: this one with ``changed`` topics replaced (None removes); this one is left as it
        was. Costs the changed topics' records, links, days and citations (and a logarithm of the memory's
        size for each), never a copy of an index.

        The new snapshot keeps this one's tree and commit until the caller
        installs it and sets them.
        """
        change = _Change(self)
        for path in changed:
            change.remove(path)
        for path, entry in changed.items():
            if entry is not None:
                change.add(path, *entry)
        return change.finish()

    def record(self, block_id: str) -> Record | None:
        path = self.id_to_topic.get(block_id)
        if path is None:
            return None
        return next((r for r in self.topics[path].records if block_id in r.block_ids), None)

    def newest(self, limit: int) -> list[Record]:
        """The ``limit`` most recently created records, newest first."""
        return [self.topics[path].records[position] for _, path, position in self.creation.newest(limit)]

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


class _Change:
    """One derive's edits: mutations of the base snapshot's persistent maps (:meth:`immutables.Map.mutate`),
    finished into the new snapshot's."""

    def __init__(self, base: Snapshot) -> None:
        self.base = base
        self.shas = persistent(base.topic_shas).mutate()
        self.ids = persistent(base.id_to_topic).mutate()
        self.timeline = persistent(base.timeline_members).mutate()
        self.edges = persistent(base.edges).mutate()
        self.citing = persistent(base.citing).mutate()
        self.names = None if base.name_keys is None else persistent(base.name_keys).mutate()
        self.creation = base.creation.edit()
        self.held = dict(base.topics._held)

    def remove(self, path: str) -> None:
        topic = self.base.topics.get(path) if path in self.base.topic_shas else None
        if path in self.shas:
            self._name(path, add=False)
            self.shas.pop(path, None)
        self.held.pop(path, None)
        if topic is None:
            return
        self.edges.pop(path, None)
        for folder in _cited_folders(topic):
            _leave(self.citing, folder, path)
        for record in topic.records:
            for bid in record.block_ids:
                if self.ids.get(bid) == path:
                    self.ids.pop(bid, None)
            self.creation.remove((creation_key(record), path, record.position))
        for key in topic.by_timeline:
            _leave(self.timeline, key, path)

    def add(self, path: str, sha: str, topic: ParsedTopic) -> None:
        self._name(path, add=True)
        self.shas[path] = sha
        self.held[path] = topic
        for record in topic.records:
            for bid in record.block_ids:
                self.ids[bid] = path
            self.creation.add((creation_key(record), path, record.position))
        for key in topic.by_timeline:
            self.timeline[key] = self.timeline.get(key, frozenset()) | {path}
        if topic.edges:
            self.edges[path] = topic.edges
        for folder in _cited_folders(topic):
            self.citing[folder] = self.citing.get(folder, frozenset()) | {path}

    def _name(self, path: str, *, add: bool) -> None:
        if self.names is None:
            return
        key = topic_name_key(path)
        kept = tuple(p for p in self.names.get(key, ()) if p != path)
        if add:
            kept = (*kept, path)
        if kept:
            self.names[key] = kept
        else:
            self.names.pop(key, None)

    def finish(self) -> Snapshot:
        base = self.base
        shas = self.shas.finish()
        return Snapshot(
            base.tree,
            base.commit,
            shas,
            Topics(shas, base.topics._load, self.held),
            self.ids.finish(),
            self.timeline.finish(),
            self.creation.finish(),
            None if self.names is None else self.names.finish(),
            self.edges.finish(),
            self.citing.finish(),
        )


def _leave(index: MapMutation[str, Members], key: str, path: str) -> None:
    """``path`` out of ``index[key]``'s members; the key goes with its last member."""
    members = index.get(key)
    if members is None or path not in members:
        return
    if len(members) == 1:
        index.pop(key, None)
    else:
        index[key] = members - {path}
