"""Import OpenClaw sessions from its per-agent database (``~/.openclaw/agents/<agent>/agent/openclaw-agent.sqlite``).

OpenClaw keeps no transcript files: each session's transcript is the rows of the database's
``transcript_events`` table (``session_id``, ``seq``, the event as JSON text in ``event_json`` or, over a
KiB, zstd-compressed in ``event_zstd``). The events are pi's session entries (OpenClaw runs pi's agent core;
version 4: a ``session`` header, then entries with ``id`` and ``parentId``), so :mod:`scriptorium.producers.pi`
reads them; OpenClaw's own ``reset`` entries are not nodes.

One database holds every session of one agent. Each session's import cursor is kept as for a file (in the
session's metadata, under the database's path): its ``offset`` is the next ``seq`` to read and its
``tail_sha`` the hash of the last row read, so a transcript OpenClaw rewrote (a rewind, a repair) is read
again from its start, as a rewritten file is. The database is opened read-only; OpenClaw's writes (WAL)
go on meanwhile.

An import for a caller of the HTTP hook route never reads a database: the route's confinement pins the
files it opens, and SQLite opens its own (the WAL beside it), so these come through local hooks and
``scriptorium ingest`` only.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from scriptorium.errors import Forbidden
from scriptorium.producers.importing import DATABASE_NAMES, Cursor, ImportedSession, Increment
from scriptorium.producers.opening import confinement_active
from scriptorium.producers.pi import parse_increment
from scriptorium.sessions import SessionStore

FORMAT = "openclaw"
PROVIDER = "openclaw"
(DATABASE_NAME,) = DATABASE_NAMES
NOT_NODES = frozenset({"reset"})
"""OpenClaw's own entry types beyond pi's that carry no conversation (a ``reset`` starts a new window)."""


def is_database(path: Path) -> bool:
    """Whether ``path`` is an OpenClaw agent database (by its name: the file OpenClaw itself names so)."""
    return path.name == DATABASE_NAME and path.is_file()


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """``path`` opened read-only (FORBIDDEN inside an HTTP import's confinement: see the module's note)."""
    if confinement_active():
        raise Forbidden(f"an OpenClaw database is imported by local hooks only, not over HTTP: {path}")
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=5.0)) as connection:
        yield connection


def _decoded(event_json: str | None, event_zstd: bytes | None) -> bytes:
    if event_json is not None:
        return event_json.encode()
    if event_zstd is None:
        return b""
    import zstandard

    return zstandard.ZstdDecompressor().decompressobj().decompress(event_zstd)


def session_ends(connection: sqlite3.Connection) -> dict[str, int]:
    """Each session's next ``seq`` (its last row's, plus one)."""
    rows = connection.execute("SELECT session_id, MAX(seq) FROM transcript_events GROUP BY session_id")
    return {str(session): int(last) + 1 for session, last in rows}


def _row_sha(connection: sqlite3.Connection, session_id: str, seq: int) -> str | None:
    row = connection.execute(
        "SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? AND seq = ?", (session_id, seq)
    ).fetchone()
    return hashlib.sha256(_decoded(*row)).hexdigest() if row else None


def read_increment(connection: sqlite3.Connection, path: Path, session_id: str, cursor: Cursor | None) -> Increment:
    """The events ``session_id`` gained since ``cursor`` (all of them without one, or when the rows before
    it changed), as numbered lines for pi's parser; the cursor after them."""
    info = os.stat(path)
    start, state, restarted = 0, {}, False
    if cursor is not None:
        if cursor.offset > 0 and _row_sha(connection, session_id, cursor.offset - 1) == cursor.tail_sha:
            start, state = cursor.offset, dict(cursor.state)
        else:
            restarted = True
    rows = connection.execute(
        "SELECT seq, event_json, event_zstd FROM transcript_events WHERE session_id = ? AND seq >= ? ORDER BY seq",
        (session_id, start),
    ).fetchall()
    lines = [(int(seq) + 1, _decoded(text, packed)) for seq, text, packed in rows]
    end = int(rows[-1][0]) + 1 if rows else start
    tail = hashlib.sha256(lines[-1][1]).hexdigest() if lines else (cursor.tail_sha if cursor and not restarted else "")
    return Increment(lines, state, restarted, Cursor(info.st_dev, info.st_ino, end, end, tail, {}), path)


def read(increment: Increment, store: SessionStore | None) -> tuple[list[ImportedSession], dict[str, Any]]:
    """The session nodes in the events a session gained (pi's parser, OpenClaw as the provider)."""
    return parse_increment(increment, provider=PROVIDER, not_nodes=NOT_NODES)
