"""Session storage: conversation graphs, node write markers, branch walking."""

from __future__ import annotations

from pathlib import Path

from scriptorium.errors import InvalidArgument
from scriptorium.sessions.model import (
    AUDIENCE_KEY,
    CONTENT_KINDS,
    FORGOTTEN_KEY,
    MARKER_KEY,
    PARENT_KEY,
    REWOUND_KEY,
    SPAWN_KEY,
    TITLE_FROM_KEY,
    WORKSPACE_KEY,
    Branch,
    Node,
    NodeKind,
    Session,
    SessionStore,
    audience_of,
    branch_positions,
    left_behind,
    origin_of,
    spawned_from,
    workspace_of,
)

__all__ = [
    "AUDIENCE_KEY",
    "CONTENT_KINDS",
    "FORGOTTEN_KEY",
    "MARKER_KEY",
    "PARENT_KEY",
    "REWOUND_KEY",
    "SPAWN_KEY",
    "TITLE_FROM_KEY",
    "WORKSPACE_KEY",
    "Branch",
    "Node",
    "NodeKind",
    "Session",
    "SessionStore",
    "audience_of",
    "branch_positions",
    "left_behind",
    "open_store",
    "origin_of",
    "spawned_from",
    "workspace_of",
]


def open_store(url: str, table_prefix: str = "scriptorium_") -> SessionStore:
    """Open a store by URL: ``sqlite:///path/to/sessions.db`` or ``postgresql://…``."""
    if url.startswith("sqlite:///"):
        from scriptorium.sessions.sqlite import SQLiteSessionStore

        return SQLiteSessionStore(Path(url.removeprefix("sqlite:///")))
    if url.startswith(("postgresql://", "postgres://")):
        from scriptorium.sessions.postgres import PostgresSessionStore

        return PostgresSessionStore(url, table_prefix=table_prefix)
    raise InvalidArgument(f"unsupported session store URL {url!r}: use sqlite:///PATH or postgresql://…")
