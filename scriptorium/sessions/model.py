"""The conversation graph: sessions of nodes linked to their predecessors."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal, Protocol


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
PARENT_KEY = "parent_session"
"""Session-metadata key naming the session this one came from (a fork of it, or a subagent it spawned)."""
SPAWN_KEY = "spawn"
"""How it came from there: ``fork`` (continued from the parent: Codex ``forked_from_id``, pi's parent
session, a runtime's fork) or ``subagent`` (spawned by the parent to do part of its work)."""
AUDIENCE_KEY = "audience"
"""Session-metadata key naming the requester the session belongs to (absent: shared). Set when the session is
created and never changed after: its archived sources carry it, and a later change would split them."""
WORKSPACE_KEY = "workspace"
"""Session-metadata key naming the workspace the session is written into (absent: ``default``). Set when the
session is created — by the importer the hooks run, or the nodes route — so the idle sweep writes each session
into the memory its hooks publish for."""
FORGOTTEN_KEY = "forgotten"
"""Node-metadata key of an erased node's tombstone (``at``, ``by``, ``why``); its content is empty."""
TITLE_FROM_KEY = "title_from"
"""Session-metadata key naming the user message an untitled session's title was taken from (the importer's,
:func:`scriptorium.titles.derived_title`). It stays once set, so a title is derived once: after that message
is forgotten the session keeps no title rather than take the next message's words."""
REWOUND_KEY = "rewound"
"""Node-metadata flag a runtime sets on the turns of a rewound (abandoned) branch."""


Branch = Literal["current", "alternative"]
"""Where a node stands among a session's branches: on the head's path below a fork, or on a branch left."""


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

    @property
    def title(self) -> str:
        """The runtime's title for the session, or the one taken from its first user message, else its whole
        ID: what topic headings and batches show. Never a prefix of the ID (UUIDv7s of one minute share their
        first 8)."""
        title = self.metadata.get("title")
        return str(title) if title else f"Session {self.id}"

    @property
    def topic_name(self) -> str:
        """What names the session's topic files: the runtime's title, else the whole ID. A title taken from the
        conversation names no file: a forget of its message rewrites headings, and a path in git history it
        could not."""
        return f"Session {self.id}" if self.metadata.get(TITLE_FROM_KEY) else self.title


class SessionStore(Protocol):
    """Persistent, ordered session graphs with stable node IDs."""

    def create_session(
        self, session_id: str, metadata: Mapping[str, Any] | None = None, created_at: datetime | None = None
    ) -> Session: ...

    def get_session(self, session_id: str) -> Session | None: ...

    def list_sessions(self, updated_before: datetime | None = None) -> list[Session]: ...

    def sessions_under(self, folder: str) -> dict[str, str]:
        """The sessions whose working folder (metadata ``cwd``) is ``folder`` or inside it, each ID with that
        folder: a project's, asked for by every session's opening. The store picks them (one indexed range),
        not its caller from every session; nothing else of a session is read."""
        ...

    def children_of(self, session_id: str) -> list[Session]:
        """The sessions that came straight from ``session_id`` (forks, subagents: :func:`spawned_from`), by ID;
        an indexed lookup, whatever the number of sessions."""
        ...

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

    def unmark_written_except(self, workspace_id: str, revisions: Collection[str]) -> list[str]:
        """Drop ``workspace_id``'s markers that name a revision not in ``revisions`` (a workspace restored from
        a replica that lacks the installs they name: their turns are written again). Returns the sessions
        touched; never changes a session's ``updated_at``."""
        ...

    def node_parents(self, session_id: str) -> dict[str, str | None]:
        """Every node of the session and its predecessor (the graph's shape, without content)."""
        ...

    def content_node_ids(self, session_id: str) -> set[str]:
        """The session's nodes that would enter memory: non-empty user messages and assistant replies."""
        ...

    def node_count(self, session_id: str) -> int:
        """How many nodes the session has (a cheap check that its graph did not grow)."""
        ...

    def forget(self, session_id: str, node_ids: Iterable[str] | None, tombstone: Mapping[str, str]) -> int:
        """Erase the text of ``node_ids`` (None: every node of the session, and its title): each keeps its ID,
        parent, kind and write markers and gains ``forgotten`` (the tombstone) in its metadata, so importing
        the same transcript again adds nothing and no pass writes it again. The old text must leave the
        store's files (:meth:`compact`). Returns the nodes erased."""
        ...

    def rewrite(self, session_id: str, text: Callable[[str], str], dry_run: bool = False) -> int:
        """Apply ``text`` to every string the session holds — each node's content and metadata, the session's
        own metadata (its title) — in one transaction; IDs, parents, kinds and write markers stay (a secret
        stored before redaction: ``scriptorium memory redact``). Returns the rows changed (nodes, and the
        session's own); ``dry_run``: only counts them. The old strings must leave the files (:meth:`compact`)."""
        ...

    def compact(self) -> bool:
        """Make erased text leave the storage files (SQLite: VACUUM and a truncated WAL; PostgreSQL: VACUUM
        FULL of the store's tables). False when it could not finish now (a reader held the file)."""
        ...

    def close(self) -> None: ...


def left_behind(parents: Mapping[str, str | None], before: str | None, after: str | None) -> str | None:
    """``before`` when a head that moved from it to ``after`` left its branch (``before`` is not on the path
    to ``after``: a rewind, a re-ask, a jump to another branch), else None (it moved on, or did not move)."""
    if before is None or after is None or before == after or before not in parents:
        return None
    step: str | None = after
    seen: set[str] = set()
    while step is not None and step in parents and step not in seen:
        if step == before:
            return None
        seen.add(step)
        step = parents[step]
    return before


def spawned_from(session: Session) -> tuple[str, str] | None:
    """(parent session ID, ``fork`` or ``subagent``) for a session that came from another, else None."""
    parent = session.metadata.get(PARENT_KEY)
    if not isinstance(parent, str) or not parent:
        return None
    kind = session.metadata.get(SPAWN_KEY)
    return parent, kind if kind in ("fork", "subagent") else "fork"


def audience_of(session: Session) -> str | None:
    """The requester a session belongs to, or None when it is shared."""
    value = session.metadata.get(AUDIENCE_KEY)
    return value if isinstance(value, str) and value else None


def workspace_of(session: Session) -> str:
    """The workspace a session is written into (``default`` when none was recorded)."""
    value = session.metadata.get(WORKSPACE_KEY)
    return value if isinstance(value, str) and value else "default"


def origin_of(session: Session) -> tuple[str, str] | None:
    """How a record names where its session came from: (``spawned_by`` | ``continued_from``, parent)."""
    came = spawned_from(session)
    if came is None:
        return None
    return ("spawned_by" if came[1] == "subagent" else "continued_from"), came[0]


def branch_positions(
    parents: Mapping[str, str | None], head: str | None, content: Set[str] | None = None
) -> dict[str, Branch]:
    """The branch status of every node below a fork: ``current`` on the path to ``head``, else ``alternative``.

    A node no fork lies above (the shared prefix, or a session that never forked) is left out: it is
    on every branch, so on none in particular. The status follows the head: move it to a left branch
    and the two swap. A parent that is not in ``parents`` counts as a root. With ``content`` (the nodes
    that enter memory), only children leading to content make a fork: a compaction summary, a progress
    entry or an empty retry hanging off the conversation is not an alternative to it.
    """
    children: dict[str | None, list[str]] = {}
    for child, parent in parents.items():
        children.setdefault(parent if parent in parents else None, []).append(child)
    if content is not None:
        children = _with_content(children, content)
    on_head: set[str] = set()
    step = head
    while step is not None and step in parents and step not in on_head:
        on_head.add(step)
        step = parents[step]
    out: dict[str, Branch] = {}
    # Top-down from the roots: a node is below a fork when its parent has several children or is itself.
    stack: list[tuple[str, bool]] = [(root, False) for root in children.get(None, [])]
    while stack:
        node, below = stack.pop()
        if below:
            out[node] = "current" if node in on_head else "alternative"
        kids = children.get(node, [])
        stack.extend((kid, below or len(kids) > 1) for kid in kids)
    return out


def _with_content(children: dict[str | None, list[str]], content: Set[str]) -> dict[str | None, list[str]]:
    """``children`` without the subtrees that hold no content node."""
    holds: dict[str, bool] = {}
    order: list[str] = []
    stack = list(children.get(None, []))
    while stack:  # every node, parents before children
        node = stack.pop()
        order.append(node)
        stack.extend(children.get(node, []))
    for node in reversed(order):  # children before parents
        holds[node] = node in content or any(holds[kid] for kid in children.get(node, []))
    return {parent: [kid for kid in kids if holds.get(kid, False)] for parent, kids in children.items()}


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


def map_strings(value: Any, text: Callable[[str], str]) -> Any:
    """``value`` (a JSON value) with ``text`` applied to every string in it, the keys of objects too."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, list):
        return [map_strings(item, text) for item in value]
    if isinstance(value, dict):
        return {text(k) if isinstance(k, str) else k: map_strings(v, text) for k, v in value.items()}
    return value


def folder_range(folder: str) -> tuple[str, str, str]:
    """``folder`` (without a trailing slash) and the names inside it as a range a sorted index answers: from
    ``<folder>/`` (inclusive) to ``<folder>0`` (exclusive; ``0`` is the byte after ``/``), in byte order."""
    stem = folder.rstrip("/")
    return stem or "/", f"{stem}/", f"{stem}0"


def chunked(items: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
