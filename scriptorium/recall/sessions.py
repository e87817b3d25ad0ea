"""The session stage: records of the conversation that matches the question best rank higher together.

A topic holds one conversation (the verbatim writer) or one subject (a model's): when several of its
records match a question, the question is most likely about that conversation, and its records that match
only weakly — the reply that names none of the question's words, the turn two after — are the evidence a
direct ranking of records leaves below the cut. So each candidate gets :data:`TOPIC_WEIGHT` × its topic's
score: the mean of the :data:`TOPIC_DOCS` best candidate scores in that topic (a topic with one lucky
match scores a third of what three good ones do). Fused with the direct ranking by adding, over the
candidates only (the lenders and their neighbours): no array the size of the corpus per query.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

TOPIC_WEIGHT = 0.0
"""What a candidate gets of its topic's score (0: no session stage). Tuned on the dev conversations only
(recall@5 / @10, no feedback): off 0.629 / 0.739; 0.05 0.632 / 0.742; 0.1 0.628 / 0.749; 0.3
0.625 / 0.746; 1.0 0.623 / 0.745."""
TOPIC_DOCS = 3
"""How many of a topic's best candidates its score averages."""


def topic_stage(
    slots: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], topics: Sequence[str], weight: float
) -> npt.NDArray[np.float64]:
    """``scores`` with each candidate's share of its topic's score added (``topics``: each slot's topic)."""
    by_topic: dict[str, list[float]] = defaultdict(list)
    for topic, score in zip(topics, scores.tolist(), strict=True):
        by_topic[topic].append(score)
    topic_score = {
        topic: sum(sorted(values, reverse=True)[:TOPIC_DOCS]) / TOPIC_DOCS for topic, values in by_topic.items()
    }
    lift = np.fromiter((topic_score[topic] for topic in topics), dtype=np.float64, count=len(topics))
    return scores + weight * lift
