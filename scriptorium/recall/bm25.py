"""Okapi BM25 over postings arrays that change one document at a time, with rank-bm25's exact scores.

``rank_bm25.BM25Okapi`` is built once over a whole corpus, and its
``get_scores`` walks every document in Python (≈140 ms at 100,000 records).
:class:`IncrementalBM25` keeps the same statistics (``corpus_size``, ``avgdl``,
idf with rank-bm25's epsilon floor, ``BM25Okapi._calc_idf`` vectorised) over
postings held as flat arrays sorted by (term, slot), as a search engine's
segment is:

* documents come and go in slots; :meth:`add` and :meth:`remove` only note the
  change, and :meth:`commit` folds all of them in at once — the stale postings
  masked out, the new ones sorted and merged in — then recomputes idf and every
  posting's score contribution;
* a query adds up its terms' precomputed contributions, a slice of an array
  each, over the documents sharing one of its terms;
* :meth:`dump` and :meth:`load` hand the arrays to the disk cache as they are:
  a new process reads the index, it does not rebuild it;
* :meth:`subcorpus` derives the statistics of some documents only (those a
  requester may see), as if they were the whole corpus: a query scored within
  it gets the scores ``BM25Okapi`` gives over those documents alone, so
  nothing outside them moves a score.

The tests check every score against ``BM25Okapi.get_scores`` on the same live corpus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_I32 = npt.NDArray[np.int32]
_EMPTY_I32: _I32 = np.empty(0, dtype=np.int32)


SUBCORPUS_CACHE = 1 << 21
"""Posting contributions a :class:`Subcorpus` keeps computed (16 MiB of floats): a term's are computed
at its first query within it and reused by the next (a subcorpus lives until the index changes)."""


@dataclass(slots=True, eq=False)
class Subcorpus:
    """BM25Okapi's statistics over some documents only (:meth:`IncrementalBM25.subcorpus`)."""

    idf: FloatArray
    """Per term: its idf among those documents (epsilon floor included)."""
    norm: FloatArray
    """Per slot: ``k1 (1 − b + b |d| / avgdl)`` with those documents' average length."""
    weights: dict[int, FloatArray] = field(default_factory=dict)
    """Per term queried so far: its postings' contributions (up to :data:`SUBCORPUS_CACHE` of them)."""
    cached: int = 0
    """How many contributions :attr:`weights` holds."""


