"""Okapi BM25 that changes one document at a time, with rank-bm25's exact scores.

``rank_bm25.BM25Okapi`` is built once over a whole corpus, and its
``get_scores`` walks every document in Python (≈140 ms at 100,000 records).
:class:`IncrementalBM25` keeps rank-bm25's state (``doc_freqs``, ``doc_len``,
``corpus_size``, ``avgdl``, ``idf``) and its idf with the epsilon floor
(``BM25Okapi._calc_idf``), adds a postings map, and lets documents come and go
in slots; a query scores only the documents sharing one of its terms, with
numpy over each term's postings. The tests check every score against
``BM25Okapi.get_scores`` on the same live corpus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
from rank_bm25 import BM25Okapi

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class IncrementalBM25(BM25Okapi):  # type: ignore[misc]
    """BM25Okapi over slots that can be filled and emptied; call :meth:`commit` after changes."""

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        # BM25.__init__ needs a non-empty corpus; set its attributes directly instead.
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.tokenizer = None
        self.corpus_size = 0
        self.avgdl = 0.0
        self.average_idf = 0.0
        self.doc_freqs: list[dict[str, int]] = []
        self.doc_len: list[int] = []
        self.idf: dict[str, float] = {}
        self.nd: dict[str, int] = {}
        self.postings: dict[str, dict[int, int]] = {}
        self.live = 0
        self.total_len = 0
        self._free: list[int] = []
        self._arrays: dict[str, tuple[IntArray, FloatArray]] = {}
        self._len_array: FloatArray | None = None
        self._dirty = False

    # -- changing documents ------------------------------------------------------

    def add(self, terms: Mapping[str, int]) -> int:
        """Add one document (term → frequency); returns its slot."""
        slot = self._free.pop() if self._free else len(self.doc_freqs)
        freqs = dict(terms)
        length = sum(freqs.values())
        if slot == len(self.doc_freqs):
            self.doc_freqs.append(freqs)
            self.doc_len.append(length)
        else:
            self.doc_freqs[slot] = freqs
            self.doc_len[slot] = length
        for word, freq in freqs.items():
            self.nd[word] = self.nd.get(word, 0) + 1
            self.postings.setdefault(word, {})[slot] = freq
            self._arrays.pop(word, None)
        self.live += 1
        self.total_len += length
        self._len_array = None
        self._dirty = True
        return slot

    def remove(self, slot: int) -> None:
        """Empty one slot (it is reused by a later :meth:`add`)."""
        freqs = self.doc_freqs[slot]
        for word in freqs:
            remaining = self.nd[word] - 1
            if remaining:
                self.nd[word] = remaining
                del self.postings[word][slot]
            else:
                del self.nd[word]
                del self.postings[word]
            self._arrays.pop(word, None)
        self.total_len -= self.doc_len[slot]
        self.doc_freqs[slot] = {}
        self.doc_len[slot] = 0
        self.live -= 1
        self._free.append(slot)
        self._len_array = None
        self._dirty = True

    def commit(self) -> None:
        """Recompute the corpus statistics and idf (rank-bm25's own ``_calc_idf``)."""
        if not self._dirty:
            return
        self.corpus_size = self.live
        self.avgdl = self.total_len / self.live if self.live else 0.0
        self.idf = {}
        if self.nd:
            self._calc_idf(self.nd)
        self._dirty = False

    # -- scoring -------------------------------------------------------------------

    def _postings(self, word: str) -> tuple[IntArray, FloatArray]:
        arrays = self._arrays.get(word)
        if arrays is None:
            posting = self.postings[word]
            slots = np.fromiter(posting.keys(), dtype=np.int64, count=len(posting))
            freqs = np.fromiter(posting.values(), dtype=np.float64, count=len(posting))
            arrays = (slots, freqs)
            self._arrays[word] = arrays
        return arrays

    def candidate_scores(self, query: Sequence[str]) -> tuple[IntArray, FloatArray]:
        """(slots, scores) of every document sharing a term with ``query``, rank-bm25's formula."""
        assert not self._dirty, "commit() after changing documents"
        words = [q for q in query if q in self.postings]
        if not words or not self.live:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        if self._len_array is None:
            self._len_array = np.asarray(self.doc_len, dtype=np.float64)
        lengths = self._len_array
        scores = np.zeros(len(self.doc_freqs), dtype=np.float64)
        seen = np.zeros(len(self.doc_freqs), dtype=bool)
        norm = self.k1 * (1 - self.b + self.b * lengths / self.avgdl) if len(words) > 3 else None
        for word in words:  # repeated query terms count again, as in rank-bm25
            slots, freqs = self._postings(word)
            local = norm[slots] if norm is not None else self.k1 * (1 - self.b + self.b * lengths[slots] / self.avgdl)
            scores[slots] += self.idf[word] * (freqs * (self.k1 + 1) / (freqs + local))
            seen[slots] = True
        hits = np.flatnonzero(seen)
        return hits, scores[hits]
