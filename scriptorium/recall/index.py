"""The BM25 recall index over topic records, its trust view, and its disk cache.

Retrieval reads organized topics, never raw source text (spec 05). Each topic
file is known by its signature (inode, size, mtime): on refresh only topics
whose signature moved are parsed again, and only their records leave and
re-enter the index. Each record's trust comes from every source it cites: one
pending (or missing) source makes it pending. Source files are checked by
signature too — a promotion rewrites the file, so its record's trust is
evaluated again — and a source's thread folder is checked first, so a refresh
does not stat every archived source.

Nothing is checked at all while ``.scriptorium/state.json`` (rewritten by
every install) keeps its signature. The index lives in memory per process and
on disk under ``.scriptorium/cache/`` (:mod:`scriptorium.recall.cache`: one
file a new process reads as it is; derived state: deleting it loses nothing,
the next search rebuilds it).
"""

from __future__ import annotations

import gc
import os
import pickle
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt
import structlog

from scriptorium.errors import InvalidArgument
from scriptorium.recall import embedding
from scriptorium.recall.bm25 import IncrementalBM25
from scriptorium.recall.cache import CACHE_DIR, IndexCache
from scriptorium.recall.embedding import FUSION_DEPTH, VECTOR_CACHE, Encoder, Matrix, VectorStore, default_encoder, fuse
from scriptorium.recall.neighbours import LENDERS, NEIGHBOUR_WEIGHT, lend_to_neighbours, neighbour_slots
from scriptorium.recall.records import (
    BranchLookup,
    Document,
    Hit,
    RefreshStats,
    Signature,
    Trust,
    embedding_text,
    signature,
)
from scriptorium.recall.text import date_words, display_text, snippet, terms_of, tokenize, words_of
from scriptorium.recall.when import TIME_BOOST, RecordDates, time_expressions
from scriptorium.workspace.paths import RUNTIME_DIR, STATE, TOPICS
from scriptorium.workspace.sources import parse_source
from scriptorium.workspace.topics import Record, parse_topic

log = structlog.get_logger(__name__)


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


DEFAULT_LIMIT = 5
SearchMode = Literal["bm25", "embedding", "hybrid"]

SEARCH_MODES: tuple[SearchMode, ...] = ("bm25", "embedding", "hybrid")


@dataclass(slots=True)
class _State:
    """Everything the disk cache holds."""

    bm25: IncrementalBM25 = field(default_factory=IncrementalBM25)
    docs: list[Document | None] = field(default_factory=list)
    topics: dict[str, tuple[Signature, list[int]]] = field(default_factory=dict)
    sources: dict[str, tuple[Signature | None, bool]] = field(default_factory=dict)
    """Cited source path → (file signature, trusted)."""
    folders: dict[str, Signature | None] = field(default_factory=dict)
    """Thread folder of cited sources → its signature."""
    citing: dict[str, set[int]] = field(default_factory=dict)
    trusted: list[bool] = field(default_factory=list)
    gate: Signature | None = None
    topic_docs: dict[str, bytes] = field(default_factory=dict)
    """Topic → its records as the disk cache holds them (pickled plain tuples, in the order of its slots)."""
    word_ids: dict[str, int] = field(default_factory=dict)
    """Lower-cased word → its BM25 term id (-1: a stopword). Derived from ``bm25``'s vocabulary as words are
    met (not in the disk cache)."""


