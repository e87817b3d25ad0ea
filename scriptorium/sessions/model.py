"""The conversation graph: sessions of nodes linked to their predecessors."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol


class NodeKind(StrEnum):
    """What a node is; only USER and ASSISTANT ever enter memory."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    SCHEDULED = "scheduled"
    """A runtime-scheduled turn: a subagent report, a branch-merge notice, a sidechain."""
    COMPACTION_SUMMARY = "compaction_summary"
    REWIND_MARKER = "rewind_marker"
    SYSTEM = "system"
    """Runtime notices: compaction boundaries, local commands, meta messages."""


CONTENT_KINDS = frozenset({NodeKind.USER, NodeKind.ASSISTANT})
MARKER_KEY = "scriptorium.written"
"""Node-metadata key of write markers: ``{workspace_id: revision}``, so an exported
session keeps its markers without being taken for another workspace's."""
REWOUND_KEY = "rewound"
"""Node-metadata flag a runtime sets on the turns of a rewound (abandoned) branch."""


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Node:
    """One message or event in a session graph."""

    id: str
    session_id: str
    parent_id: str | None
    role: str
    kind: NodeKind
    content: str
    created_at: datetime
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_content(self) -> bool:
        """True for non-empty user messages and assistant replies."""
        return self.kind in CONTENT_KINDS and bool(self.content.strip())

    def written_for(self, workspace_id: str) -> bool:
        markers = self.metadata.get(MARKER_KEY)
        return isinstance(markers, Mapping) and workspace_id in markers

    @property
    def rewound(self) -> bool:
        return bool(self.metadata.get(REWOUND_KEY))


@dataclass(frozen=True, slots=True)
class Session:
    """A session: its head and when it last changed."""

    id: str
    head: str | None
    created_at: datetime
    updated_at: datetime
    metadata: Mapping[str, Any] = field(default_factory=dict)


class SessionStore(Protocol):
    """Persistent, ordered session graphs with stable node IDs."""

    def create_session(
        self, session_id: str, metadata: Mapping[str, Any] | None = None, created_at: datetime | None = None
    ) -> Session: ...

    def get_session(self, session_id: str) -> Session | None: ...

    def list_sessions(self, updated_before: datetime | None = None) -> list[Session]: ...

    def add_nodes(self, nodes: Sequence[Node], head: str | None = None, updated_at: datetime | None = None) -> int:
        """Insert nodes (existing IDs are left untouched); optionally move the head. Returns inserted count."""
        ...

    def set_head(self, session_id: str, head: str, updated_at: datetime | None = None) -> None: ...

    def get_node(self, session_id: str, node_id: str) -> Node | None: ...

    def get_branch(self, session_id: str, head: str | None = None) -> list[Node]:
        """The branch ending at ``head`` (default: the session head), oldest first, rewound turns filtered."""
        ...

    def pending(self, session_id: str, head: str, workspace_id: str) -> list[Node]:
        """Unmarked nodes from ``head`` back to the first node marked for ``workspace_id``, oldest first."""
        ...

    def branch_tips(self, session_id: str) -> list[str]:
        """Leaf nodes (no children), oldest first."""
        ...

    def mark_written(self, session_id: str, node_ids: Iterable[str], workspace_id: str, revision: str) -> None:
        """Record write markers; never changes the session's ``updated_at``."""
        ...

    def close(self) -> None: ...


class BranchWalks:
    """``get_branch`` and ``pending`` for stores that implement one walk back from a head."""

    def get_session(self, session_id: str) -> Session | None:
        raise NotImplementedError

    def _walk(self, session_id: str, head: str, workspace_id: str | None) -> list[Node]:
        """Nodes from ``head`` back to the first marked for ``workspace_id`` (None: to the root), oldest first."""
        raise NotImplementedError

    def get_branch(self, session_id: str, head: str | None = None) -> list[Node]:
        if head is None:
            session = self.get_session(session_id)
            if session is None or session.head is None:
                return []
            head = session.head
        return self._walk(session_id, head, None)

    def pending(self, session_id: str, head: str, workspace_id: str) -> list[Node]:
        return self._walk(session_id, head, workspace_id)


def chunked(items: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
