"""SQLite session store: the embedded default (WAL, one file)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from scriptorium.errors import SchemaTooNew
from scriptorium.sessions.model import (
    FORGOTTEN_KEY,
    MARKER_KEY,
    PARENT_KEY,
    REWOUND_KEY,
    TITLE_FROM_KEY,
    BranchWalks,
    Node,
    NodeKind,
    Session,
    chunked,
    folder_range,
    map_strings,
    utcnow,
)

_PARENT = f"json_extract(metadata, '$.{PARENT_KEY}')"
"""The session a session came from, as SQL: the expression its index is on (a query must say it the same)."""

_CWD = "json_extract(metadata, '$.cwd')"
"""The folder a session ran in, as SQL: the expression its index is on (a query must say it the same)."""

SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    head TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS nodes (
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    parent_id TEXT,
    role TEXT NOT NULL,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (session_id, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes (session_id, parent_id);
CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated_at);
"""
"""The tables of version 1. Releases before versioning created exactly these and left ``user_version`` at 0,
so step 0 → 1 (``IF NOT EXISTS``) both creates a new store and adopts such a store as it stands."""


def _create_v1(db: sqlite3.Connection) -> None:
    for statement in SCHEMA_V1.split(";"):  # one by one: executescript would commit the open transaction
        if statement.strip():
            db.execute(statement)


def _index_parents(db: sqlite3.Connection) -> None:
    """Version 2: sessions by the session they came from (a fork's, a subagent's parent), so that a write
    pass finds a session's children with one indexed lookup instead of reading every session."""
    db.execute(f"CREATE INDEX IF NOT EXISTS sessions_by_parent ON sessions ({_PARENT})")


def _index_folders(db: sqlite3.Connection) -> None:
    """Version 3: sessions by the folder they ran in, so that a session's opening reads its project's sessions
    (:meth:`SQLiteSessionStore.sessions_under`, a range of this index) instead of every session stored."""
    db.execute(f"CREATE INDEX IF NOT EXISTS sessions_by_cwd ON sessions ({_CWD})")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_create_v1, _index_parents, _index_folders)
"""Step ``n`` takes a store from version ``n`` to ``n + 1``, inside the transaction that records the new
version (``PRAGMA user_version``): a step that fails leaves the store at the version it had. A change to the
tables is a new step appended here, never an edit of an old one."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code reads and writes."""

MAX_DEPTH = 10_000_000
_NODE_COLUMNS = "n.id, n.session_id, n.parent_id, n.role, n.kind, n.content, n.created_at, n.metadata"


def _ts(value: datetime) -> str:
    return value.isoformat()


def _node(row: Sequence[Any]) -> Node:
    return Node(
        id=row[0],
        session_id=row[1],
        parent_id=row[2],
        role=row[3],
        kind=NodeKind(row[4]),
        content=row[5],
        created_at=datetime.fromisoformat(row[6]),
        metadata=json.loads(row[7]),
    )


def _session(row: Sequence[Any]) -> Session:
    return Session(
        id=row[0],
        head=row[1],
        created_at=datetime.fromisoformat(row[2]),
        updated_at=datetime.fromisoformat(row[3]),
        metadata=json.loads(row[4]),
    )


def _marker_path(workspace_id: str) -> str:
    if not workspace_id.replace("-", "").isalnum():
        raise ValueError(f"workspace id {workspace_id!r} must be alphanumeric")
    return f'$."{MARKER_KEY}"."{workspace_id}"'


