"""Who speaks in a record: a question that names a speaker wants what that speaker said.

"What do Melanie's kids like?" is answered by a turn where Melanie speaks about her kids, and she does
not name herself there ("They love the dinosaur exhibit!"); the turns that do hold her name are the other
speaker's, talking to her ("How are the kids, Melanie?"). So a name the question shares with a record's
speaker is a condition on who speaks, not a word to match:

- a record's speaker is the label the verbatim writer opens it with — its role (``User:``,
  ``Assistant:``) — or the name label after that, one to three capitalised words, as a transcript of
  several people writes each turn (``User: Melanie: …``);
- a record whose speaker the question names scores (1 + :data:`SPEAKER_BOOST`) times as much;
- a speaker's name counts only :data:`NAME_WEIGHT` as a query word: the boost carries it, and a record
  that merely addresses the speaker by name no longer outranks what the speaker said.

In a conversation between a user and an agent, the user's own turns score more whatever the question
(:data:`USER_BOOST`). A question that names no speaker is otherwise scored as before. Records a model
wrote, without the role label, have no speaker and are never boosted. A record's speaker is read when its
topic is parsed and kept with it in the index's disk cache (a cold start reads no text for it); the
speakers' table is built at the first query after a change, and per query the work is over the candidates
only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from scriptorium.recall.text import ROLES, speaker_of, tokenize

__all__ = ["NAME_WEIGHT", "ROLES", "SPEAKER_BOOST", "USER_BOOST", "Speakers", "speaker_of"]

SPEAKER_BOOST = 1.0
"""How much more a record spoken by a speaker the question names scores. Tuned on the dev conversations
only, name weight 0.1 (recall@5 / @10, categories 1-4): off 0.635 / 0.740; 0.3 0.690 / 0.785; 0.6 0.693 /
0.783; 1.0 0.708 / 0.792; 2.0 0.708 / 0.784. Adversarial questions (category 5, not in the headline), which
name the wrong speaker on purpose, pay for it: 0.90 @10 off, 0.77 at 1.0."""
NAME_WEIGHT = 0.1
"""What a speaker's name counts as a query word (dev, boost 1.0, @10: 1.0 0.779; 0.5 0.780; 0.1 0.792;
0.05 0.792; 0 0.788). Not 0: a question of a name alone still ranks the records that hold it."""

USER_BOOST = 1.0
"""How much more a turn the user said scores than the agent's, in a conversation between a user and an agent:
a record the verbatim writer opens with the bare ``User:`` role label (a transcript of named people labels
each turn with its speaker's name and has no such record, so it is scored as before). Working with an agent,
the user states the decisions, conventions, preferences and corrections in a few words of their own; the
agent's long turns narrate the work around them and share the question's words by volume. Tuned on the
coding dev set only (recall@10 / context recall): off 0.291 / 0.337; 0.5 0.523 / 0.581; 1.0 0.570 / 0.581;
2.0 0.581 / 0.581. LoCoMo dev (named people) unchanged: 0.792 @10."""


class Speakers:
    """Every slot's speaker, as an index into the speakers' names (-1: none)."""

    def __init__(self, speakers: Sequence[str | None]) -> None:
        """``speakers``: each slot's (:func:`speaker_of` its text, which the index reads at parse time)."""
        ids: dict[str, int] = {}
        self.of = np.fromiter(
            (-1 if speaker is None else ids.setdefault(speaker, len(ids)) for speaker in speakers),
            dtype=np.int64,
            count=len(speakers),
        )
        self.user = ids.get(ROLES[0], -2)
        """The bare user role's index (-2: no record has it): a conversation between a user and an agent."""
        self.names = [frozenset(tokenize(name)) for name in ids]
        """Each speaker's name as search terms ("Matt Patterson": matt, patterson)."""
        self.terms = frozenset().union(*self.names)

    def named(self, words: Sequence[str]) -> npt.NDArray[np.int64]:
        """The speakers ``words`` (a query's terms) name: one of their name's terms is among them."""
        asked = set(words) & self.terms
        return np.asarray([i for i, name in enumerate(self.names) if name & asked], dtype=np.int64)

    def weights(self, words: Sequence[str], weight: float) -> list[float] | None:
        """Per query term: ``weight`` for a speaker's name, 1 for the rest (None: the query names none)."""
        if not self.terms.intersection(words):
            return None
        return [weight if word in self.terms else 1.0 for word in words]

    def boost(
        self,
        slots: npt.NDArray[np.int64],
        scores: npt.NDArray[np.float64],
        speakers: npt.NDArray[np.int64],
        boost: float,
    ) -> npt.NDArray[np.float64]:
        """``scores`` with the records of ``speakers`` (:meth:`named`) raised by ``boost`` × their size: scaled
        by 1 + ``boost``, and a negative score (a tiny corpus's BM25, where a word in most records has a
        negative idf) raised as much, never lowered."""
        if not len(speakers):
            return scores
        return np.where(np.isin(self.of[slots], speakers), scores + np.abs(scores) * boost, scores)

    def boost_user(
        self, slots: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], boost: float
    ) -> npt.NDArray[np.float64]:
        """``scores`` with the turns the user said (:data:`USER_BOOST`) raised as :meth:`boost` raises them."""
        return np.where(self.of[slots] == self.user, scores + np.abs(scores) * boost, scores)
