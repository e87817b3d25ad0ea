"""``POST /api/sessions/{id}/nodes``: a runtime appends its conversation graph to the session store.

Nodes carry their parent, kind and content; the session's head moves to
``head`` when given. Unknown fields are refused; IDs are path-safe names.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scriptorium.errors import InvalidArgument
from scriptorium.schemas.events import Name
from scriptorium.sessions import Node, NodeKind

MAX_NODES = 1000
MAX_CONTENT_CHARS = 200_000
MAX_BODY_BYTES = 8 * 1024 * 1024


class NodeIn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Name
    parent_id: Name | None = None
    kind: NodeKind
    role: Annotated[str, Field(min_length=1, max_length=40)] | None = None
    content: Annotated[str, Field(max_length=MAX_CONTENT_CHARS)] = ""
    created_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class NodesIn(BaseModel):
    """A batch of nodes of one session, oldest first, and where its head is now."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: Annotated[list[NodeIn], Field(min_length=1, max_length=MAX_NODES)]
    head: Name | None = None
    title: Annotated[str, Field(max_length=200)] | None = None
    provider: Name = "runtime"
    parent_session_id: Name | None = None
    """The session this one came from (kept from the session's first batch, like its provider)."""
    spawn: Literal["fork", "subagent"] = "fork"
    """``fork``: continued from the parent; ``subagent``: spawned by it."""
    audience: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")] | None = None
    """The requester the session belongs to (omitted: shared). Set by the session's first batch; a later
    batch may repeat it or leave it out, never change it."""

    def to_nodes(self, session_id: str) -> list[Node]:
        now = datetime.now(UTC)
        return [
            Node(
                n.id,
                session_id,
                n.parent_id,
                n.role or ("assistant" if n.kind is NodeKind.ASSISTANT else "user"),
                n.kind,
                n.content,
                n.created_at or now,
                dict(n.metadata),
            )
            for n in self.nodes
        ]


def parse_nodes(raw: bytes) -> NodesIn:
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidArgument(f"body is {len(raw)} bytes; the limit is {MAX_BODY_BYTES}")
    try:
        return NodesIn.model_validate_json(raw)
    except ValidationError as exc:
        raise InvalidArgument(f"invalid nodes: {exc.errors(include_url=False)[:5]}") from exc
