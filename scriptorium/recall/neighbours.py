"""Context from a record's neighbours: a reply that answers only with the message before it still ranks.

Each record is lent ``NEIGHBOUR_WEIGHT`` × the BM25 score of the records just
before and after it in its topic, and ``SECOND_SHARE`` of that from the records
two away, from among the ``LENDERS`` best matches (at least 10 × the limit):
an answer often sits a turn or two from the words of the question. Only scored (allowed) records lend; at weight 0 the
scores are rank-bm25's. The work is over the candidates, never an array the
size of the corpus per query.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

NEIGHBOUR_WEIGHT = 0.5
"""How much of a neighbouring record's BM25 score a record gets (tuned on the dev conversations only)."""
SECOND_SHARE = 0.7
"""What a record two away lends, as a share of a direct neighbour's (dev, when tuned: 0, 0.3, 0.5, 0.7,
1.0 gave recall@10 0.703, 0.715, 0.726, 0.734, 0.742 and recall@5 0.589, 0.604, 0.627, 0.627, 0.612; that
run broke score ties at the lenders' cut as the partition happened to, and with ties in a defined order
the default gives 0.739 / 0.629)."""
LENDERS = 50
"""How many of the best BM25 records lend to their neighbours (at least 10 × the limit)."""


def neighbour_slots(topics: Iterable[list[int]], size: int) -> tuple[IntArray, IntArray]:
    """For every slot, the slot of the record just before and just after it in its topic (-1: none).

    ``topics`` are each topic's slots in record order.
    """
    before = np.full(size, -1, dtype=np.int64)
    after = np.full(size, -1, dtype=np.int64)
    for topic_slots in topics:
        if len(topic_slots) > 1:
            ordered = np.asarray(topic_slots, dtype=np.int64)
            before[ordered[1:]] = ordered[:-1]
            after[ordered[:-1]] = ordered[1:]
    return before, after


SAMPLE_STRIDE = 8
""":func:`best` first reads every ``SAMPLE_STRIDE``-th score of a long array (see there)."""


def best(scores: FloatArray, count: int) -> IntArray:
    """Positions of the ``count`` highest scores (``count`` < len), ties at the cut going to the earliest
    positions: the same records lend whatever the partition algorithm does with equal scores.

    A long array is first cut down without losing any of them: the ``count``-th highest of every
    ``SAMPLE_STRIDE``-th score is at most the ``count``-th highest of all, so every score at or above it
    is kept (at least ``count`` of them, in their order), and only those are partitioned. A query of
    common words makes most of a large corpus candidates; this reads them once instead of partitioning
    them all.
    """
    if len(scores) >= 4 * SAMPLE_STRIDE * count:
        sample = scores[::SAMPLE_STRIDE]
        floor = np.partition(sample, len(sample) - count)[len(sample) - count]
        kept = np.flatnonzero(scores >= floor)
        return kept[_best_of_all(scores[kept], count)] if len(kept) > count else kept
    return _best_of_all(scores, count)


def _best_of_all(scores: FloatArray, count: int) -> IntArray:
    cut = np.partition(scores, len(scores) - count)[len(scores) - count]
    above = np.flatnonzero(scores > cut)
    level = np.flatnonzero(scores == cut)[: count - len(above)]
    return np.concatenate((above, level))


def lend_to_neighbours(
    slots: IntArray, scores: FloatArray, before: IntArray, after: IntArray, weight: float, lenders: int
) -> tuple[IntArray, FloatArray]:
    """The best records by BM25 plus their neighbours, each with its BM25 score and what it was lent.

    ``slots`` are sorted (``candidate_scores`` returns them so).
    """
    if len(slots) > lenders:
        top = best(scores, lenders)
        lender_slots, lender_scores = slots[top], scores[top]
    else:
        lender_slots, lender_scores = slots, scores
    lent = weight * lender_scores
    near_before, near_after = before[lender_slots], after[lender_slots]
    far_before = np.where(near_before >= 0, before[np.maximum(near_before, 0)], -1)
    far_after = np.where(near_after >= 0, after[np.maximum(near_after, 0)], -1)
    takers, gifts = [], []
    far = lent * SECOND_SHARE
    for side, share in ((near_before, lent), (near_after, lent), (far_before, far), (far_after, far)):
        has = (side >= 0) & (share > 0)
        takers.append(side[has])
        gifts.append(share[has])
    candidates, where = np.unique(np.concatenate([lender_slots, *takers]), return_inverse=True)
    extra = np.bincount(where[len(lender_slots) :], weights=np.concatenate(gifts), minlength=len(candidates))
    position = np.minimum(np.searchsorted(slots, candidates), len(slots) - 1)
    base = np.where(slots[position] == candidates, scores[position], 0.0)
    return candidates, (base + extra).astype(np.float64, copy=False)
