"""The lexical ranking: BM25's candidates, then each stage that moves them, in order.

1. BM25 over the records the viewer may see, a named speaker's name weighted down
   (:mod:`scriptorium.recall.speakers`);
2. pseudo-relevance feedback, off by default (:mod:`scriptorium.recall.feedback`);
3. the time a question names (:mod:`scriptorium.recall.when`);
4. neighbour lending (:mod:`scriptorium.recall.neighbours`);
5. the speaker the question names (:mod:`scriptorium.recall.speakers`);
6. the user's own words, in a conversation with an agent (:mod:`scriptorium.recall.speakers`);
7. the session stage, off by default (:mod:`scriptorium.recall.sessions`);

then the first ``limit`` by score, ties by memory ID. Each stage's setting is an attribute (0 turns it
off); what a stage derives from the index state (dates, neighbours, speakers) is built at its first use and
dropped with the state (:meth:`LexicalRanking.drop`). Called under the index's lock.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from scriptorium.recall.bm25 import Subcorpus
from scriptorium.recall.feedback import FEEDBACK_DOCS, FEEDBACK_TERMS, FEEDBACK_WEIGHT, expansion
from scriptorium.recall.neighbours import LENDERS, NEIGHBOUR_WEIGHT, best, lend_to_neighbours, neighbour_slots
from scriptorium.recall.sessions import TOPIC_WEIGHT, topic_stage
from scriptorium.recall.speakers import NAME_WEIGHT, SPEAKER_BOOST, USER_BOOST, Speakers
from scriptorium.recall.state import IndexState
from scriptorium.recall.text import tokenize_many
from scriptorium.recall.when import TIME_BOOST, RecordDates, time_expressions

Ranked = list[tuple[int, float]]
"""(slot, score), best first."""


def top(slots: npt.NDArray[np.int64], scores: npt.NDArray[Any], limit: int, state: IndexState) -> Ranked:
    """The first ``limit`` of ``slots`` by (-score, memory ID), ties at the cut included."""
    docs = state.docs

    def memory_id(slot: int) -> str:
        doc = docs[slot]
        assert doc is not None
        return doc.memory_id

    if len(slots) > limit:
        cut = np.partition(scores, len(scores) - limit)[len(scores) - limit]
        above = np.flatnonzero(scores > cut)
        level = sorted(np.flatnonzero(scores == cut).tolist(), key=lambda i: memory_id(int(slots[i])))
        chosen = np.concatenate((above, np.asarray(level[: limit - len(above)], dtype=np.int64)))
        slots, scores = slots[chosen], scores[chosen]
    return sorted(zip(slots.tolist(), scores.tolist(), strict=True), key=lambda item: (-item[1], memory_id(item[0])))


class LexicalRanking:
    """The stages' settings, and what they derived from one index state."""

    def __init__(self) -> None:
        self.time_boost = TIME_BOOST
        self.neighbour_weight = NEIGHBOUR_WEIGHT
        self.feedback_weight = FEEDBACK_WEIGHT
        self.feedback_terms = FEEDBACK_TERMS
        self.topic_weight = TOPIC_WEIGHT
        self.speaker_boost = SPEAKER_BOOST
        self.name_weight = NAME_WEIGHT
        self.user_boost = USER_BOOST
        self._dates: RecordDates | None = None
        self._neighbours: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None
        self._speakers: Speakers | None = None

    def drop(self) -> None:
        """The records changed: what was derived from them goes."""
        self._dates = None
        self._neighbours = None
        self._speakers = None

    def rank(
        self,
        state: IndexState,
        query: str,
        words: list[str],
        limit: int,
        allowed: npt.NDArray[np.bool_] | None,
        within: Subcorpus | None,
    ) -> Ranked:
        """The ``limit`` best records for ``query`` (``words``: its terms) among ``allowed``, scored with
        ``within``'s statistics (None: the whole index's)."""
        named, weights = np.zeros(0, dtype=np.int64), None
        if self.speaker_boost:
            speakers = self._speakers_of(state)
            named = speakers.named(words)
            weights = speakers.weights(words, self.name_weight) if len(named) else None
        slots, scores = state.bm25.candidate_scores(words, allowed, within, weights)
        if self.feedback_weight and len(slots):
            slots, scores = self._with_feedback(state, words, weights, slots, scores, allowed, within)
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
        if len(named) and len(slots):
            scores = self._speakers_of(state).boost(slots, scores, named, self.speaker_boost)
        if self.user_boost and len(slots):
            scores = self._speakers_of(state).boost_user(slots, scores, self.user_boost)
        if self.topic_weight and len(slots):
            topics = [doc.topic if (doc := state.docs[slot]) is not None else "" for slot in slots.tolist()]
            scores = topic_stage(slots, scores, topics, self.topic_weight)
        return top(slots, scores, limit, state)

    def _speakers_of(self, state: IndexState) -> Speakers:
        if self._speakers is None:
            self._speakers = Speakers([doc.speaker if doc is not None else None for doc in state.docs])
        return self._speakers

    def _with_feedback(
        self,
        state: IndexState,
        words: list[str],
        weights: list[float] | None,
        slots: npt.NDArray[np.int64],
        scores: npt.NDArray[np.float64],
        allowed: npt.NDArray[np.bool_] | None,
        within: Subcorpus | None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The query again, with the words its best first matches share (:mod:`scriptorium.recall.feedback`)."""
        first = best(scores, FEEDBACK_DOCS) if len(slots) > FEEDBACK_DOCS else np.arange(len(slots))
        docs = [state.docs[int(slot)] for slot in slots[first]]
        texts = tokenize_many([doc.text if doc is not None else "" for doc in docs])
        feedback = list(zip(texts, scores[first].tolist(), strict=True))
        added = expansion(
            feedback, set(words), lambda term: state.bm25.idf(term, within), self.feedback_terms, self.feedback_weight
        )
        if not added:
            return slots, scores
        query = [*words, *(term for term, _w in added)]
        expanded = [*(weights or [1.0] * len(words)), *(w for _t, w in added)]
        return state.bm25.candidate_scores(query, allowed, within, expanded)

    def _with_neighbours(
        self, state: IndexState, slots: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], lenders: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        if self._neighbours is None:
            orders = (topic_slots for _sig, topic_slots in state.topics.values())
            self._neighbours = neighbour_slots(orders, len(state.docs))
        before, after = self._neighbours
        return lend_to_neighbours(slots, scores, before, after, self.neighbour_weight, lenders)
