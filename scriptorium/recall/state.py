"""What the recall index knows, and how it follows the installed files.

Each topic file is known by its signature (inode, size, mtime): a scan parses
again only topics whose signature moved, and only their records leave and
re-enter the index. Each record's trust comes from every source it cites: one
pending (or missing) source makes it pending; so does its audience (the
requesters whose sources it cites: :mod:`scriptorium.audience`). Source files are checked by
signature too — a promotion rewrites the file, so its record's trust is
evaluated again — and a source's thread folder is checked first, so a scan
does not stat every archived source. The state is what the disk cache
(:mod:`scriptorium.recall.cache`) holds.
"""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from scriptorium.audience import fold, names
from scriptorium.logs import get_logger
from scriptorium.recall.bm25 import IncrementalBM25
from scriptorium.recall.cache import IndexCache
from scriptorium.recall.records import Document, RefreshStats, Signature, signature, source_thread
from scriptorium.recall.speakers import speaker_of
from scriptorium.recall.text import date_words, display_text, indexed_headings, terms_of, words_of
from scriptorium.workspace.paths import TOPICS
from scriptorium.workspace.sources import parse_source
from scriptorium.workspace.threads import read_entry, stored_file, stored_parts
from scriptorium.workspace.topics import Record, parse_topic, supersedes_links

log = get_logger(__name__)


def _distinct(paths: list[str]) -> tuple[str, ...]:
    """``paths`` without repeats, in order (most records cite one source)."""
    return tuple(paths) if len(paths) < 2 else tuple(dict.fromkeys(paths))


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for a block (and back on after, if it was on): its passes over a
    growing heap of tuples and strings cost a full build as much as the parsing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass(slots=True)
class IndexState:
    """Everything the disk cache holds."""

    bm25: IncrementalBM25 = field(default_factory=IncrementalBM25)
    docs: list[Document | None] = field(default_factory=list)
    topics: dict[str, tuple[Signature, list[int]]] = field(default_factory=dict)
    sources: dict[str, tuple[Signature | None, bool, str]] = field(default_factory=dict)
    """Cited source path → (file signature, trusted, audience: the requester it belongs to, "" when shared)."""
    folders: dict[str, Signature | None] = field(default_factory=dict)
    """Thread folder of cited sources → its signature."""
    citing: dict[str, set[int]] = field(default_factory=dict)
    trusted: list[bool] = field(default_factory=list)
    audience: list[str] = field(default_factory=list)
    """Each slot's record's audience, folded from its sources' (:func:`scriptorium.audience.fold`)."""
    gate: Signature | None = None
    topic_docs: dict[str, bytes] = field(default_factory=dict)
    """Topic → its records as the disk cache holds them (pickled plain tuples, in the order of its slots)."""
    word_ids: dict[str, int] = field(default_factory=dict)
    """Lower-cased word → its BM25 term id (-1: a stopword). Derived from ``bm25``'s vocabulary as words are
    met (not in the disk cache)."""
    unsaved: bool = False
    """The disk cache is behind this state (a refresh that left saving to the next)."""
    threads: dict[str, set[int]] | None = None
    """Conversation (``<thread>`` of a cited ``sources/<provider>/<thread>/…``) → the slots of the records
    citing one of its messages: what a session's opening asks for (its project's sessions' records). Made
    from ``citing`` on first use (:func:`thread_slots`), then kept by every refresh (not in the disk cache)."""
    thread_newest: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Conversation → the (date, memory ID) of the newest record citing it (:func:`newest_of_thread`), made on
    first use and dropped whenever the thread's slots change (not in the disk cache)."""
    successors: dict[str, set[int]] | None = None
    """Memory ID → the slots of the records that say they supersede it. Made from the documents on first use
    (:func:`successor_slots`), then kept by every refresh (not in the disk cache)."""


def thread_slots(state: IndexState) -> dict[str, set[int]]:
    """``state.threads``, made the first time it is asked for."""
    if state.threads is None:
        threads: dict[str, set[int]] = {}
        for source, slots in state.citing.items():
            threads.setdefault(source_thread(source), set()).update(slots)
        state.threads = threads
    return state.threads


