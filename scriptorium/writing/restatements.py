"""Where the default organizer finds what a new record restates: :class:`Restatements`.

A record that says nearly what an installed one said on an earlier day (a command renamed, a flag changed, a
decision restated) supersedes it. The candidates come from the installed memory's recall index
(:meth:`scriptorium.recall.index.RecallIndex.restated`: the postings of the record's rarest terms, never a
read of every topic), and only those from the same place count: the same project, or no project for both
(a chat's records are the user's own). Another project's convention is not this one's stale version.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from scriptorium.recall.branches import BranchView
from scriptorium.recall.index import RecallIndex
from scriptorium.sessions import SessionStore

INDEX_AGE_S = 30.0
"""How far behind the installed files the index a pass looks in may be: the passes of a bulk import come
seconds apart, and each refresh folds what changed into every posting (its cost grows with the memory); what
a lookup misses in that window, the nightly organize, which looks at everything, links."""


class Restatements:
    """A :data:`~scriptorium.writer_interface.Restated` over the workspace installed at ``root``, with the
    places of ``store``'s sessions; ``within_s``: how far behind the installed files its index may be
    (:data:`INDEX_AGE_S`; the nightly organize gives 0)."""

    def __init__(self, root: Path, store: SessionStore, within_s: float = INDEX_AGE_S) -> None:
        self.index = RecallIndex.open(root)
        self.view = BranchView(store)
        self.within_s = within_s

    def __call__(self, text: str, date: str | None, sources: Collection[str]) -> list[tuple[str, str, tuple[str, ...]]]:
        found = self.index.restated(text, date, within_s=self.within_s)
        if not found:
            return []
        here = self.view.projects(sources)
        return [(doc.topic, doc.memory_id, doc.sources) for doc in found if self.view.projects(doc.sources) == here]
