"""What the write pass hands a writer or an organizer, and what they promise: the batch, the staged topics,
the repair hint, and the :class:`Writer` and :class:`Organizer` interfaces.

One neutral home, below both sides: ``scriptorium.writers`` implements these and ``scriptorium.writing`` calls
them, and neither imports the other (``composition`` wires a writer into the pass). ``recall.branches``
(a batch's :class:`BranchContext`) and ``changes.structured`` (the :class:`TopicFiles` a change edits) read
them too. The layers are declared in ``pyproject.toml`` (``[tool.importlinter]``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from scriptorium.errors import ScriptoriumError
from scriptorium.sessions import Node
from scriptorium.workspace.sources import SourceMessage


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One user message or assistant reply of a batch, with the source it is archived as."""

    node: Node
    source: SourceMessage
    tokens: int

    @property
    def source_ref(self) -> str:
        """``provider/thread/message``: what a writer cites."""
        return self.source.identity


@dataclass(frozen=True, slots=True)
class BranchContext:
    """Where a batch stands when its conversation forked: its branch's status and what the branches beside
    it said (already archived, so a writer may cite them: "FastAPI, chosen over Flask")."""

    status: str
    """``current`` (the branch the conversation is on) or ``alternative`` (one it left)."""
    fork: str
    """The node the branches part at."""
    siblings: tuple[tuple[str, str], ...]
    """(source_ref, text) of the other branches' first messages, oldest first."""


@dataclass(frozen=True, slots=True)
class Batch:
    """The content one pass writes, and every node it covers (marked after a successful install)."""

    session_id: str
    title: str
    messages: tuple[BatchMessage, ...]
    span: tuple[str, ...]
    branch: BranchContext | None = None
    """Set when the batch is on one of several branches of its conversation."""
    name: str | None = None
    """What names the conversation's topic files (None: the title). A title taken from the conversation names
    none (``Session.topic_name``)."""
    folder: str | None = None
    """The folder the session ran in (its ``cwd``) when the runtime recorded one: a coding agent's session,
    whose user speaks to the agent about the work there (None: a chat, or an import without one)."""

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.messages)


class TopicFiles(Protocol):
    """The staged ``topics/`` tree a writer edits (never the live workspace)."""

    def list_topics(self) -> list[str]: ...

    def read(self, path: str) -> str: ...

    def exists(self, path: str) -> bool: ...

    def write(self, path: str, text: str) -> None: ...

    def delete(self, path: str) -> None: ...

    def move(self, src: str, dst: str) -> None: ...


@dataclass(frozen=True, slots=True)
class Repair:
    """Why the previous attempt was rejected, for the one repair attempt."""

    reason: str
    message: str
    guidance: str
    rejected_text: str

    @classmethod
    def from_error(cls, error: ScriptoriumError) -> Repair:
        return cls(str(error.reason), error.message, error.guidance, error.rejected_text)


@dataclass(slots=True)
class Usage:
    """What a writer that costs money spent, as it counts it: the runs of its model (a tool-calling
    conversation, a headless agent run) and the tokens the model reported (none where it reports none).

    Cumulative over the writer's life, and shared by a writer and its organizer; the pass charges the day's
    budget what grew while it ran (:mod:`scriptorium.writing.budget`). A writer without one (the verbatim
    writer) costs nothing and is never charged or capped.
    """

    runs: int = 0
    tokens: int = 0


class Writer(Protocol):
    """Edits staged topics so they record a batch, citing its sources.

    A writer that works in the staging folder itself (a process editing real
    files, rather than the topic API) sets ``works_in_staging = True``; the pass
    then materializes every topic and stages read-only copies of the batch's
    sources, and is handed the :class:`~scriptorium.workspace.staging.Staging`.

    A writer that costs money has a ``usage`` (:class:`Usage`) that it counts its runs and tokens in.
    """

    name: str

    def write(self, batch: Batch, topics: TopicFiles, repair: Repair | None = None) -> None:
        """Raise WriterUnavailable (retryable) or WriterFailed when the writer cannot do its job."""
        ...


MayCombine = Callable[[Iterable[str]], bool]
"""Whether the cited sources (archive paths) may stand in one record (not: sibling branches of a conversation)."""
Restated = Callable[[str, str | None, Collection[str]], Sequence[tuple[str, str, tuple[str, ...]]]]
"""(a record's prose, its date, the sources it cites) → the installed records it says again, later and
differently, from the same place, newest first: (topic, memory ID, the sources it cites) each
(:class:`scriptorium.writing.restatements.Restatements`)."""


class Organizer(Protocol):
    """Rearranges staged topics (no new content). A restricted phase: it never sees sources.

    ``may_combine`` says which records it may merge into one; whatever it produces is checked
    against the same rule afterwards (``BRANCHES_MERGED``), so an organizer that cannot take the
    hint (a model) is refused, not trusted.

    ``changed``: the topics that changed since the last organize (None: unknown, or the nightly organize:
    every topic). An organizer may look at the others too; one that looks only at these (and at the
    core) costs what changed, not what is stored.

    ``restated``: where a record's older near-duplicates are found (from the installed memory's index), for
    an organizer that links a newer statement to the one it supersedes by rule (the offline one). A model's
    organizer ignores it: with a model, the writer sets those links as it writes, as its prompt asks
    (``writers/prompts/writer.md``).
    """

    name: str

    def organize(
        self,
        topics: TopicFiles,
        may_combine: MayCombine | None = None,
        changed: Collection[str] | None = None,
        restated: Restated | None = None,
    ) -> None: ...
