"""The BM25 recall index over topic records: search, over what :mod:`scriptorium.recall.state` keeps.

Retrieval reads organized topics, never raw source text: a record is what a
writer kept and cited, a source only the evidence behind it. Nothing is
checked at all while ``.scriptorium/state.json`` (rewritten by every install)
keeps its signature; when it moved, a refresh parses again only the topics
whose files changed and re-reads only sources whose thread folders changed
(:class:`scriptorium.recall.state.Refresher`). The index lives in memory per
process and on disk under ``.scriptorium/cache/`` (:mod:`scriptorium.recall.cache`:
one file a new process reads as it is; derived state: deleting it loses
nothing, the next search rebuilds it).
"""

from __future__ import annotations

import heapq
import shutil
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from scriptorium.audience import OWNER, Viewer
from scriptorium.cache import BoundedCache
from scriptorium.errors import InvalidArgument
from scriptorium.logs import get_logger
from scriptorium.recall import embedding
from scriptorium.recall.bm25 import Subcorpus
from scriptorium.recall.cache import CACHE_DIR, IndexCache
from scriptorium.recall.current import current_first, newest_successor, older_restatements
from scriptorium.recall.embedding import (
    FUSION_DEPTH,
    VECTOR_CACHE,
    Encoder,
    Matrix,
    VectorStore,
    default_encoder,
    fuse,
    text_key,
)
from scriptorium.recall.modes import DEFAULT_LIMIT as DEFAULT_LIMIT
from scriptorium.recall.modes import SEARCH_MODES as SEARCH_MODES
from scriptorium.recall.modes import SearchMode as SearchMode
from scriptorium.recall.ranking import LexicalRanking, top
from scriptorium.recall.records import (
    BranchLookup,
    Document,
    Hit,
    RefreshStats,
    Trust,
    embedding_texts,
    signature,
)
from scriptorium.recall.state import IndexState, Refresher, newest_of_thread, paused_gc, thread_slots
from scriptorium.recall.text import snippet, tokenize
from scriptorium.workspace import epoch
from scriptorium.workspace.paths import RUNTIME_DIR, STATE

log = get_logger(__name__)


SUBCORPORA = 8
"""Requesters whose BM25 statistics an index keeps at once (each: the vocabulary's idf, a float per record,
and up to :data:`scriptorium.recall.bm25.SUBCORPUS_CACHE` contributions); the least recent is rebuilt."""


