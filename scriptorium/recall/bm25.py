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
  a new process reads the index, it does not rebuild it.

The tests check every score against ``BM25Okapi.get_scores`` on the same live corpus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_I32 = npt.NDArray[np.int32]
_EMPTY_I32: _I32 = np.empty(0, dtype=np.int32)


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
        """Statistics, idf (rank-bm25's ``_calc_idf``, vectorised) and every posting's contribution."""
        counts = np.bincount(self._term, minlength=len(self.vocab))
        self._indptr = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)))
        self.corpus_size = self.live
        self.avgdl = self.total_len / self.live if self.live else 0.0
        present = counts > 0
        idf = np.zeros(len(counts), dtype=np.float64)
        if present.any():
            freq = counts[present].astype(np.float64)
            values = np.log(self.corpus_size - freq + 0.5) - np.log(freq + 0.5)
            self.average_idf = float(values.sum() / len(values))
            idf[present] = np.where(values < 0, self.epsilon * self.average_idf, values)
        self._idf = idf
        if not len(self._term):
            self._weight = np.empty(0)
            return
        tf = self._tf.astype(np.float64)
        lengths = np.asarray(self.doc_len, dtype=np.float64)[self._slot]
        # rank-bm25's get_scores, per (term, document): idf × tf (k1 + 1) / (tf + k1 (1 − b + b |d| / avgdl)).
        norm = self.k1 * (1 - self.b + self.b * lengths / self.avgdl)
        self._weight = idf[self._term] * (tf * (self.k1 + 1) / (tf + norm))

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
        self, query: Sequence[str], allowed: npt.NDArray[np.bool_] | None = None
    ) -> tuple[IntArray, FloatArray]:
        """(slots, scores) of every document sharing a term with ``query``, rank-bm25's formula.

        Slots come sorted; ``allowed`` (a mask over slots) keeps only the documents it marks.
        A repeated query term counts again, as in rank-bm25.
        """
        assert not self._dirty, "commit() after changing documents"
        indptr = self._indptr
        terms = [t for word in query if (t := self.vocab.get(word)) is not None and indptr[t + 1] > indptr[t]]
        spans = [(int(indptr[t]), int(indptr[t + 1])) for t in terms]
        if not spans:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        if len(spans) == 1:  # one term: its postings are the answer, already in slot order
            start, end = spans[0]
            slots, scores = self._slot[start:end].astype(np.int64), self._weight[start:end].copy()
            if allowed is not None:
                keep = allowed[slots]
                slots, scores = slots[keep], scores[keep]
            return slots, scores
        totals: FloatArray = np.zeros(len(self.doc_len))
        for start, end in spans:  # unbuffered adds, in C: a repeated query term counts again
            np.add.at(totals, self._slot[start:end], self._weight[start:end])
        present = totals != 0
        for t in terms:
            if self._idf[t] == 0:  # a term with idf 0 still makes its documents candidates
                present[self._slot[self._indptr[t] : self._indptr[t + 1]]] = True
        if allowed is not None:
            present &= allowed
        hits = np.flatnonzero(present).astype(np.int64, copy=False)
        return hits, totals[hits]
