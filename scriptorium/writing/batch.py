"""Select a pass's batch: pending content from the oldest, cut at a token budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scriptorium.sessions import Node
from scriptorium.tokencount import count_tokens
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

    @property
    def tokens(self) -> int:
        return sum(m.tokens for m in self.messages)


def to_message(
    node: Node, provider: str, trust: str, origin: tuple[str, str] | None = None, audience: str | None = None
) -> BatchMessage:
    source = SourceMessage(
        provider=provider,
        thread=node.session_id,
        message=node.id,
        role=node.role,
        time=node.created_at.isoformat(),
        text=node.content,
        trust="pending" if trust == "pending" else "trusted",
        origin=origin,
        audience=audience,
    )
    return BatchMessage(node, source, count_tokens(node.content))


def cut_batch(
    session_id: str,
    title: str,
    pending: Sequence[Node],
    messages: Sequence[BatchMessage],
    budget: int,
    name: str | None = None,
) -> Batch:
    """Take messages from the oldest until the next would pass ``budget`` (at least one).

    The span covers every pending node up to the last message taken, tool calls
    and runtime turns in between included, so markers stay a prefix.
    """
    taken: list[BatchMessage] = []
    used = 0
    for message in messages:
        if taken and used + message.tokens > budget:
            break
        taken.append(message)
        used += message.tokens
    last = taken[-1].node.id
    span: list[str] = []
    for node in pending:
        span.append(node.id)
        if node.id == last:
            break
    return Batch(session_id, title, tuple(taken), tuple(span), name=name)