class RecallIndex:
    """BM25 over one workspace's records (thread-safe; one per workspace per process via :meth:`open`)."""

    _open: ClassVar[dict[Path, RecallIndex]] = {}
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, root: Path, *, persist: bool = True) -> None:
        self.root = root
        self.persist = persist
        self.cache_dir = root / RUNTIME_DIR / "cache" / CACHE_DIR
        self.cache = IndexCache(self.cache_dir)
        self._gate = str(root / RUNTIME_DIR / STATE)
        """The installed state's file: its signature, read before every query, says whether anything changed."""
        self._lock = threading.Lock()
        self._state: IndexState | None = None
        self._epoch_seen = ""
        """The forget epoch the state was built under (:meth:`forget`)."""
        self._trusted_array: npt.NDArray[np.bool_] | None = None
        self._audience_masks: dict[Viewer, npt.NDArray[np.bool_] | None] = {}
        """Per viewer: which slots it may see (None: all); dropped with the trust array."""
        self._subcorpora: BoundedCache[Viewer, Subcorpus] = BoundedCache(SUBCORPORA)
        """Per viewer with a mask: the BM25 statistics of the records it may see (:meth:`_lexical`)."""
        self._dense_matrix: tuple[npt.NDArray[np.int64], Matrix] | None = None
        self.ranking = LexicalRanking()
        """The lexical stages and their settings (:mod:`scriptorium.recall.ranking`)."""
        self.fusion = embedding.FUSION
        self.lexical_weight = embedding.LEXICAL_WEIGHT
        self.vectors = VectorStore(root / RUNTIME_DIR / "cache" / VECTOR_CACHE if persist else None)
        self.last_refresh = RefreshStats()
        self._refreshed_at = -float("inf")
        """When (monotonic) the state was last brought up to the installed files."""
        self._refresher = Refresher(root, self.cache if persist else None)

    @classmethod
    def open(cls, root: Path) -> RecallIndex:
        """The process-wide index of the workspace at ``root`` (reused across calls)."""
        key = root.resolve()
        with cls._open_lock:
            index = cls._open.get(key)
            if index is None:
                index = cls._open[key] = RecallIndex(key)
            return index

    @classmethod
    def loaded(cls, root: Path) -> bool:
        """Whether this process holds the index of the workspace at ``root`` in memory already: a search then
        costs the query, not the load of the disk cache (what a cold hook's budget must cover)."""
        with cls._open_lock:
            index = cls._open.get(root.resolve())
        # A forget since (in any process) makes the next search build afresh: as cold as no index at all.
        return index is not None and index._state is not None and index._epoch_seen == index._epoch()

    @classmethod
    def refresh_after_writes(cls, root: Path) -> None:
        """After writes this process installed: bring the index (and its disk cache) up to them, so the next
        process to search — a hook answering in process after the daemon exited, the CLI — loads a current
        cache instead of parsing what the writes changed within its budget. Costs the topics the writes
        changed and one write of the cache; a failure leaves it to the next search."""
        from scriptorium.workspace.paths import is_workspace

        if not is_workspace(root):
            return
        try:
            cls.open(root).refresh()
        except Exception as exc:  # derived state: the next search rebuilds what this could not
            log.warning("recall.refresh_failed", error=str(exc))

    # -- the cache ------------------------------------------------------------------

    def drop(self) -> None:
        """Forget the in-process index (the disk cache stays)."""
        with self._lock:
            self._state = None
            self._drop_viewers()
            self._dense_matrix = None
            self.ranking.drop()

    @classmethod
    def forget(cls, root: Path) -> dict[str, int]:
        """After a forget: every process's index is rebuilt from the installed topics (the old state's
        vocabulary held the forgotten words, so none of it may be saved again) and every vector but those of
        the installed records' texts is dropped: the forgotten records' own, and their followers', whose
        context held the forgotten text (:func:`~scriptorium.recall.records.embedding_texts`). A new epoch
        file tells the other processes; this one's index starts afresh — built here only when there are
        vectors to sort (it names the live texts), else by the next search."""
        key = root.resolve()
        cache = key / RUNTIME_DIR / "cache"
        epoch.bump(key)
        shutil.rmtree(cache / CACHE_DIR, ignore_errors=True)
        if not (cache / VECTOR_CACHE).exists() and not cls.open(key).vectors.vectors:
            # No vectors to sort: nothing here needs the new index, and building it would cost the whole
            # memory's records in time and in this process's memory (a purge's peak). The first search, in
            # whichever process, builds it from the installed topics (its cold budget covers that).
            cls.open(key).drop()
            return {"vectors_dropped": 0, "index_rebuilt": 0}
        index = cls.open(key)
        with index._lock:
            index._reset()
            index._refresh()
            assert index._state is not None
            live = {text_key(text) for _slot, text in index._vector_texts(index._state)}
        dropped = index.vectors.keep_only(live)
        return {"vectors_dropped": dropped, "index_rebuilt": 1}

    def restated(self, text: str, date: str | None, *, within_s: float = 0.0) -> list[Document]:
        """The installed records that a record saying ``text`` on ``date`` says again, later and differently:
        its older near-duplicates (:func:`~scriptorium.recall.current.older_restatements`), newest first, shared
        ones only — one cited from a requester's own sources is never named from another record. Costs the
        postings of the text's rarest terms, not the memory.

        ``within_s``: how old (seconds) the index may be — a write pass asks for each record it organizes,
        and brings it up to the installed files no more often than that (each refresh folds what changed
        into every posting); its refresh leaves the disk cache to the next search's."""
        with self._lock:
            if self._state is None or time.monotonic() - self._refreshed_at > within_s:
                self._refresh(save=False)
            state = self._state
            assert state is not None
            found = [state.docs[slot] for slot in older_restatements(state, text, date) if not state.audience[slot]]
            return [doc for doc in found if doc is not None]

    def vector_texts(self) -> dict[str, str]:
        """Memory ID → what its record's vector encodes, for the installed records."""
        with self._lock:
            self._refresh()
            state = self._state
            assert state is not None
            return {state.docs[slot].memory_id: text for slot, text in self._vector_texts(state)}  # type: ignore[union-attr]

    @staticmethod
    def _vector_texts(state: IndexState) -> list[tuple[int, str]]:
        """Each live slot with what its vector encodes, in slot order."""
        pairs: list[tuple[int, str]] = []
        for _sig, slots in state.topics.values():
            docs = [state.docs[slot] for slot in slots]
            pairs += zip(slots, embedding_texts(docs), strict=True)  # type: ignore[arg-type]
        pairs.sort()
        return pairs

    def _drop_viewers(self) -> None:
        """Forget what was derived per viewer (trust and audience may have changed)."""
        self._trusted_array = None
        self._audience_masks = {}
        self._subcorpora = BoundedCache(SUBCORPORA)

    def _epoch(self) -> str:
        return epoch.read(self.root)

    def _reset(self) -> None:
        """Start afresh: nothing of the state held so far is used or saved again."""
        self._state = IndexState()
        self._epoch_seen = self._epoch()
        self._drop_viewers()
        self._dense_matrix = None
        self.vectors.unload()
        self.ranking.drop()

    # -- refreshing ---------------------------------------------------------------

    def refresh(self) -> RefreshStats:
        """Bring the index up to the installed files; returns what it did."""
        with self._lock:
            return self._refresh()

    def _refresh(self, save: bool = True) -> RefreshStats:
        """Bring the state up to the installed files; ``save``: and the disk cache up to the state (else it is
        saved by the next refresh that may)."""
        stats = RefreshStats()
        if self._state is None:
            self._epoch_seen = self._epoch()
            with paused_gc():
                self._state = self._refresher.load()
            self._drop_viewers()
        state = self._state
        gate = signature(self._gate)
        self._refreshed_at = time.monotonic()
        if gate is not None and gate == state.gate:
            if save and state.unsaved and self._epoch() == self._epoch_seen:  # never a state from before a forget
                self._refresher.save(state)
            self.last_refresh = stats
            return stats
        if self._epoch() != self._epoch_seen:  # a forget since: rebuild, never save the old vocabulary again
            self._reset()
            state = self._state
            assert state is not None
        stats.checked = True
        with paused_gc():  # a build allocates hundreds of thousands of acyclic objects: nothing to collect
            changed = self._refresher.scan(state, gate, stats, save)
        self._drop_viewers()
        if changed:
            self._dense_matrix = None
            self.ranking.drop()
        self.last_refresh = stats
        return stats

    # -- searching ------------------------------------------------------------------

    def search(
        self,
        query: str,
        limit: int = DEFAULT_LIMIT,
        *,
        include_pending: bool = False,
        mode: SearchMode = "bm25",
        branches: BranchLookup | None = None,
        viewer: Viewer = OWNER,
    ) -> list[Hit]:
        """The ``limit`` best records for ``query`` that ``viewer`` may see (every cited source's audience
        is its own or shared; the owner sees all); pending-backed ones only if ``include_pending``.

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
            allowed = self._allowed(state, include_pending, viewer)
            depth = limit if mode != "hybrid" else max(limit, FUSION_DEPTH)
            lexical = (
                self.ranking.rank(state, query, words, depth, allowed, self._subcorpus(state, viewer))
                if mode != "embedding"
                else []
            )
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
            for slot, score, superseded_by in current_first(state, ranked, _visible(allowed))[:limit]:
                doc = state.docs[slot]
                assert doc is not None
                trust: Trust = "trusted" if state.trusted[slot] else "pending"
                text = snippet(doc.text, wanted)
                hits.append(replace(self._hit(state, slot, text, score, trust), superseded_by=superseded_by))
                cited.append(doc.sources)
        if branches is None or not hits:
            return hits
        return [replace(hit, branch=status) for hit, status in zip(hits, branches(cited), strict=True)]

    def newest_from(self, threads: Collection[str], limit: int = DEFAULT_LIMIT, *, viewer: Viewer = OWNER) -> list[Hit]:
        """The ``limit`` newest trusted records ``viewer`` may see that cite a message of one of ``threads``
        (by date, then memory ID; undated last): what recent sessions of a project left."""
        if limit < 1 or not threads:
            return []
        wanted = set(threads)
        with self._lock:
            self._refresh()
            state = self._state
            assert state is not None
            allowed = self._allowed(state, False, viewer)
            threads = thread_slots(state)
            # Threads newest first by their newest record, a bound on what each can add: the first that cannot
            # beat the limit-th found ends the walk, so an opening reads the newest sessions' records, not the
            # project's whole history (which grows all year).
            order = sorted(((newest_of_thread(state, t), t) for t in wanted if t in threads), reverse=True)
            best: list[tuple[str, str, int]] = []  # a min-heap of the limit newest found
            seen: set[int] = set()
            for newest, thread in order:
                if len(best) >= limit and newest < best[0][:2]:
                    break
                for slot in threads[thread] - seen:
                    seen.add(slot)
                    doc = state.docs[slot]
                    if doc is None or (allowed is not None and not allowed[slot]):
                        continue
                    item = (doc.date or "", doc.memory_id, slot)
                    if len(best) < limit:
                        heapq.heappush(best, item)
                    elif item > best[0]:
                        heapq.heapreplace(best, item)
            best.sort(reverse=True)
            hits = [self._hit(state, slot, None, 0.0, "trusted") for _d, _i, slot in best]
        return hits

    @staticmethod
    def _hit(state: IndexState, slot: int, text: str | None, score: float, trust: Trust) -> Hit:
        """Slot ``slot``'s record as a hit, showing ``text`` (None: the record's whole text)."""
        doc = state.docs[slot]
        assert doc is not None
        return Hit(
            doc.memory_id,
            doc.topic,
            doc.headings,
            doc.date,
            doc.text if text is None else text,
            score,
            trust,
            audience=state.audience[slot],
            sources=doc.sources,
        )

    def _allowed(self, state: IndexState, include_pending: bool, viewer: Viewer) -> npt.NDArray[np.bool_] | None:
        """Which slots a search may return (None: every one): trusted unless ``include_pending``, and seen by
        ``viewer``. Called under the lock."""
        if self._trusted_array is None:
            self._trusted_array = np.asarray(state.trusted, dtype=bool)
        if viewer not in self._audience_masks:
            mask = None
            if not viewer.everything and any(state.audience):  # a workspace with private records
                mask = np.fromiter(map(viewer.sees, state.audience), dtype=bool, count=len(state.audience))
            self._audience_masks[viewer] = mask
        seen = self._audience_masks[viewer]
        if include_pending:
            return seen
        return self._trusted_array if seen is None else self._trusted_array & seen

    def _subcorpus(self, state: IndexState, viewer: Viewer) -> Subcorpus | None:
        """The BM25 statistics of the records ``viewer`` may see, None when it sees them all: a requester's
        scores never count records of another audience (a word only in someone else's private records
        would move them). Built once per viewer per change of the index, under the lock."""
        seen = self._audience_masks[viewer]
        if seen is None:
            return None
        found = self._subcorpora.get(viewer)
        if found is None:
            live = np.fromiter((doc is not None for doc in state.docs), dtype=bool, count=len(state.docs))
            found = state.bm25.subcorpus(seen & live)
            self._subcorpora.put(viewer, found)
        return found

    def _dense(
        self, state: IndexState, query: str, limit: int, allowed: npt.NDArray[np.bool_] | None, encoder: Encoder
    ) -> list[tuple[int, float]]:
        if self._dense_matrix is None:  # every live record's vector, rebuilt after a refresh changed records
            pairs = self._vector_texts(state)
            live = np.fromiter((slot for slot, _text in pairs), dtype=np.int64, count=len(pairs))
            self._dense_matrix = (live, self.vectors.matrix([text for _slot, text in pairs], encoder))
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
        return top(slots, scores, limit, state)

    def pending_ids(self, topic: str) -> frozenset[str]:
        """Memory IDs of the records in ``topic`` backed by a pending (or missing) source."""
        return self.hidden_ids(topic, OWNER)

    def hidden_ids(self, topic: str, viewer: Viewer) -> frozenset[str]:
        """Memory IDs of the records in ``topic`` automatic context must leave out for ``viewer``: backed by a
        pending (or missing) source, or citing a source ``viewer`` may not see."""
        with self._lock:
            self._refresh()
            state = self._state
            assert state is not None
            entry = state.topics.get(topic)
            if entry is None:
                return frozenset()
            return frozenset(
                doc.memory_id
                for slot in entry[1]
                if (not state.trusted[slot] or not viewer.sees(state.audience[slot]))
                and (doc := state.docs[slot]) is not None
            )

    def superseded_in(self, topic: str) -> dict[str, tuple[str, str]]:
        """The records of ``topic`` another record says it supersedes: memory ID → (the newest successor's
        memory ID, its topic). Costs the topic's records."""
        with self._lock:
            self._refresh()
            state = self._state
            assert state is not None
            entry = state.topics.get(topic)
            found: dict[str, tuple[str, str]] = {}
            for slot in entry[1] if entry is not None else ():
                newer = newest_successor(state, slot, lambda _slot: True)
                if newer is not None and (doc := state.docs[slot]) is not None and (new := state.docs[newer]):
                    found[doc.memory_id] = (new.memory_id, new.topic)
            return found

    def audience_of(self, topic: str, memory_id: str) -> str | None:
        """The audience of record ``memory_id`` of ``topic`` as indexed (None: not in the index)."""
        with self._lock:
            self._refresh()
            state = self._state
            assert state is not None
            entry = state.topics.get(topic)
            for slot in entry[1] if entry is not None else ():
                doc = state.docs[slot]
                if doc is not None and doc.memory_id == memory_id:
                    return state.audience[slot]
            return None

    def size(self) -> int:
        """Records in the index (after a refresh)."""
        with self._lock:
            self._refresh()
            assert self._state is not None
            return self._state.bm25.live


def _visible(allowed: npt.NDArray[np.bool_] | None) -> Callable[[int], bool]:
    """Whether a search that may return ``allowed`` (None: every slot) may show a slot."""
    if allowed is None:
        return lambda _slot: True
    return lambda slot: slot < len(allowed) and bool(allowed[slot])


@epoch.on_forget
def _drop_open_indexes() -> None:
    """A forget landed: every open index lets go of its in-memory state (its vocabulary, its texts)."""
    with RecallIndex._open_lock:
        indexes = list(RecallIndex._open.values())
    for index in indexes:
        index.drop()