class RecallIndex:
    """BM25 over one workspace's records (thread-safe; one per workspace per process via :meth:`open`)."""

    _open: ClassVar[dict[Path, RecallIndex]] = {}
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, root: Path, *, persist: bool = True) -> None:
        self.root = root
        self.persist = persist
        self.cache_dir = root / RUNTIME_DIR / "cache" / CACHE_DIR
        self.cache = IndexCache(self.cache_dir)
        self._lock = threading.Lock()
        self._state: _State | None = None
        self._trusted_array: npt.NDArray[np.bool_] | None = None
        self._dense_matrix: tuple[npt.NDArray[np.int64], Matrix] | None = None
        self._neighbours: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        self._dates: RecordDates | None = None
        self.time_boost = TIME_BOOST
        self.fusion = embedding.FUSION
        self.lexical_weight = embedding.LEXICAL_WEIGHT
        self.neighbour_weight = NEIGHBOUR_WEIGHT
        self.vectors = VectorStore(root / RUNTIME_DIR / "cache" / VECTOR_CACHE if persist else None)
        self.last_refresh = RefreshStats()
        self._vouched: set[str] = set()
        """Sources whose file this refresh has looked at already (a full build cites each many times)."""

    @classmethod
    def open(cls, root: Path) -> RecallIndex:
        """The process-wide index of the workspace at ``root`` (reused across calls)."""
        key = root.resolve()
        with cls._open_lock:
            index = cls._open.get(key)
            if index is None:
                index = cls._open[key] = RecallIndex(key)
            return index

    # -- the cache ------------------------------------------------------------------

    def _load(self) -> _State:
        cached = self.cache.load() if self.persist else None
        if cached is None:
            return _State()
        try:
            docs: list[Document | None] = [None] * cached["slots"]
            for rel, (_sig, slots) in cached["topics"].items():
                for slot, row in zip(slots, pickle.loads(cached["topic_docs"][rel]), strict=True):
                    docs[slot] = Document._make(row)
            return _State(
                bm25=IncrementalBM25.load(cached["bm25"]),
                docs=docs,
                topic_docs=cached["topic_docs"],
                topics=cached["topics"],
                sources=cached["sources"],
                folders=cached["folders"],
                citing=cached["citing"],
                trusted=cached["trusted"],
                gate=cached["gate"],
            )
        except Exception as exc:  # a cache that pickles but does not hold together is rebuilt
            log.warning("recall.cache_unusable", path=str(self.cache_dir), error=str(exc))
            return _State()

    def _save(self, state: _State) -> None:
        if not self.persist:
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
                "gate": state.gate,
            }
        )

    def drop(self) -> None:
        """Forget the in-process index (the disk cache stays)."""
        with self._lock:
            self._state = None
            self._trusted_array = None
            self._dense_matrix = None
            self._neighbours = None
            self._dates = None

    # -- refreshing ---------------------------------------------------------------

    def refresh(self) -> RefreshStats:
        """Bring the index up to the installed files; returns what it did."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> RefreshStats:
        stats = RefreshStats()
        if self._state is None:
            with paused_gc():
                self._state = self._load()
            self._trusted_array = None
        state = self._state
        gate = signature(self.root / RUNTIME_DIR / STATE)
        if gate is not None and gate == state.gate:
            self.last_refresh = stats
            return stats
        stats.checked = True
        with paused_gc():  # a build allocates hundreds of thousands of acyclic objects: nothing to collect
            self._scan(state, gate, stats)
        self.last_refresh = stats
        return stats

    def _scan(self, state: _State, gate: Signature | None, stats: RefreshStats) -> None:
        self._vouched = set()
        seen: set[str] = set()
        parsed: set[str] = set()
        removed: set[str] = set()
        topics_root = self.root / TOPICS
        for dirpath, dirnames, filenames in os.walk(topics_root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if not name.endswith(".md") or name.startswith("."):
                    continue
                full = Path(dirpath) / name
                rel = full.relative_to(self.root).as_posix()
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
        self._trusted_array = None
        if parsed or removed:
            self._dense_matrix = None
            self._neighbours = None
            self._dates = None
        if parsed or removed or stats.sources_read or gate_moved:
            self._save(state)

    def _drop_topic(self, state: _State, rel: str) -> None:
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
            state.docs[slot] = None
            state.bm25.remove(slot)

    def _reindex_topic(self, state: _State, rel: str, full: Path, sig: Signature, stats: RefreshStats) -> None:
        if rel in state.topics:
            self._drop_topic(state, rel)
        try:
            text = full.read_text(encoding="utf-8")
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
            )
            for record, prose in zip(records, proses, strict=True)
        ]
        ids, lengths = self._term_ids(state, records, proses)
        self._install_docs(state, rel, sig, docs, ids, lengths, stats)
        stats.topics_parsed += 1
        stats.records_indexed += len(docs)

    @staticmethod
    def _term_ids(
        state: _State, records: Sequence[Record], proses: Sequence[str]
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
            key = (record.headings, record.date)
            if (pair := around.get(key)) is None:
                pair = around[key] = (words_of(" ".join(record.headings)), words_of(" ".join(date_words(record.date))))
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
        state: _State,
        rel: str,
        sig: Signature,
        docs: list[Document],
        ids: npt.NDArray[np.int64],
        lengths: list[int],
        stats: RefreshStats,
    ) -> None:
        """Put one topic's records into the index; trust from the known sources (read when unknown)."""
        slots = state.bm25.add_ids(ids, lengths)
        known, vouched, citing = state.sources, self._vouched, state.citing
        for slot, doc in zip(slots, docs, strict=True):
            if slot == len(state.docs):
                state.docs.append(doc)
                state.trusted.append(False)
            else:
                state.docs[slot] = doc
            trusted = bool(doc.sources)
            for source in doc.sources:
                citing.setdefault(source, set()).add(slot)
                if trusted:  # a source this refresh has vouched for already is answered from memory
                    entry = known.get(source)
                    ok = (
                        entry[1]
                        if entry is not None and source in vouched
                        else self._source_trusted(state, source, stats)
                    )
                    trusted = trusted and ok
            state.trusted[slot] = trusted
        state.topics[rel] = (sig, slots)
        state.topic_docs[rel] = pickle.dumps([tuple(doc) for doc in docs], protocol=pickle.HIGHEST_PROTOCOL)

    def _source_trusted(self, state: _State, source: str, stats: RefreshStats) -> bool:
        known = state.sources.get(source)
        if known is not None and source in self._vouched:
            return known[1]
        self._vouched.add(source)
        sig = signature(self.root / source)
        if known is not None and known[0] == sig:
            return known[1]
        trusted = False
        if sig is not None:
            try:
                trusted = parse_source(source, (self.root / source).read_bytes()).trust == "trusted"
            except Exception as exc:  # an unreadable source cannot vouch for anything
                log.warning("recall.source_unreadable", source=source, error=str(exc))
            stats.sources_read += 1
        state.sources[source] = (sig, trusted)
        folder = source.rsplit("/", 1)[0]
        if folder not in state.folders:
            state.folders[folder] = signature(self.root / folder)
        return trusted

    def _doc_trusted(self, state: _State, slot: int, stats: RefreshStats) -> bool:
        doc = state.docs[slot]
        assert doc is not None
        return bool(doc.sources) and all(self._source_trusted(state, s, stats) for s in doc.sources)

    def _check_sources(self, state: _State, stats: RefreshStats) -> None:
        """Re-read the sources of thread folders that changed; re-evaluate the records citing them."""
        moved: set[str] = set()
        for folder, old in list(state.folders.items()):
            sig = signature(self.root / folder)
            if sig != old:
                state.folders[folder] = sig
                moved.add(folder)
        if not moved:
            return
        for source in [s for s in state.citing if s.rsplit("/", 1)[0] in moved]:
            before = state.sources.get(source, (None, False))[1]
            after = self._source_trusted(state, source, stats)
            if before == after:
                continue
            for slot in state.citing[source]:
                value = self._doc_trusted(state, slot, stats)
                if value != state.trusted[slot]:
                    state.trusted[slot] = value
                    stats.trust_changed += 1

    # -- searching ------------------------------------------------------------------

    def search(
        self,
        query: str,
        limit: int = DEFAULT_LIMIT,
        *,
        include_pending: bool = False,
        mode: SearchMode = "bm25",
        branches: BranchLookup | None = None,
    ) -> list[Hit]:
        """The ``limit`` best records for ``query``; pending-backed ones only if ``include_pending``.

        ``branches`` (a :class:`scriptorium.recall.branches.BranchView`) gives each hit its ``branch``.

        ``mode``: ``bm25``, ``embedding``, or ``hybrid`` (the two fused: :data:`embedding.FUSION`).
        An unavailable embedding backend raises VECTOR_BACKEND_UNAVAILABLE; it never falls back.
        """
        if mode not in SEARCH_MODES:
            raise InvalidArgument(f"search mode must be one of {', '.join(SEARCH_MODES)}, not {mode!r}")
        if limit < 1:
            raise InvalidArgument("limit must be at least 1")
        encoder = default_encoder() if mode != "bm25" else None  # outside the lock: loading takes seconds
        words = tokenize(query)
        with self._lock:
            self._refresh()
            state = self._state
            assert state is not None
            if self._trusted_array is None:
                self._trusted_array = np.asarray(state.trusted, dtype=bool)
            allowed = None if include_pending else self._trusted_array
            depth = limit if mode != "hybrid" else max(limit, FUSION_DEPTH)
            lexical = self._lexical(state, query, words, depth, allowed) if mode != "embedding" else []
            dense = self._dense(state, query, depth, allowed, encoder) if encoder is not None else []
            if mode == "hybrid":
                if self.fusion == "weighted":
                    weight = self.lexical_weight
                    ranked = embedding.fuse_weighted([lexical, dense], [weight, 1 - weight], limit)
                else:
                    ranked = fuse([[s for s, _ in lexical], [s for s, _ in dense]], limit)
            else:
                ranked = lexical or dense
            wanted = set(words)
            hits, cited = [], []
            for slot, score in ranked:
                doc = state.docs[slot]
                assert doc is not None
                trust: Trust = "trusted" if state.trusted[slot] else "pending"
                hits.append(
                    Hit(doc.memory_id, doc.topic, doc.headings, doc.date, snippet(doc.text, wanted), score, trust)
                )
                cited.append(doc.sources)
        if branches is None or not hits:
            return hits
        return [replace(hit, branch=status) for hit, status in zip(hits, branches(cited), strict=True)]

    @staticmethod
    def _top(
        slots: npt.NDArray[np.int64], scores: npt.NDArray[Any], limit: int, state: _State
    ) -> list[tuple[int, float]]:
        docs = state.docs

        def memory_id(slot: int) -> str:
            doc = docs[slot]
            assert doc is not None
            return doc.memory_id

        if len(slots) > limit:  # the first ``limit`` by (-score, memory ID), ties at the cut included
            cut = np.partition(scores, len(scores) - limit)[len(scores) - limit]
            above = np.flatnonzero(scores > cut)
            level = sorted(np.flatnonzero(scores == cut).tolist(), key=lambda i: memory_id(int(slots[i])))
            top = np.concatenate((above, np.asarray(level[: limit - len(above)], dtype=np.int64)))
            slots, scores = slots[top], scores[top]
        return sorted(
            zip(slots.tolist(), scores.tolist(), strict=True), key=lambda item: (-item[1], memory_id(item[0]))
        )

    def _lexical(
        self, state: _State, query: str, words: list[str], limit: int, allowed: npt.NDArray[np.bool_] | None
    ) -> list[tuple[int, float]]:
        slots, scores = state.bm25.candidate_scores(words, allowed)
        if self.time_boost and len(slots):
            if self._dates is None:
                self._dates = RecordDates([doc.date if doc is not None else None for doc in state.docs])
            whens = time_expressions(query, self._dates.anchor)
            scores = self._dates.boost(slots, scores, whens, self.time_boost)
        if self.neighbour_weight and len(slots):
            slots, scores = self._with_neighbours(state, slots, scores, max(LENDERS, 10 * limit))
            if allowed is not None:
                keep = allowed[slots]
                slots, scores = slots[keep], scores[keep]
        return self._top(slots, scores, limit, state)

    def _with_neighbours(
        self, state: _State, slots: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], lenders: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        if self._neighbours is None:
            orders = (topic_slots for _sig, topic_slots in state.topics.values())
            self._neighbours = neighbour_slots(orders, len(state.docs))
        before, after = self._neighbours
        return lend_to_neighbours(slots, scores, before, after, self.neighbour_weight, lenders)

    def _dense(
        self, state: _State, query: str, limit: int, allowed: npt.NDArray[np.bool_] | None, encoder: Encoder
    ) -> list[tuple[int, float]]:
        if self._dense_matrix is None:  # every live record's vector, rebuilt after a refresh changed records
            live = [slot for slot, doc in enumerate(state.docs) if doc is not None]
            texts = [embedding_text(state.docs[slot]) for slot in live]  # type: ignore[arg-type]
            self._dense_matrix = (np.asarray(live, dtype=np.int64), self.vectors.matrix(texts, encoder))
        slots, matrix = self._dense_matrix
        if not len(slots):
            return []
        # Score everything, then mask: no matrix copy. einsum, not ``@``: BLAS's threads and the encoder's
        # OpenMP threads spin against each other on a small machine (a 10,000-record query took 10x the
        # encoding; einsum's single loop adds about a tenth).
        scores = np.einsum("ij,j->i", matrix, encoder.encode_query(query))
        if allowed is not None:
            keep = allowed[slots]
            slots, scores = slots[keep], scores[keep]
        return self._top(slots, scores, limit, state)

    def pending_ids(self, topic: str) -> frozenset[str]:
        """Memory IDs of the records in ``topic`` backed by a pending (or missing) source."""
        with self._lock:
            self._refresh()
            state = self._state
            assert state is not None
            entry = state.topics.get(topic)
            if entry is None:
                return frozenset()
            return frozenset(
                doc.memory_id for slot in entry[1] if not state.trusted[slot] and (doc := state.docs[slot]) is not None
            )

    def size(self) -> int:
        """Records in the index (after a refresh)."""
        with self._lock:
            self._refresh()
            assert self._state is not None
            return self._state.bm25.live
