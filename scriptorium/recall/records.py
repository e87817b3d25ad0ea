"""What the recall index holds and returns: file signatures, indexed records, hits, refresh figures."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple

from scriptorium.audience import names
from scriptorium.sessions.model import Branch
from scriptorium.workspace.paths import CONVERSATIONS

Signature = tuple[int, int, int]
BranchLookup = Callable[[Sequence[Iterable[str]]], Sequence[Branch | None]]
"""Each record's branch status from its cited source paths (:class:`scriptorium.recall.branches.BranchView`)."""
Trust = Literal["trusted", "pending"]


def signature(path: Path | str) -> Signature | None:
    """(inode, size, mtime in ns), or None when the file is gone."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def source_thread(source: str) -> str:
    """The conversation an archived source belongs to: ``<thread>`` of ``sources/<provider>/<shard>/<thread>/…``
    (or of layout 1's ``sources/<provider>/<thread>/…``; "" for another path)."""
    parts = source.split("/")  # an archive path: relative, normalized (no Path: every citation comes here)
    if parts[0] != "sources":
        return ""
    return parts[3] if len(parts) == 5 else parts[2] if len(parts) == 4 else ""


class Document(NamedTuple):
    """What a hit shows of one record (a tuple: cheap to cache)."""

    memory_id: str
    topic: str
    headings: tuple[str, ...]
    date: str | None
    text: str
    sources: tuple[str, ...]
    speaker: str | None = None
    """Who speaks in the record (:func:`scriptorium.recall.speakers.speaker_of`), read once at parse time."""
    supersedes: tuple[str, ...] = ()
    """The records it says it supersedes (:func:`scriptorium.workspace.topics.supersedes_links`)."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result."""

    memory_id: str
    topic: str
    headings: tuple[str, ...]
    date: str | None
    snippet: str
    score: float
    trust: Trust
    branch: Branch | None = None
    """``current`` / ``alternative`` for a record from a forked conversation (by its sources' nodes), else None."""
    audience: str = ""
    """The requesters whose sources the record cites (:func:`scriptorium.audience.fold`; "" when shared)."""
    sources: tuple[str, ...] = ()
    """The archived sources it cites (``sources/<provider>/<thread>/<message>.md``)."""
    project: str = ""
    """For a prompt asked in a project, the name of the other project the record comes from ("" when it is
    the asking one's, or has no place: :mod:`scriptorium.recall.places`)."""
    on_branch: str = ""
    """For a prompt asked in a work tree, the git branch the record was said on when that branch has not
    reached the work tree's HEAD ("" otherwise)."""
    superseded_by: str = ""
    """The memory ID of a newer record that says it supersedes this one ("" when none does): recall ranks
    that one just above it (:func:`scriptorium.recall.current.current_first`)."""

    def only_from(self, thread: str) -> bool:
        """Whether every source the record cites is a message of conversation ``thread``."""
        threads = {source_thread(source) for source in self.sources}
        return bool(threads) and threads == {thread}

    @property
    def label(self) -> str:
        """How automatic context introduces the record: an alternative is the option not taken, another
        project's record names that project."""
        return "; ".join(
            filter(
                None,
                (
                    f"superseded by ^{self.superseded_by}" if self.superseded_by else "",
                    self.branch_label,
                    f"from project {self.project}" if self.project else "",
                ),
            )
        )

    @property
    def branch_label(self) -> str:
        """The label of the branch the record was said on: the option not taken, or a git branch that has not
        reached the asking work tree ("" for neither)."""
        labels = []
        if self.branch == "alternative":
            labels.append("option not taken (a branch the conversation left)")
        if self.on_branch:
            labels.append(f"on branch {self.on_branch}, not merged here")
        return "; ".join(labels)

    @property
    def place(self) -> str:
        """``topic › heading › …``: where the record sits."""
        return " › ".join((self.topic, *self.headings))

    @property
    def short_place(self) -> str:
        """Where the record sits, as the prompt's recall names it: a conversation's topic by its heading
        chain alone (the session's title; its path, a date and the same title as a slug, costs the recall's
        budget as much as a record's excerpt and says nothing more), any other topic by :attr:`place`."""
        if self.headings and self.topic.startswith(f"{CONVERSATIONS}/"):
            return " › ".join(self.headings)
        return self.place

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "topic": self.topic,
            "headings": list(self.headings),
            "date": self.date,
            "snippet": self.snippet,
            "score": round(self.score, 6),
            "trust": self.trust,
            "branch": self.branch,
            "audience": names(self.audience) or None,
            "superseded_by": self.superseded_by or None,
        }


CONTEXT_CHARS = 200
"""How much of the record before it a record's vector encodes (:func:`embedding_texts`). On the dev
conversations, hybrid recall@10 / @5: no context 0.803 / 0.724, 120 characters 0.811 / 0.741, 200 0.812 /
0.743, 400 0.808; the record after it as well (200 each side) 0.808."""


def embedding_text(doc: Document) -> str:
    """A record's own part of what its vector encodes: its headings and its prose."""
    return " › ".join((*doc.headings, doc.text)) if doc.headings else doc.text


def embedding_texts(docs: Sequence[Document]) -> list[str]:
    """What the vectors of one topic's records (in the topic's order) encode: each record's own text after
    the last :data:`CONTEXT_CHARS` of the record before it (contextual chunk embedding). A turn such as "Yes,
    she loved it!" means what the turn before it asked; its vector alone cannot find it. The context is
    taken from the neighbour's prose, so a forget that removes a record changes its follower's text too."""
    texts: list[str] = []
    before = ""
    for doc in docs:
        own = embedding_text(doc)
        texts.append(f"{before[-CONTEXT_CHARS:]} | {own}" if before else own)
        before = doc.text
    return texts


@dataclass(slots=True)
class RefreshStats:
    """What one refresh did (tests and the benchmark read it)."""

    checked: bool = False
    topics_parsed: int = 0
    topics_removed: int = 0
    records_indexed: int = 0
    sources_read: int = 0
    trust_changed: int = 0