class IncrementalBM25:
    """BM25Okapi over slots that can be filled and emptied; call :meth:`commit` after changes."""

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.vocab: dict[str, int] = {}
        self.corpus_size = 0
        self.avgdl = 0.0
        self.average_idf = 0.0
        self.live = 0
        self.total_len = 0
        self.doc_len: list[int] = []
        # Committed postings, sorted by (term id, slot).
        self._term: _I32 = _EMPTY_I32
        self._slot: _I32 = _EMPTY_I32
        self._tf: _I32 = _EMPTY_I32
        # Changes since the last commit: postings added, a (term, slot, tf) array triple per add.
        self._new: list[tuple[_I32, _I32, _I32]] = []
        self._removed: list[int] = []
        self._free: list[int] = []
        """Slots emptied before the last commit: reusable (a slot emptied since is not, until then)."""
        # Derived at commit (and at load).
        self._indptr: IntArray = np.zeros(1, dtype=np.int64)
        self._idf: FloatArray = np.empty(0)
        self._weight: FloatArray = np.empty(0)
        self._dirty = False

    # -- changing documents ------------------------------------------------------

    def intern(self, term: str) -> int:
        """The id of ``term``, a new one (the next) if it is new."""
        return self.vocab.setdefault(term, len(self.vocab))

    def add(self, terms: Sequence[str]) -> int:
        """Add one document (its terms, a repeat counting again); returns its slot."""
        return self.add_many([terms])[0]

    def add_many(self, docs: Sequence[Sequence[str]]) -> list[int]:
        """Add documents (each its terms, repeats counting again); returns their slots, in order.

        A new term gets the next id, in order of first appearance.
        """
        vocab = self.vocab
        for word in dict.fromkeys(word for doc in docs for word in doc):
            if word not in vocab:
                vocab[word] = len(vocab)
        ids = np.asarray([vocab[word] for doc in docs for word in doc], dtype=np.int64)
        return self.add_ids(ids, [len(doc) for doc in docs])

    def add_ids(self, ids: IntArray, lengths: Sequence[int]) -> list[int]:
        """Add documents given as term ids (:meth:`intern`), all of them in one array, ``lengths[i]`` of
        them for document ``i``; returns their slots, in order. Counting is one numpy pass over them all
        (a full build adds every record of the workspace, a topic at a time)."""
        slots: list[int] = []
        for length in lengths:
            slot = self._free.pop() if self._free else len(self.doc_len)
            if slot == len(self.doc_len):
                self.doc_len.append(length)
            else:
                self.doc_len[slot] = length
            slots.append(slot)
        if len(ids):
            owner = np.repeat(np.asarray(slots, dtype=np.int64), lengths)
            keys, tf = np.unique((owner << 32) | ids, return_counts=True)
            self._new.append(((keys & 0xFFFFFFFF).astype(np.int32), (keys >> 32).astype(np.int32), tf.astype(np.int32)))
        self.live += len(lengths)
        self.total_len += int(sum(lengths))
        self._dirty = True
        return slots

    def remove(self, slot: int) -> None:
        """Empty one slot (a later :meth:`add` reuses it, once a commit has come between)."""
        self._removed.append(slot)
        self.total_len -= self.doc_len[slot]
        self.doc_len[slot] = 0
        self.live -= 1
        self._dirty = True

    def commit(self) -> None:
        """Fold the changes into the postings; recompute the corpus statistics, idf and contributions."""
        if not self._dirty:
            return
        stale = np.zeros(len(self.doc_len), dtype=bool)
        stale[self._removed] = True
        keep = ~stale[self._slot]
        term, slot, tf = self._term[keep], self._slot[keep], self._tf[keep]
        if self._new:
            new_term, new_slot, new_tf = (np.concatenate(part) for part in zip(*self._new, strict=True))
            fresh = ~stale[new_slot]  # added and removed again before this commit
            new_term, new_slot, new_tf = new_term[fresh], new_slot[fresh], new_tf[fresh]
            new_key = (new_term.astype(np.int64) << 32) | new_slot
            order = np.argsort(new_key, kind="stable")
            new_term, new_slot, new_tf = new_term[order], new_slot[order], new_tf[order]
            if len(term):
                at = np.searchsorted((term.astype(np.int64) << 32) | slot, new_key[order])
                term, slot, tf = np.insert(term, at, new_term), np.insert(slot, at, new_slot), np.insert(tf, at, new_tf)
            else:
                term, slot, tf = new_term, new_slot, new_tf
        self._term, self._slot, self._tf = term, slot, tf
        self._free.extend(self._removed)
        self._new, self._removed = [], []
        self._derive()
        self._dirty = False

    def _derive(self) -> None:
        """Statistics, idf and every posting's contribution."""
        counts = np.bincount(self._term, minlength=len(self.vocab))
        self._indptr = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))
        self.corpus_size = self.live
        self.avgdl = self.total_len / self.live if self.live else 0.0
        self._idf, self.average_idf = self._idf_of(counts, self.corpus_size)
        if not len(self._term):
            self._weight = np.empty(0)
            return
        norm = self._norm_of(self.avgdl)
        self._weight = self._contribution(self._idf[self._term], self._tf, norm[self._slot])

    def _idf_of(self, counts: IntArray, corpus_size: int) -> tuple[FloatArray, float]:
        """Per term its idf and the average over the terms present: rank-bm25's ``_calc_idf``, vectorised."""
        present = counts > 0
        idf = np.zeros(len(counts), dtype=np.float64)
        average = 0.0
        if present.any():
            freq = counts[present].astype(np.float64)
            values = np.log(corpus_size - freq + 0.5) - np.log(freq + 0.5)
            average = float(values.sum() / len(values))
            idf[present] = np.where(values < 0, self.epsilon * average, values)
        return idf, average

    def _norm_of(self, avgdl: float) -> FloatArray:
        """Per slot: ``k1 (1 − b + b |d| / avgdl)``."""
        lengths = np.asarray(self.doc_len, dtype=np.float64)
        return self.k1 * (1 - self.b + self.b * lengths / (avgdl or 1.0))

    def _contribution(self, idf: FloatArray, tf: _I32, norm: FloatArray) -> FloatArray:
        """rank-bm25's get_scores, per (term, document): idf × tf (k1 + 1) / (tf + norm)."""
        freq = tf.astype(np.float64)
        return idf * (freq * (self.k1 + 1) / (freq + norm))

    def idf(self, term: str, within: Subcorpus | None = None) -> float:
        """``term``'s idf (in ``within``'s documents when given; 0 for a term no document holds)."""
        t = self.vocab.get(term)
        if t is None:
            return 0.0
        return float((self._idf if within is None else within.idf)[t])

    def postings(self, term: str) -> _I32:
        """The slots of the documents holding ``term``, sorted (empty for a term none holds): a slice, not a
        copy — read it, do not change it."""
        assert not self._dirty, "commit() before postings()"
        t = self.vocab.get(term)
        if t is None or t + 1 >= len(self._indptr):
            return _EMPTY_I32
        return self._slot[int(self._indptr[t]) : int(self._indptr[t + 1])]

    def subcorpus(self, members: npt.NDArray[np.bool_]) -> Subcorpus:
        """The statistics of the live documents ``members`` marks (a mask over slots) as a corpus of their
        own: what :meth:`candidate_scores` needs to score within them. One pass over the postings."""
        assert not self._dirty, "commit() before subcorpus()"
        size = int(members.sum())
        counts = np.bincount(self._term[members[self._slot]], minlength=len(self.vocab))
        total = int(np.asarray(self.doc_len, dtype=np.int64)[members].sum())
        idf, _average = self._idf_of(counts, size)
        return Subcorpus(idf, self._norm_of(total / size if size else 0.0))

    # -- the disk cache ------------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        """What :meth:`load` needs, as arrays and plain values (committed state only)."""
        assert not self._dirty, "commit() before dump()"
        return {
            "params": (self.k1, self.b, self.epsilon),
            "vocab": self.vocab,
            "doc_len": np.asarray(self.doc_len, dtype=np.int64),
            "postings": (self._term, self._slot, self._tf),
            "free": self._free,
            "live": self.live,
        }

    @classmethod
    def load(cls, dumped: Mapping[str, Any]) -> IncrementalBM25:
        k1, b, epsilon = dumped["params"]
        index = cls(k1, b, epsilon)
        index.vocab = dumped["vocab"]
        index.doc_len = dumped["doc_len"].tolist()
        index._term, index._slot, index._tf = dumped["postings"]
        index._free = list(dumped["free"])
        index.live = int(dumped["live"])
        index.total_len = sum(index.doc_len)
        index._derive()
        return index

    # -- scoring -------------------------------------------------------------------

    def candidate_scores(
        self,
        query: Sequence[str],
        allowed: npt.NDArray[np.bool_] | None = None,
        within: Subcorpus | None = None,
        term_weights: Sequence[float] | None = None,
    ) -> tuple[IntArray, FloatArray]:
        """(slots, scores) of every document sharing a term with ``query``, rank-bm25's formula.

        Slots come sorted; ``allowed`` (a mask over slots) keeps only the documents it marks. ``within``
        (:meth:`subcorpus`, whose documents ``allowed`` must lie in) scores with those documents'
        statistics instead of the whole corpus's. A repeated query term counts again, as in rank-bm25.
        ``term_weights`` (one per query term; default 1) scale each term's contributions: an expanded
        query's added terms count less than the asker's own (:mod:`scriptorium.recall.feedback`).
        """
        assert not self._dirty, "commit() after changing documents"
        indptr = self._indptr
        idf = self._idf if within is None else within.idf
        given = term_weights if term_weights is not None else [1.0] * len(query)
        weighted = [
            (t, w)
            for word, w in zip(query, given, strict=True)
            if (t := self.vocab.get(word)) is not None and indptr[t + 1] > indptr[t]
        ]
        terms = [t for t, _w in weighted]
        scale = [w for _t, w in weighted]
        spans = [(t, int(indptr[t]), int(indptr[t + 1])) for t in terms]
        if not spans:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)

        def weights(t: int, start: int, end: int) -> FloatArray:
            if within is None:
                return self._weight[start:end]
            found = within.weights.get(t)
            if found is None:
                found = self._contribution(within.idf[t], self._tf[start:end], within.norm[self._slot[start:end]])
                if within.cached + len(found) <= SUBCORPUS_CACHE:
                    within.weights[t] = found
                    within.cached += len(found)
            return found

        if len(spans) == 1:  # one term: its postings are the answer, already in slot order
            t, start, end = spans[0]
            slots, scores = self._slot[start:end].astype(np.int64), weights(t, start, end) * scale[0]
            if allowed is not None:
                keep = allowed[slots]
                slots, scores = slots[keep], scores[keep]
            return slots, scores
        totals: FloatArray = np.zeros(len(self.doc_len))
        for (t, start, end), w in zip(spans, scale, strict=True):  # unbuffered adds, in C: a repeated term counts again
            contribution = weights(t, start, end)
            np.add.at(totals, self._slot[start:end], contribution if w == 1.0 else contribution * w)
        present = totals != 0
        for t, start, end in spans:
            if idf[t] == 0:  # a term with idf 0 still makes its documents candidates
                present[self._slot[start:end]] = True
        if allowed is not None:
            present &= allowed
        hits = np.flatnonzero(present).astype(np.int64, copy=False)
        return hits, totals[hits]