def newest_of_thread(state: IndexState, thread: str) -> tuple[str, str]:
    """The (date or "", memory ID) of the newest live record citing ``thread`` (("", "") for none): an upper
    bound on what the thread can add to a newest-first answer, whoever asks."""
    key = state.thread_newest.get(thread)
    if key is None:
        docs = state.docs
        key = max(
            ((doc.date or "", doc.memory_id) for slot in thread_slots(state).get(thread, ()) if (doc := docs[slot])),
            default=("", ""),
        )
        state.thread_newest[thread] = key
    return key


def successor_slots(state: IndexState) -> dict[str, set[int]]:
    """``state.successors``, made the first time it is asked for."""
    if state.successors is None:
        successors: dict[str, set[int]] = {}
        for slot, doc in enumerate(state.docs):
            if doc is not None:
                for older in doc.supersedes:
                    successors.setdefault(older, set()).add(slot)
        state.successors = successors
    return state.successors


class Refresher:
    """Builds and refreshes an :class:`IndexState` from one workspace's files (``cache``: where it is kept on
    disk, None to keep it in memory only)."""

    def __init__(self, root: Path, cache: IndexCache | None) -> None:
        self.root = root
        self.cache = cache
        self._vouched: set[str] = set()
        """Sources whose file this scan has looked at already (a full build cites each many times)."""

    def load(self) -> IndexState:
        cached = self.cache.load() if self.cache is not None else None
        if cached is None:
            return IndexState()
        try:
            docs: list[Document | None] = [None] * cached["slots"]
            for rel, (_sig, slots) in cached["topics"].items():
                for slot, row in zip(slots, pickle.loads(cached["topic_docs"][rel]), strict=True):
                    docs[slot] = Document._make(row)
            return IndexState(
                bm25=IncrementalBM25.load(cached["bm25"]),
                docs=docs,
                topic_docs=cached["topic_docs"],
                topics=cached["topics"],
                sources=cached["sources"],
                folders=cached["folders"],
                citing=cached["citing"],
                trusted=cached["trusted"],
                audience=cached["audience"],
                gate=cached["gate"],
            )
        except Exception as exc:  # a cache that pickles but does not hold together is rebuilt
            log.warning("recall.cache_unusable", path=str(self.cache.path if self.cache else ""), error=str(exc))
            return IndexState()

    def save(self, state: IndexState) -> None:
        state.unsaved = False
        if self.cache is None:
            return
        self.cache.save(
            {
                "bm25": state.bm25.dump(),
                # Each topic's records pickled when it was indexed: a refresh after a one-topic edit writes
                # the other topics' bytes as they are instead of pickling every record again.
                "topic_docs": state.topic_docs,
                "slots": len(state.docs),
                "topics": state.topics,
                "sources": state.sources,
                "folders": state.folders,
                "citing": state.citing,
                "trusted": state.trusted,
                "audience": state.audience,
                "gate": state.gate,
            }
        )

    def scan(self, state: IndexState, gate: Signature | None, stats: RefreshStats, save: bool = True) -> bool:
        """Bring ``state`` up to the installed files (and, with ``save``, the disk cache up to ``state``); True
        when records entered or left (what is derived from them is then stale)."""
        self._vouched = set()
        seen: set[str] = set()
        parsed: set[str] = set()
        removed: set[str] = set()
        root = os.fspath(self.root)
        # Strings, not Path objects: every topic is looked at each refresh (a stat), most of them to find them
        # unchanged (about 25 ms of pathlib a refresh at 1,000 topics).
        for dirpath, dirnames, filenames in os.walk(f"{root}/{TOPICS}"):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if not name.endswith(".md") or name.startswith("."):
                    continue
                full = f"{dirpath}/{name}"
                rel = full[len(root) + 1 :]
                sig = signature(full)
                if sig is None:
                    continue
                seen.add(rel)
                known = state.topics.get(rel)
                if known is not None and known[0] == sig:
                    continue
                self._reindex_topic(state, rel, full, sig, stats)
                parsed.add(rel)
        for rel in [t for t in state.topics if t not in seen]:
            self._drop_topic(state, rel)
            removed.add(rel)
            stats.topics_removed += 1
        self._check_sources(state, stats)
        state.bm25.commit()
        gate_moved, state.gate = state.gate != gate, gate
        if parsed or removed or stats.sources_read or gate_moved:
            if save:
                self.save(state)
            else:
                state.unsaved = True
        return bool(parsed or removed)

    def _drop_topic(self, state: IndexState, rel: str) -> None:
        _sig, slots = state.topics.pop(rel)
        state.topic_docs.pop(rel, None)
        for slot in slots:
            doc = state.docs[slot]
            assert doc is not None
            for source in doc.sources:
                citing = state.citing.get(source)
                if citing is not None:
                    citing.discard(slot)
                    if not citing:
                        del state.citing[source]
                        state.sources.pop(source, None)
            if state.threads is not None:
                for thread in {source_thread(source) for source in doc.sources}:
                    state.thread_newest.pop(thread, None)
                    members = state.threads.get(thread)
                    if members is not None:
                        members.discard(slot)
                        if not members:
                            del state.threads[thread]
            if state.successors is not None:
                for older in doc.supersedes:
                    newer = state.successors.get(older)
                    if newer is not None:
                        newer.discard(slot)
                        if not newer:
                            del state.successors[older]
            state.docs[slot] = None
            state.bm25.remove(slot)

    def _reindex_topic(self, state: IndexState, rel: str, full: str, sig: Signature, stats: RefreshStats) -> None:
        if rel in state.topics:
            self._drop_topic(state, rel)
        try:
            with open(full, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as exc:  # installed topics are valid UTF-8; be safe anyway
            log.warning("recall.topic_unreadable", topic=rel, error=str(exc))
            return
        topic = parse_topic(rel, text)
        records = [record for record in topic.records if record.block_ids]
        proses = [display_text(record) for record in records]
        docs = [
            Document(
                record.memory_id,
                rel,
                record.headings,
                record.date,
                prose,
                _distinct(topic.cited_paths(record)),
                speaker_of(prose),
                supersedes_links(record.text),
            )
            for record, prose in zip(records, proses, strict=True)
        ]
        ids, lengths = self._term_ids(state, records, proses)
        self._install_docs(state, rel, sig, docs, ids, lengths, stats)
        stats.topics_parsed += 1
        stats.records_indexed += len(docs)

    @staticmethod
    def _term_ids(
        state: IndexState, records: Sequence[Record], proses: Sequence[str]
    ) -> tuple[npt.NDArray[np.int64], list[int]]:
        """The BM25 term ids of ``records`` (``proses`` their display text), all in one array, and how many
        each has: :func:`record_terms`'s terms, looked up through a table from each word straight to its id
        (a full build meets every word of the workspace; a test checks the index holds record_terms')."""
        # A record's words: its heading chain's, its prose's, its date's (the first and last are shared by
        # many records of a topic: found once each).
        around: dict[tuple[tuple[str, ...], str | None], tuple[list[str], list[str]]] = {}
        words: list[str] = []
        sizes: list[int] = []
        for record, prose in zip(records, proses, strict=True):
            key = (indexed_headings(record.headings, prose), record.date)
            if (pair := around.get(key)) is None:
                pair = around[key] = (words_of(" ".join(key[0])), words_of(" ".join(date_words(record.date))))
            own = words_of(prose)
            words += pair[0]
            words += own
            words += pair[1]
            sizes.append(len(pair[0]) + len(own) + len(pair[1]))
        table = state.word_ids
        new = set(words).difference(table)
        if new:
            terms = terms_of(new)
            for word in sorted(new):  # sorted: the terms' ids do not depend on the process's hash seed
                table[word] = state.bm25.intern(term) if (term := terms[word]) else -1
        flat = np.fromiter(map(table.__getitem__, words), dtype=np.int64, count=len(words))
        counted = flat >= 0  # stopwords are not terms
        if counted.all():
            return flat, sizes
        owner = np.repeat(np.arange(len(sizes)), sizes)
        lengths = np.bincount(owner[counted], minlength=len(sizes)).tolist()
        return flat[counted], lengths

    def _install_docs(
        self,
        state: IndexState,
        rel: str,
        sig: Signature,
        docs: list[Document],
        ids: npt.NDArray[np.int64],
        lengths: list[int],
        stats: RefreshStats,
    ) -> None:
        """Put one topic's records into the index; trust and audience from the known sources (read when
        unknown)."""
        slots = state.bm25.add_ids(ids, lengths)
        known, vouched, citing = state.sources, self._vouched, state.citing
        for slot, doc in zip(slots, docs, strict=True):
            if slot == len(state.docs):
                state.docs.append(doc)
                state.trusted.append(False)
                state.audience.append("")
            else:
                state.docs[slot] = doc
            trusted = bool(doc.sources)
            audience = ""
            for source in doc.sources:
                citing.setdefault(source, set()).add(slot)
                # A source this refresh has vouched for already is answered from memory.
                entry = known.get(source)
                if entry is None or source not in vouched:
                    entry = self._source_entry(state, source, stats)
                trusted = trusted and entry[1]
                if entry[2] and entry[2] != audience:
                    audience = fold((*names(audience), entry[2]))
            state.trusted[slot] = trusted
            state.audience[slot] = audience
            if state.threads is not None:
                for thread in {source_thread(source) for source in doc.sources}:
                    state.thread_newest.pop(thread, None)
                    state.threads.setdefault(thread, set()).add(slot)
            if state.successors is not None:
                for older in doc.supersedes:
                    state.successors.setdefault(older, set()).add(slot)
        state.topics[rel] = (sig, slots)
        state.topic_docs[rel] = pickle.dumps([tuple(doc) for doc in docs], protocol=pickle.HIGHEST_PROTOCOL)

    def _source_entry(self, state: IndexState, source: str, stats: RefreshStats) -> tuple[Signature | None, bool, str]:
        """What the index knows of one cited source, read again when its file changed."""
        known = state.sources.get(source)
        if known is not None and source in self._vouched:
            return known
        self._vouched.add(source)
        sig = signature(stored_file(self.root, source))
        if known is not None and known[0] == sig:
            return known
        trusted, audience = False, ""
        if sig is not None:
            try:
                message = parse_source(source, read_entry(self.root, source))
                trusted, audience = message.trust == "trusted", message.audience or ""
            except Exception as exc:  # an unreadable source cannot vouch for anything
                log.warning("recall.source_unreadable", source=source, error=str(exc))
            stats.sources_read += 1
        entry = state.sources[source] = (sig, trusted, audience)
        folder = source.rsplit("/", 1)[0]
        if folder not in state.folders:
            state.folders[folder] = _folder_signature(self.root, folder)
        return entry

    def _doc_facts(self, state: IndexState, slot: int, stats: RefreshStats) -> tuple[bool, str]:
        doc = state.docs[slot]
        assert doc is not None
        entries = [self._source_entry(state, s, stats) for s in doc.sources]
        return bool(entries) and all(e[1] for e in entries), fold(e[2] for e in entries)

    def _check_sources(self, state: IndexState, stats: RefreshStats) -> None:
        """Re-read the sources of thread folders that changed; re-evaluate the records citing them."""
        moved: set[str] = set()
        for folder, old in list(state.folders.items()):
            sig = _folder_signature(self.root, folder)
            if sig != old:
                state.folders[folder] = sig
                moved.add(folder)
        if not moved:
            return
        for source in [s for s in state.citing if s.rsplit("/", 1)[0] in moved]:
            before = state.sources.get(source, (None, False, ""))[1:]
            after = self._source_entry(state, source, stats)[1:]
            if before == after:
                continue
            for slot in state.citing[source]:
                trusted, audience = self._doc_facts(state, slot, stats)
                if trusted != state.trusted[slot]:
                    state.trusted[slot] = trusted
                    stats.trust_changed += 1
                state.audience[slot] = audience


def _folder_signature(root: Path, folder: str) -> Signature | None:
    """What changes when a source of conversation ``folder`` (``sources/<provider>/<shard>/<thread>``) is added,
    promoted or forgotten: the signatures of its conversation file's parts (layouts 3 and 4: a part written
    again is a new file), else its folder's (layout 2)."""
    parts = stored_parts(root, f"{folder}.md")
    if not parts:
        return signature(root / folder)
    signatures = tuple(signature(root / part) or (0, 0, 0) for part in parts)  # ints: a hash every process agrees on
    return (len(parts), sum(sig[1] for sig in signatures), hash(signatures))
