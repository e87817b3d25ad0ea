"""PostgreSQL session store (psycopg 3): the cluster's shared session storage."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

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

SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS {p}sessions (
    id TEXT PRIMARY KEY,
    head TEXT,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{{}}'
);
CREATE TABLE IF NOT EXISTS {p}nodes (
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    parent_id TEXT,
    role TEXT NOT NULL,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{{}}',
    PRIMARY KEY (session_id, id)
);
CREATE INDEX IF NOT EXISTS {p}nodes_by_parent ON {p}nodes (session_id, parent_id);
CREATE INDEX IF NOT EXISTS {p}sessions_by_update ON {p}sessions (updated_at);
"""
"""The tables of version 1. Releases before versioning created exactly these and no version table, so step
0 → 1 (``IF NOT EXISTS``) both creates a new store and adopts such a store as it stands."""

INDEX_PARENTS = f"CREATE INDEX IF NOT EXISTS {{p}}sessions_by_parent ON {{p}}sessions ((metadata->>'{PARENT_KEY}'))"
"""Version 2: sessions by the session they came from (a fork's, a subagent's parent), so that a write pass
finds a session's children with one indexed lookup instead of reading every session."""

_CWD = "(metadata->>'cwd') COLLATE \"C\""
"""The folder a session ran in, in byte order, as SQL: the expression its index is on (a query must say it
the same)."""

INDEX_FOLDERS = f"CREATE INDEX IF NOT EXISTS {{p}}sessions_by_cwd ON {{p}}sessions (({_CWD}))"
"""Version 3: sessions by the folder they ran in, in byte order (``COLLATE "C"``: a folder's range is then the
names that start with it), so that a session's opening reads its project's sessions, not every session."""

MIGRATIONS: tuple[str, ...] = (SCHEMA_V1, INDEX_PARENTS, INDEX_FOLDERS)
"""Step ``n`` takes a store from version ``n`` to ``n + 1`` (``{p}``: the table prefix), in the transaction
that records the new version in ``{p}schema_version``: a step that fails leaves the store at the version it
had. A change to the tables is a new step appended here, never an edit of an old one."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The version this code reads and writes."""

VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {p}schema_version (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version INTEGER NOT NULL
)
"""

MAX_DEPTH = 10_000_000
_COLS = "n.id, n.session_id, n.parent_id, n.role, n.kind, n.content, n.created_at, n.metadata"


def _node(row: Sequence[Any]) -> Node:
    return Node(row[0], row[1], row[2], row[3], NodeKind(row[4]), row[5], row[6], row[7])


def _session(row: Sequence[Any]) -> Session:
    return Session(row[0], row[1], row[2], row[3], row[4])


class PostgresSessionStore(BranchWalks):
    """Session graphs in PostgreSQL; ``table_prefix`` isolates tests and tenants."""

    def __init__(self, url: str, table_prefix: str = "scriptorium_") -> None:
        if not table_prefix.replace("_", "").isalnum():
            raise ValueError("table prefix must be alphanumeric")
        self._p = table_prefix
        # Custom plans: a generic plan of the recursive walk can scan the whole table.
        self._db = psycopg.connect(url, autocommit=True, prepare_threshold=None)
        self._lock = threading.Lock()
        with self._lock:
            try:
                self._migrate(url)
            except BaseException:
                self._db.close()
                raise

    def _migrate(self, url: str) -> None:
        """Bring the tables to :data:`SCHEMA_VERSION`, or refuse a store a newer release made."""
        with self._db.transaction():
            # One opener at a time (CREATE … IF NOT EXISTS races between sessions); the others find it done.
            self._db.execute(b"SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self._p}schema_version",))
            self._db.execute(VERSION_TABLE.format(p=self._p).encode())
            row = self._db.execute(f"SELECT version FROM {self._p}schema_version".encode()).fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"the session store's tables {self._p}* have schema version {version}; this release reads "
                    f"up to {SCHEMA_VERSION}",
                    guidance="a newer Scriptorium wrote them: upgrade to open the store",
                    path=url.split("@")[-1],  # the host and database, never a password
                )
            for step in MIGRATIONS[version:]:
                self._db.execute(step.format(p=self._p).encode())
            if version < SCHEMA_VERSION:
                self._db.execute(
                    f"INSERT INTO {self._p}schema_version (version) VALUES (%s) "
                    "ON CONFLICT (one) DO UPDATE SET version = excluded.version".encode(),
                    (SCHEMA_VERSION,),
                )

    def close(self) -> None:
        self._db.close()

    def _query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[Any]:
        with self._lock:
            return self._db.execute(sql.replace("{p}", self._p).encode(), params).fetchall()

    def _run(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> None:
        with self._lock:
            self._db.execute(sql.replace("{p}", self._p).encode(), params)

    def create_session(
        self, session_id: str, metadata: Mapping[str, Any] | None = None, created_at: datetime | None = None
    ) -> Session:
        now = created_at or utcnow()
        self._run(
            "INSERT INTO {p}sessions (id, head, created_at, updated_at, metadata) VALUES (%s, NULL, %s, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET metadata = {p}sessions.metadata || excluded.metadata",
            (session_id, now, now, Jsonb(dict(metadata or {}))),
        )
        session = self.get_session(session_id)
        assert session is not None
        return session

    def get_session(self, session_id: str) -> Session | None:
        rows = self._query(
            "SELECT id, head, created_at, updated_at, metadata FROM {p}sessions WHERE id = %s", (session_id,)
        )
        return _session(rows[0]) if rows else None

    def list_sessions(self, updated_before: datetime | None = None) -> list[Session]:
        sql = "SELECT id, head, created_at, updated_at, metadata FROM {p}sessions"
        params: tuple[Any, ...] = ()
        if updated_before is not None:
            sql += " WHERE updated_at < %s"
            params = (updated_before,)
        return [_session(row) for row in self._query(sql + " ORDER BY updated_at", params)]

    def sessions_under(self, folder: str) -> dict[str, str]:
        folder, inside, past = folder_range(folder)
        sql = f"SELECT id, metadata->>'cwd' FROM {{p}}sessions WHERE {_CWD} = %s OR ({_CWD} >= %s AND {_CWD} < %s)"
        return dict(self._query(sql, (folder, inside, past)))

    def children_of(self, session_id: str) -> list[Session]:
        sql = (
            "SELECT id, head, created_at, updated_at, metadata FROM {p}sessions "
            f"WHERE metadata->>'{PARENT_KEY}' = %s ORDER BY id"
        )
        return [_session(row) for row in self._query(sql, (session_id,))]

    def set_head(self, session_id: str, head: str, updated_at: datetime | None = None) -> None:
        self._run(
            "UPDATE {p}sessions SET head = %s, updated_at = %s WHERE id = %s",
            (head, updated_at or utcnow(), session_id),
        )

    def add_nodes(self, nodes: Sequence[Node], head: str | None = None, updated_at: datetime | None = None) -> int:
        rows = [
            (n.session_id, n.id, n.parent_id, n.role, str(n.kind), n.content, n.created_at, Jsonb(dict(n.metadata)))
            for n in nodes
        ]
        inserted = 0
        with self._lock, self._db.transaction():
            cur = self._db.cursor()
            for row in rows:
                cur.execute(
                    (
                        "INSERT INTO {p}nodes (session_id, id, parent_id, role, kind, content, created_at, metadata) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (session_id, id) DO NOTHING"
                    )
                    .replace("{p}", self._p)
                    .encode(),
                    row,
                )
                inserted += max(cur.rowcount, 0)
            if head is not None and nodes:
                cur.execute(
                    "UPDATE {p}sessions SET head = %s, updated_at = %s WHERE id = %s".replace("{p}", self._p).encode(),
                    (head, updated_at or utcnow(), nodes[0].session_id),
                )
        return inserted

    def get_node(self, session_id: str, node_id: str) -> Node | None:
        rows = self._query(
            f"SELECT {_COLS} FROM {{p}}nodes n WHERE n.session_id = %s AND n.id = %s", (session_id, node_id)
        )
        return _node(rows[0]) if rows else None

    def _walk(self, session_id: str, head: str, workspace_id: str | None) -> list[Node]:
        marked = "(n.metadata -> %(key)s -> %(ws)s) IS NOT NULL" if workspace_id else "false"
        sql = f"""
            WITH RECURSIVE chain(id, parent_id, depth, marked) AS (
                SELECT n.id, n.parent_id, 0, {marked} FROM {{p}}nodes n WHERE n.session_id = %(s)s AND n.id = %(head)s
                UNION ALL
                SELECT n.id, n.parent_id, c.depth + 1, {marked}
                FROM chain c JOIN {{p}}nodes n ON n.session_id = %(s)s AND n.id = c.parent_id
                WHERE NOT c.marked AND c.depth < {MAX_DEPTH}
            )
            SELECT {_COLS} FROM chain c JOIN {{p}}nodes n ON n.session_id = %(s)s AND n.id = c.id
            WHERE NOT c.marked ORDER BY c.depth DESC
        """
        params = {"s": session_id, "head": head, "key": MARKER_KEY, "ws": workspace_id or ""}
        return [node for node in map(_node, self._query(sql, params)) if not node.rewound]

    def branch_tips(self, session_id: str) -> list[str]:
        rows = self._query(
            "SELECT n.id FROM {p}nodes n WHERE n.session_id = %s AND NOT EXISTS "
            "(SELECT 1 FROM {p}nodes c WHERE c.session_id = n.session_id AND c.parent_id = n.id) "
            f"AND coalesce(n.metadata ->> '{REWOUND_KEY}', 'false') <> 'true' ORDER BY n.created_at, n.id",
            (session_id,),
        )
        return [row[0] for row in rows]

    def node_parents(self, session_id: str) -> dict[str, str | None]:
        return dict(self._query("SELECT id, parent_id FROM {p}nodes WHERE session_id = %s", (session_id,)))

    def node_count(self, session_id: str) -> int:
        return int(self._query("SELECT COUNT(*) FROM {p}nodes WHERE session_id = %s", (session_id,))[0][0])

    def content_node_ids(self, session_id: str) -> set[str]:
        sql = (
            "SELECT id FROM {p}nodes WHERE session_id = %s AND kind IN ('user', 'assistant') "
            "AND btrim(content, E' \\t\\n\\x0b\\f\\r') <> ''"
        )
        return {row[0] for row in self._query(sql, (session_id,))}

    def forget(self, session_id: str, node_ids: Iterable[str] | None, tombstone: Mapping[str, str]) -> int:
        stone = Jsonb(dict(tombstone))
        erased = 0
        with self._lock, self._db.transaction():
            update = "UPDATE {p}nodes SET content = '', metadata = metadata || jsonb_build_object(%s::text, %s::jsonb) "
            if node_ids is None:
                cursor = self._db.execute(
                    (update + "WHERE session_id = %s").replace("{p}", self._p).encode(),
                    (FORGOTTEN_KEY, stone, session_id),
                )
                erased = cursor.rowcount
                self._db.execute(
                    "UPDATE {p}sessions SET metadata = (metadata - 'title') || jsonb_build_object(%s::text, %s::jsonb) "
                    "WHERE id = %s".replace("{p}", self._p).encode(),
                    (FORGOTTEN_KEY, stone, session_id),
                )
            else:
                for chunk in chunked(list(node_ids)):
                    cursor = self._db.execute(
                        (update + "WHERE session_id = %s AND id = ANY(%s)").replace("{p}", self._p).encode(),
                        (FORGOTTEN_KEY, stone, session_id, list(chunk)),
                    )
                    erased += cursor.rowcount
                    # A title taken from a forgotten message goes with it (its marker stays: none is derived
                    # again).
                    self._db.execute(
                        "UPDATE {p}sessions SET metadata = metadata - 'title' WHERE id = %s "
                        "AND metadata ->> %s = ANY(%s)".replace("{p}", self._p).encode(),
                        (session_id, TITLE_FROM_KEY, list(chunk)),
                    )
        return erased

    def rewrite(self, session_id: str, text: Callable[[str], str], dry_run: bool = False) -> int:
        with self._lock, self._db.transaction():
            nodes = self._db.execute(
                "SELECT id, content, metadata FROM {p}nodes WHERE session_id = %s FOR UPDATE".replace(
                    "{p}", self._p
                ).encode(),
                (session_id,),
            ).fetchall()
            sessions = self._db.execute(
                "SELECT metadata FROM {p}sessions WHERE id = %s FOR UPDATE".replace("{p}", self._p).encode(),
                (session_id,),
            ).fetchall()
            node_rows = []
            for node_id, content, metadata in nodes:
                new_content, new_metadata = text(content), map_strings(metadata, text)
                if (new_content, new_metadata) != (content, metadata):
                    node_rows.append((new_content, Jsonb(new_metadata), session_id, node_id))
            session_rows = [
                (Jsonb(new_metadata), session_id)
                for (metadata,) in sessions
                if (new_metadata := map_strings(metadata, text)) != metadata
            ]
            changed = len(node_rows) + len(session_rows)
            if dry_run or not changed:
                return changed
            with self._db.cursor() as cursor:
                cursor.executemany(
                    "UPDATE {p}nodes SET content = %s, metadata = %s WHERE session_id = %s AND id = %s".replace(
                        "{p}", self._p
                    ).encode(),
                    node_rows,
                )
                cursor.executemany(
                    "UPDATE {p}sessions SET metadata = %s WHERE id = %s".replace("{p}", self._p).encode(), session_rows
                )
        return changed

    def compact(self) -> bool:
        """VACUUM FULL rewrites both tables: the old row versions leave the table files. The server's WAL,
        its archive, base backups and replicas keep them until they age out of the server's own retention."""
        self._run("VACUUM FULL {p}nodes, {p}sessions")
        return True

    def unmark_written_except(self, workspace_id: str, revisions: Collection[str]) -> list[str]:
        params = {"key": MARKER_KEY, "ws": workspace_id, "kept": sorted(revisions)}
        where = "metadata -> %(key)s ? %(ws)s AND NOT (metadata -> %(key)s ->> %(ws)s = ANY(%(kept)s))"
        with self._lock, self._db.transaction():
            found = self._db.execute(
                f"SELECT DISTINCT session_id FROM {{p}}nodes WHERE {where} ORDER BY session_id".replace(
                    "{p}", self._p
                ).encode(),
                params,
            ).fetchall()
            self._db.execute(
                (
                    "UPDATE {p}nodes SET metadata = jsonb_set(metadata, ARRAY[%(key)s], "
                    f"(metadata -> %(key)s) - %(ws)s) WHERE {where}"
                )
                .replace("{p}", self._p)
                .encode(),
                params,
            )
        return [str(row[0]) for row in found]

    def mark_written(self, session_id: str, node_ids: Iterable[str], workspace_id: str, revision: str) -> None:
        ids = list(node_ids)
        with self._lock, self._db.transaction():
            for chunk in chunked(ids):
                # Merge into the marker object; sessions.updated_at is untouched.
                self._db.execute(
                    (
                        "UPDATE {p}nodes SET metadata = metadata || jsonb_build_object(%(key)s::text, "
                        "coalesce(metadata -> %(key)s, '{}'::jsonb) "
                        "|| jsonb_build_object(%(ws)s::text, %(rev)s::text)) "
                        "WHERE session_id = %(s)s AND id = ANY(%(ids)s)"
                    )
                    .replace("{p}", self._p)
                    .encode(),
                    {"key": MARKER_KEY, "ws": workspace_id, "rev": revision, "s": session_id, "ids": list(chunk)},
                )
