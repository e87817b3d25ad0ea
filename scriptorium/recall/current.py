"""Current truth over stale: a newer statement ranks above the older one it replaces.

Two rules, applied to a search's ranked records (work bounded by the hits, never by the memory):

* **Explicit.** A record may say it supersedes another (``[supersedes](topic.md#^id)``:
  :func:`scriptorium.workspace.topics.supersedes_links`). When the older one is found, its successor
  (the newest visible record of the chain) is placed just above it, found or not, and the older one is
  marked ``superseded_by``.
* **Near-duplicates.** Two found records that say nearly the same thing (most of their terms shared) and
  carry different dates: the newer is placed above the older, whether or not either names the other. A
  command renamed, a flag changed, a decision restated: the current wording comes first.
* **The user said it again.** In a conversation between a user and an agent, two of the user's own turns
  among the first :data:`RESTATED_DEPTH` found that share :data:`RESTATED_TERMS` terms or more, the later
  scoring at least :data:`RESTATED_SHARE` of the earlier's: the later comes first. A user who returns to a
  subject changes their mind in other words ("make `session cd` run cd", then "rename session cd to dir"),
  too few shared for a near-duplicate; what they said last is what holds. Later means a later day, or on the
  same day later in the same conversation.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence

import numpy as np

from scriptorium.recall.records import Document
from scriptorium.recall.speakers import ROLES
from scriptorium.recall.state import IndexState, successor_slots
from scriptorium.recall.text import speaker_of, tokenize

NEAR_DUPLICATE = 0.7
"""The share of two records' distinct terms (Jaccard) above which they say the same thing."""
MIN_TERMS = 6
"""Records with fewer distinct terms are never taken for near-duplicates: a short turn of a conversation shares
its speakers' names and a word or two with the next ("How are the kids, Melanie?", "Melanie, my kids like pottery")."""
_SPEAKERS = re.compile(r"^(?:(?:User|Assistant|[A-Z][\w.' -]{0,40}):\s+){1,2}")
"""A turn's speaker labels ("User: Caroline: "), left out of what two records are compared on."""
RESTATED_TERMS = 3
"""Distinct terms two of the user's turns share (speaker labels left out) to be taken as one subject."""
RESTATED_SHARE = 0.5
"""How well the later of the two must match, as a share of the earlier's score. Tuned on the coding dev set
only (stale first of 9 changed questions; context recall): off 3, 0.581; share 0.5 with 2 terms 1, 0.570,
with 3 terms 1, 0.570; share 0.7 with 2 or 3 terms 2, 0.570."""
RESTATED_DEPTH = 10
"""Only the first this many found are compared (the pairs are bounded by the hits, never the memory)."""
MAX_CHAIN = 8
"""How far a chain of successors is followed (a cycle written by hand ends there)."""
RESTATED_FILTER = 4
"""How many of a record's rarest terms beyond those a near-duplicate may lack it must hold to be compared: more
read a few more (rare) postings and compare far fewer records. On a generated month of coding sessions
(benchmarks/year.py, 3,664 lookups in an import): 2 compared 116 records a lookup, 3.2 ms each; 4, 0.2 ms."""
RESTATED_POSTINGS = 4000
"""Postings :func:`near_duplicate_slots` reads for one record at most: a record whose rarest terms are all
common words (held by thousands of records each) is not looked up."""

Ranked = list[tuple[int, float, str]]
"""(slot, score, the memory ID of the record that supersedes it or "")."""


def newest_successor(state: IndexState, slot: int, visible: Callable[[int], bool]) -> int | None:
    """The end of ``slot``'s chain of visible successors (the newest by date, then the last written), or None."""
    successors = successor_slots(state)
    current, seen = None, {slot}
    doc = state.docs[slot]
    for _step in range(MAX_CHAIN):
        if doc is None:
            break
        candidates = [s for s in successors.get(doc.memory_id, ()) if s not in seen and visible(s)]
        if not candidates:
            break
        current = max(candidates, key=lambda s: (_date(state.docs[s]), s))
        seen.add(current)
        doc = state.docs[current]
    return current


def _date(doc: Document | None) -> str:
    return (doc.date or "") if doc is not None else ""


def current_first(state: IndexState, ranked: Sequence[tuple[int, float]], visible: Callable[[int], bool]) -> Ranked:
    """``ranked`` (slot, score), best first, with each superseded record's successor just above it and newer
    near-duplicates above older ones. The list may grow by the successors brought in: the caller cuts it."""
    successors = successor_slots(state)
    out: Ranked = []
    placed: dict[int, int] = {}
    for slot, score in ranked:
        doc = state.docs[slot]
        newer = newest_successor(state, slot, visible) if doc is not None and doc.memory_id in successors else None
        if newer is None:
            if slot not in placed:
                placed[slot] = len(out)
                out.append((slot, score, ""))
            continue
        if newer not in placed:
            placed[newer] = len(out)
            out.append((newer, score, ""))
        newer_doc = state.docs[newer]
        assert newer_doc is not None
        if slot in placed:  # brought in above its own predecessor earlier: mark it where it stands
            at = placed[slot]
            out[at] = (slot, out[at][1], newer_doc.memory_id)
        else:
            placed[slot] = len(out)
            out.append((slot, score, newer_doc.memory_id))
    return _newer_near_duplicates_first(state, out)