class SQLiteSessionStore(BranchWalks):
    """Session graphs in one SQLite file, in WAL mode."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Transcripts: the file is the user's alone before SQLite opens it (its WAL and shared-memory files
        # take the database file's mode), whatever the umask of the process that creates it. Only a new
        # file is opened here: closing a descriptor of a database this process already has open would drop
        # every lock SQLite holds on it (POSIX locks are the process's), and another process would then
        # take itself for the last one and delete the WAL under this one's connections.
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        if path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            try:
                self._migrate(path)
            except BaseException:
                self._db.close()
                raise

    def close(self) -> None:
        self._db.close()

    def _migrate(self, path: Path) -> None:
        """Bring the store to :data:`SCHEMA_VERSION`, or refuse one a newer release made."""
        if self._version(path) < SCHEMA_VERSION:  # else nothing to do: opening takes no write lock
            with self._immediate():  # one process migrates; the others then find it done
                for step in MIGRATIONS[self._version(path) :]:
                    step(self._db)
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _version(self, path: Path) -> int:
        """The store's schema version (0: new, or made before versioning); refused when newer than this code."""
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"the session store {path} has schema version {version}; this release reads up to {SCHEMA_VERSION}",
                guidance="a newer Scriptorium wrote it: upgrade to open it",
                path=str(path),
            )
        return version

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[None]:
        """One write transaction, taken at once (BEGIN IMMEDIATE: no upgrade deadlock between writers),
        committed when the block ends and rolled back when it raises. The caller holds ``self._lock``."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # -- sessions ----------------------------------------------------------------

    def create_session(
        self, session_id: str, metadata: Mapping[str, Any] | None = None, created_at: datetime | None = None
    ) -> Session:
        now = _ts(created_at or utcnow())
        with self._lock:
            self._db.execute(
                "INSERT INTO sessions (id, head, created_at, updated_at, metadata) VALUES (?, NULL, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET metadata = json_patch(sessions.metadata, excluded.metadata)",
                (session_id, now, now, json.dumps(dict(metadata or {}))),
            )
        session = self.get_session(session_id)
        assert session is not None
        return session

    def get_session(self, session_id: str) -> Session | None:
        rows = self._query(
            "SELECT id, head, created_at, updated_at, metadata FROM sessions WHERE id = ?", (session_id,)
        )
        return _session(rows[0]) if rows else None

    def list_sessions(self, updated_before: datetime | None = None) -> list[Session]:
        sql = "SELECT id, head, created_at, updated_at, metadata FROM sessions"
        params: tuple[Any, ...] = ()
        if updated_before is not None:
            sql += " WHERE updated_at < ?"
            params = (_ts(updated_before),)
        return [_session(row) for row in self._query(sql + " ORDER BY updated_at", params)]

    def sessions_under(self, folder: str) -> dict[str, str]:
        folder, inside, past = folder_range(folder)
        sql = f"SELECT id, {_CWD} FROM sessions WHERE {_CWD} = ? OR ({_CWD} >= ? AND {_CWD} < ?)"
        return dict(self._query(sql, (folder, inside, past)))

    def children_of(self, session_id: str) -> list[Session]:
        sql = f"SELECT id, head, created_at, updated_at, metadata FROM sessions WHERE {_PARENT} = ? ORDER BY id"
        return [_session(row) for row in self._query(sql, (session_id,))]

    def set_head(self, session_id: str, head: str, updated_at: datetime | None = None) -> None:
        with self._lock:
            self._db.execute(
                "UPDATE sessions SET head = ?, updated_at = ? WHERE id = ?",
                (head, _ts(updated_at or utcnow()), session_id),
            )

    # -- nodes -------------------------------------------------------------------

    def add_nodes(self, nodes: Sequence[Node], head: str | None = None, updated_at: datetime | None = None) -> int:
        rows = [
            (
                n.session_id,
                n.id,
                n.parent_id,
                n.role,
                str(n.kind),
                n.content,
                _ts(n.created_at),
                json.dumps(dict(n.metadata)),
            )
            for n in nodes
        ]
        with self._lock, self._immediate():
            before = self._db.total_changes
            self._db.executemany(
                "INSERT INTO nodes (session_id, id, parent_id, role, kind, content, created_at, metadata) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, id) DO NOTHING",
                rows,
            )
            inserted = self._db.total_changes - before
            if head is not None and nodes:
                self._db.execute(
                    "UPDATE sessions SET head = ?, updated_at = ? WHERE id = ?",
                    (head, _ts(updated_at or utcnow()), nodes[0].session_id),
                )
        return inserted

    def get_node(self, session_id: str, node_id: str) -> Node | None:
        rows = self._query(
            f"SELECT {_NODE_COLUMNS} FROM nodes n WHERE n.session_id = ? AND n.id = ?", (session_id, node_id)
        )
        return _node(rows[0]) if rows else None

    def _walk(self, session_id: str, head: str, workspace_id: str | None) -> list[Node]:
        stop_marker = _marker_path(workspace_id) if workspace_id else None
        marked = "json_extract(n.metadata, :marker) IS NOT NULL" if stop_marker else "0"
        sql = f"""
            WITH RECURSIVE chain(id, parent_id, depth, marked) AS (
                SELECT n.id, n.parent_id, 0, {marked} FROM nodes n WHERE n.session_id = :s AND n.id = :head
                UNION ALL
                SELECT n.id, n.parent_id, c.depth + 1, {marked}
                FROM chain c JOIN nodes n ON n.session_id = :s AND n.id = c.parent_id
                WHERE c.marked = 0 AND c.depth < {MAX_DEPTH}
            )
            SELECT {_NODE_COLUMNS} FROM chain c JOIN nodes n ON n.session_id = :s AND n.id = c.id
            WHERE c.marked = 0 ORDER BY c.depth DESC
        """
        params = {"s": session_id, "head": head, "marker": stop_marker}
        return [node for node in map(_node, self._query(sql, params)) if not node.rewound]

    def branch_tips(self, session_id: str) -> list[str]:
        rows = self._query(
            "SELECT n.id FROM nodes n WHERE n.session_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM nodes c WHERE c.session_id = n.session_id AND c.parent_id = n.id) "
            f"AND json_extract(n.metadata, '$.{REWOUND_KEY}') IS NOT 1 ORDER BY n.created_at, n.id",
            (session_id,),
        )
        return [row[0] for row in rows]

    def node_parents(self, session_id: str) -> dict[str, str | None]:
        return dict(self._query("SELECT id, parent_id FROM nodes WHERE session_id = ?", (session_id,)))

    def node_count(self, session_id: str) -> int:
        return int(self._query("SELECT COUNT(*) FROM nodes WHERE session_id = ?", (session_id,))[0][0])

    def content_node_ids(self, session_id: str) -> set[str]:
        sql = (
            "SELECT id FROM nodes WHERE session_id = ? AND kind IN ('user', 'assistant') "
            "AND trim(content, ' ' || char(9, 10, 11, 12, 13)) <> ''"
        )
        return {row[0] for row in self._query(sql, (session_id,))}

    def forget(self, session_id: str, node_ids: Iterable[str] | None, tombstone: Mapping[str, str]) -> int:
        stone = json.dumps(dict(tombstone))
        with self._lock:
            # Freed space is overwritten with zeros from here on (then VACUUM rewrites the file: compact()).
            self._db.execute("PRAGMA secure_delete = ON")
            with self._immediate():
                before = self._db.total_changes
                update = f"UPDATE nodes SET content = '', metadata = json_set(metadata, '$.{FORGOTTEN_KEY}', json(?))"
                if node_ids is None:
                    self._db.execute(f"{update} WHERE session_id = ?", (stone, session_id))
                    nodes_changed = self._db.total_changes
                    self._db.execute(
                        f"UPDATE sessions SET metadata = json_set(json_remove(metadata, '$.title'), "
                        f"'$.{FORGOTTEN_KEY}', json(?)) WHERE id = ?",
                        (stone, session_id),
                    )
                else:
                    for chunk in chunked(list(node_ids)):
                        marks = ",".join("?" * len(chunk))
                        self._db.execute(
                            f"{update} WHERE session_id = ? AND id IN ({marks})", (stone, session_id, *chunk)
                        )
                        # A title taken from a forgotten message goes with it (its marker stays: none is derived
                        # again).
                        self._db.execute(
                            f"UPDATE sessions SET metadata = json_remove(metadata, '$.title') WHERE id = ? "
                            f"AND json_extract(metadata, '$.{TITLE_FROM_KEY}') IN ({marks})",
                            (session_id, *chunk),
                        )
                erased = (nodes_changed if node_ids is None else self._db.total_changes) - before
        return erased

    def rewrite(self, session_id: str, text: Callable[[str], str], dry_run: bool = False) -> int:
        with self._lock:
            nodes = self._db.execute(
                "SELECT id, content, metadata FROM nodes WHERE session_id = ?", (session_id,)
            ).fetchall()
            sessions = self._db.execute("SELECT metadata FROM sessions WHERE id = ?", (session_id,)).fetchall()
            node_rows = []
            for node_id, content, raw in nodes:
                metadata = json.loads(raw)
                new_content, new_metadata = text(content), map_strings(metadata, text)
                if (new_content, new_metadata) != (content, metadata):
                    node_rows.append((new_content, json.dumps(new_metadata), session_id, node_id))
            session_rows = []
            for (raw,) in sessions:
                metadata = json.loads(raw)
                if (new_metadata := map_strings(metadata, text)) != metadata:
                    session_rows.append((json.dumps(new_metadata), session_id))
            changed = len(node_rows) + len(session_rows)
            if dry_run or not changed:
                return changed
            self._db.execute("PRAGMA secure_delete = ON")  # as forget: freed pages are zeroed, then VACUUM
            with self._immediate():
                self._db.executemany(
                    "UPDATE nodes SET content = ?, metadata = ? WHERE session_id = ? AND id = ?", node_rows
                )
                self._db.executemany("UPDATE sessions SET metadata = ? WHERE id = ?", session_rows)
        return changed

    def compact(self) -> bool:
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.execute("VACUUM")  # a new file: no page of the old one, free or not, survives
            busy, _log, _done = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return not busy

    def unmark_written_except(self, workspace_id: str, revisions: Collection[str]) -> list[str]:
        path = _marker_path(workspace_id)
        kept = json.dumps(sorted(revisions))
        where = (
            "json_extract(metadata, ?) IS NOT NULL "
            "AND json_extract(metadata, ?) NOT IN (SELECT value FROM json_each(?))"
        )
        with self._lock, self._immediate():
            touched = [
                str(row[0])
                for row in self._db.execute(
                    f"SELECT DISTINCT session_id FROM nodes WHERE {where} ORDER BY session_id", (path, path, kept)
                )
            ]
            self._db.execute(
                f"UPDATE nodes SET metadata = json_remove(metadata, ?) WHERE {where}", (path, path, path, kept)
            )
        return touched

    def mark_written(self, session_id: str, node_ids: Iterable[str], workspace_id: str, revision: str) -> None:
        path = _marker_path(workspace_id)
        ids = list(node_ids)
        with self._lock, self._immediate():
            for chunk in chunked(ids):
                marks = ",".join("?" * len(chunk))
                # json_set creates the marker object when missing; sessions.updated_at is untouched.
                self._db.execute(
                    f"UPDATE nodes SET metadata = json_set(metadata, ?, ?) WHERE session_id = ? AND id IN ({marks})",
                    (path, revision, session_id, *chunk),
                )
