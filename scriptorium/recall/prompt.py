"""The recall a runtime's per-prompt hook injects: search, leave out what the asking session holds, pack.

One function for every caller — the command hook, the hook daemon, ``POST /api/hooks`` and the recall
benchmark's ``recall_at_2000_chars`` — so what is measured is what a runtime receives.
"""

from __future__ import annotations

from scriptorium.audience import OWNER, Viewer
from scriptorium.recall.context import EXCERPT_CHARS, RECALL_BUDGET_CHARS, fresh_hits, pack_hits
from scriptorium.recall.index import RecallIndex, SearchMode
from scriptorium.recall.places import Place, PlaceLookup, TurnBranches, scoped
from scriptorium.recall.records import BranchLookup
from scriptorium.recall.text import snippet, tokenize

RECALL_DEPTH = 40
"""How many records the prompt's search asks for first: more than fit in the budget, since those the asking
session holds and repeats are left out; fewer than :data:`FRESH_WANTED` remaining, it searches four times as
deep, up to :data:`MAX_RECALL_DEPTH`."""
FRESH_WANTED = 20
"""Fresh hits enough to fill :data:`~scriptorium.recall.context.RECALL_BUDGET_CHARS` with excerpts."""
MAX_RECALL_DEPTH = 640


def prompt_recall(
    index: RecallIndex,
    prompt: str,
    *,
    session: str = "",
    mode: SearchMode = "bm25",
    branches: BranchLookup | None = None,
    viewer: Viewer = OWNER,
    budget: int = RECALL_BUDGET_CHARS,
    asking: Place | None = None,
    places: PlaceLookup | None = None,
    turn_branches: TurnBranches | None = None,
) -> str:
    """The prompt's recall as prompt text within ``budget`` characters ("" when nothing fits): trusted
    records ``viewer`` may see, best first, without those whose every source is a message of ``session``
    and repeats (:func:`~scriptorium.recall.context.fresh_hits`), each an excerpt around the prompt's
    words (:func:`~scriptorium.recall.context.pack_hits`). Asked at place ``asking`` (given the ``places``
    the sessions ran in), other projects' records come only when they match clearly better, and marked so
    (:func:`~scriptorium.recall.places.scoped`), and records said on a git branch that has not reached the
    asking work tree's are marked with it (given each turn's branch, ``turn_branches``)."""
    if not prompt.strip():
        return ""
    words = set(tokenize(prompt))
    depth = RECALL_DEPTH
    while True:  # the same question asked in many sessions must not crowd its answers out of the depth
        found = index.search(prompt, depth, mode=mode, branches=branches, viewer=viewer)
        hits = fresh_hits(found, session, prompt)
        if asking is not None and places is not None:
            hits = scoped(hits, asking, places, turn_branches)
        if len(hits) >= FRESH_WANTED or len(found) < depth or depth >= MAX_RECALL_DEPTH:
            break
        depth *= 4
    return pack_hits(hits, lambda text: snippet(text, words, EXCERPT_CHARS), budget)