def _newer_near_duplicates_first(state: IndexState, ranked: Ranked) -> Ranked:
    terms: list[frozenset[str]] = []
    dates: list[str] = []
    for slot, _score, _by in ranked:
        doc = state.docs[slot]
        terms.append(comparison_terms(doc.text) if doc is not None else frozenset())
        dates.append(_date(doc))
    restated = _Restated(state, ranked, terms)

    def goes_first(later: int, earlier: int) -> bool:
        if _newer(dates[later], dates[earlier]) and _near(terms[earlier], terms[later]):
            return True
        return restated.again(later, earlier)

    order = list(range(len(ranked)))
    i = 0
    while i < len(order):
        # A newer near-duplicate further down takes this place and the older follows it; the date held at
        # place i only grows, so this ends.
        newer = next(
            (j for j in range(i + 1, len(order)) if goes_first(order[j], order[i])),
            None,
        )
        if newer is None:
            i += 1
        else:
            order.insert(i, order.pop(newer))
    return [ranked[k] for k in order]


def comparison_terms(text: str) -> frozenset[str]:
    """The distinct terms two records are compared on: their text's, speaker labels left out."""
    return frozenset(tokenize(_SPEAKERS.sub("", text, count=1)))


_comparison_terms = functools.lru_cache(maxsize=1 << 15)(comparison_terms)
""":func:`comparison_terms` of the records found as candidates (the same ones come up for the records of a
conversation, one lookup after the other)."""


def near_duplicate_slots(state: IndexState, terms: frozenset[str]) -> list[int]:
    """The live slots of the records that say nearly what a record of ``terms`` says (:func:`_near`).

    Found from postings, never by reading the memory: a record sharing :data:`NEAR_DUPLICATE` of the two
    records' terms holds all but ``miss`` of ``terms``, so it holds :data:`RESTATED_FILTER` or more of their
    ``miss + RESTATED_FILTER`` rarest (every one when there are fewer). Those terms' postings are counted
    (none read past :data:`RESTATED_POSTINGS`), and only the records holding enough of them are compared."""
    if len(terms) < MIN_TERMS:
        return []
    need = math.ceil(NEAR_DUPLICATE * len(terms) - 1e-9)  # shared terms at the least: |A ∩ B| ≥ share · |A|
    miss = len(terms) - need
    rarest = sorted((state.bm25.postings(term) for term in terms), key=len)[: miss + RESTATED_FILTER]
    read = sum(len(slots) for slots in rarest)
    if not read or read > RESTATED_POSTINGS:
        return []
    slots, counts = np.unique(np.concatenate(rarest), return_counts=True)
    found = []
    for slot in slots[counts >= len(rarest) - miss].tolist():
        doc = state.docs[slot]
        if doc is not None and _near(terms, _comparison_terms(doc.text)):
            found.append(slot)
    return found


def older_restatements(state: IndexState, text: str, date: str | None) -> list[int]:
    """The slots of the records that ``text``, said on ``date``, says again differently, newest first: its
    near-duplicates (:func:`near_duplicate_slots`) dated strictly earlier, said by the same speaker (a user's
    rule is not superseded by an agent's narration of it), whose terms are not all the same (a repeat word for
    word replaces nothing)."""
    if not date:
        return []
    terms = comparison_terms(text)
    speaker = speaker_of(text)
    found = []
    for slot in near_duplicate_slots(state, terms):
        doc = state.docs[slot]
        if (
            doc is not None
            and _newer(date, _date(doc))
            and doc.speaker == speaker
            and _comparison_terms(doc.text) != terms
        ):
            found.append(slot)
    return sorted(found, key=lambda slot: (_date(state.docs[slot]), slot), reverse=True)


def _newer(date: str, than: str) -> bool:
    """Whether ``date`` is strictly later than ``than`` (both dated, neither a prefix of the other: a month
    and a day in it are not ordered)."""
    return bool(date and than) and date > than and not date.startswith(than)


def _near(a: frozenset[str], b: frozenset[str]) -> bool:
    if len(a) < MIN_TERMS or len(b) < MIN_TERMS:
        return False
    return len(a & b) / len(a | b) >= NEAR_DUPLICATE


class _Restated:
    """Which of the first :data:`RESTATED_DEPTH` hits are the user's own turns, and when each was said."""

    def __init__(self, state: IndexState, ranked: Ranked, terms: Sequence[frozenset[str]]) -> None:
        self.ranked, self.terms = ranked, terms
        self.said: dict[int, tuple[str, str, int]] = {}
        """Hit index → (day, topic, place in its topic), for the user's turns among the first found."""
        places: dict[str, dict[int, int]] = {}
        for k, (slot, _score, _by) in enumerate(ranked[:RESTATED_DEPTH]):
            doc = state.docs[slot]
            if doc is None or doc.speaker != ROLES[0]:
                continue
            if doc.topic not in places:
                places[doc.topic] = {s: n for n, s in enumerate(state.topics.get(doc.topic, (None, []))[1])}
            self.said[k] = ((doc.date or "")[:10], doc.topic, places[doc.topic].get(slot, -1))

    def again(self, later: int, earlier: int) -> bool:
        """Whether hit ``later`` is the user saying again, later, what hit ``earlier`` said."""
        if later not in self.said or earlier not in self.said:
            return False
        if self.ranked[later][1] < RESTATED_SHARE * self.ranked[earlier][1]:
            return False
        if len(self.terms[later] & self.terms[earlier]) < RESTATED_TERMS:
            return False
        (day, topic, place), (then, then_topic, then_place) = self.said[later], self.said[earlier]
        if day and then and day != then:
            return day > then
        return topic == then_topic and place > then_place
