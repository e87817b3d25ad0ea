"""Select a pass's batch: pending content from the oldest, cut at a token budget."""

from __future__ import annotations

from collections.abc import Sequence

from scriptorium.sessions import Node
from scriptorium.tokencount import count_tokens
from scriptorium.workspace.sources import SourceMessage
from scriptorium.writer_interface import Batch, BatchMessage


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
    folder: str | None = None,
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
    return Batch(session_id, title, tuple(taken), tuple(span), name=name, folder=folder)
