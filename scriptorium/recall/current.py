"""Current truth over stale: a newer statement ranks above the older one it replaces.

Two rules, applied to a search's ranked records (work bounded by the hits, never by the memory):

* **Explicit.** A record may say it supersedes another (``[supersedes](topic.md#^id)``:
  :func:`scriptorium.workspace.topics.supersedes_links`). When the older one is found, its successor
  (the newest visible record of the chain) is placed just above it, found or not, and the older one is
  marked ``superseded_by``.
* **Near-duplicates.** Two found records that say nearly the same thing (most of their terms shared) and
  carry different dates: the newer is placed above the older, whether or not either names the other. A
  command renamed, a flag changed, a decision restated: the current wording comes first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from scriptorium.recall.records import Document
from scriptorium.recall.state import IndexState, successor_slots
from scriptorium.recall.text import tokenize

NEAR_DUPLICATE = 0.7
"""The share of two records' distinct terms (Jaccard) above which they say the same thing."""
MIN_TERMS = 6
"""Records with fewer distinct terms are never taken for near-duplicates: a short turn of a conversation shares
its speakers' names and a word or two with the next ("How are the kids, Melanie?", "Melanie, my kids like pottery")."""
_SPEAKERS = re.compile(r"^(?:(?:User|Assistant|[A-Z][\w.' -]{0,40}):\s+){1,2}")
"""A turn's speaker labels ("User: Caroline: "), left out of what two records are compared on."""
MAX_CHAIN = 8
"""How far a chain of successors is followed (a cycle written by hand ends there)."""

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
        terms.append(frozenset(tokenize(_SPEAKERS.sub("", doc.text, count=1))) if doc is not None else frozenset())
        dates.append(_date(doc))
    order = list(range(len(ranked)))
    i = 0
    while i < len(order):
        # A newer near-duplicate further down takes this place and the older follows it; the date held at
        # place i only grows, so this ends.
        newer = next(
            (
                j
                for j in range(i + 1, len(order))
                if _newer(dates[order[j]], dates[order[i]]) and _near(terms[order[i]], terms[order[j]])
            ),
            None,
        )
        if newer is None:
            i += 1
        else:
            order.insert(i, order.pop(newer))
    return [ranked[k] for k in order]


def _newer(date: str, than: str) -> bool:
    """Whether ``date`` is strictly later than ``than`` (both dated, neither a prefix of the other: a month
    and a day in it are not ordered)."""
    return bool(date and than) and date > than and not date.startswith(than)


def _near(a: frozenset[str], b: frozenset[str]) -> bool:
    if len(a) < MIN_TERMS or len(b) < MIN_TERMS:
        return False
    return len(a & b) / len(a | b) >= NEAR_DUPLICATE
