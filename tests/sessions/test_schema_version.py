"""The session store knows its schema version: a store an older release made (no version at all) opens and
is migrated, every step in order and once; a store a newer release made is refused (SCHEMA_TOO_NEW) and left
as it was."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scriptorium.errors import ReasonCode, SchemaTooNew
from scriptorium.sessions import open_store
from scriptorium.sessions import postgres as pg_store
from scriptorium.sessions import sqlite as sqlite_store
from tests.requirements import PG_URL, require

# The DDL of the releases before schema versions, as they shipped it: a store they made has no version.
UNVERSIONED_SQLITE = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, head TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS nodes (
    session_id TEXT NOT NULL, id TEXT NOT NULL, parent_id TEXT, role TEXT NOT NULL, kind TEXT NOT NULL,
    content TEXT NOT NULL, created_at TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (session_id, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes (session_id, parent_id);
CREATE INDEX IF NOT EXISTS sessions_by_update ON sessions (updated_at);
INSERT INTO sessions VALUES ('s1', 'm2', '2026-11-01T09:00:00+00:00', '2026-11-01T09:01:00+00:00', '{"provider": "old"}');
INSERT INTO nodes VALUES ('s1', 'm1', NULL, 'user', 'user', 'Releases ship on Thursdays', '2026-11-01T09:00:00+00:00', '{}');
INSERT INTO nodes VALUES ('s1', 'm2', 'm1', 'assistant', 'assistant', 'Noted.', '2026-11-01T09:01:00+00:00', '{}');
"""  # noqa: E501

UNVERSIONED_POSTGRES = """
CREATE TABLE {p}sessions (
    id TEXT PRIMARY KEY, head TEXT, created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL,
    metadata JSONB NOT NULL DEFAULT '{{}}'
);
CREATE TABLE {p}nodes (
    session_id TEXT NOT NULL, id TEXT NOT NULL, parent_id TEXT, role TEXT NOT NULL, kind TEXT NOT NULL,
    content TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL, metadata JSONB NOT NULL DEFAULT '{{}}',
    PRIMARY KEY (session_id, id)
);
CREATE INDEX {p}nodes_by_parent ON {p}nodes (session_id, parent_id);
CREATE INDEX {p}sessions_by_update ON {p}sessions (updated_at);
INSERT INTO {p}sessions VALUES ('s1', 'm2', '2026-11-01T09:00:00Z', '2026-11-01T09:01:00Z', '{{"provider": "old"}}');
INSERT INTO {p}nodes VALUES ('s1', 'm1', NULL, 'user', 'user', 'Releases ship on Thursdays', '2026-11-01T09:00:00Z', '{{}}');
INSERT INTO {p}nodes VALUES ('s1', 'm2', 'm1', 'assistant', 'assistant', 'Noted.', '2026-11-01T09:01:00Z', '{{}}');
"""  # noqa: E501


class Backend:
    """One store kind: how to make an unversioned store, read and set its version, and open it."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.path = tmp_path / "sessions.db"
        self.prefix = f"t{uuid.uuid4().hex[:10]}_"
        self.module: Any = sqlite_store if kind == "sqlite" else pg_store

    def url(self) -> str:
        return f"sqlite:///{self.path}" if self.kind == "sqlite" else PG_URL

    def sql(self, script: str) -> None:
        if self.kind == "sqlite":
            with sqlite3.connect(self.path) as db:
                db.executescript(script)
            db.close()
            return
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(script.format(p=self.prefix).encode())

    def version(self) -> int | None:
        if self.kind == "sqlite":
            db = sqlite3.connect(self.path)
            try:
                return int(db.execute("PRAGMA user_version").fetchone()[0])
            finally:
                db.close()
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass(%s)", (f"{self.prefix}schema_version",)).fetchone()[0] is None:
                return None
            row = conn.execute(f"SELECT version FROM {self.prefix}schema_version".encode()).fetchone()
            return int(row[0]) if row else None

    def set_version(self, version: int) -> None:
        if self.kind == "sqlite":
            self.sql(f"PRAGMA user_version = {version}")
        else:
            self.sql(f"UPDATE {{p}}schema_version SET version = {version}")

    def open(self) -> Any:
        return open_store(self.url(), table_prefix=self.prefix)

    def drop(self) -> None:
        if self.kind == "postgres":
            self.sql("DROP TABLE IF EXISTS {p}nodes, {p}sessions, {p}schema_version, {p}notes")


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "postgres":
        require("postgres")
    made = Backend(request.param, tmp_path)
    yield made
    made.drop()


def old_store(backend: Backend) -> None:
    backend.sql(UNVERSIONED_SQLITE if backend.kind == "sqlite" else UNVERSIONED_POSTGRES)
    assert backend.version() in (0, None)


def test_a_store_an_older_release_made_opens_and_is_migrated(backend: Backend) -> None:
    old_store(backend)
    store = backend.open()
    try:
        assert [n.content for n in store.get_branch("s1")] == ["Releases ship on Thursdays", "Noted."]
        assert store.get_session("s1").metadata == {"provider": "old"}
        store.mark_written("s1", ["m1", "m2"], "ws1", "r1")
        assert store.pending("s1", "m2", "ws1") == []
    finally:
        store.close()
    assert backend.version() == backend.module.SCHEMA_VERSION
    store = backend.open()
    try:  # version 2's index of sessions by their parent answers on the migrated store
        store.create_session("s2", {"parent_session": "s1", "spawn": "fork"})
        assert [s.id for s in store.children_of("s1")] == ["s2"]
        # version 3's index of sessions by folder too
        store.create_session("s3", {"cwd": "/home/dev/atlas/web"})
        assert store.sessions_under("/home/dev/atlas") == {"s3": "/home/dev/atlas/web"}
    finally:
        store.close()


def test_a_new_store_starts_at_the_current_version(backend: Backend) -> None:
    backend.open().close()
    assert backend.version() == backend.module.SCHEMA_VERSION


def test_a_store_a_newer_release_made_is_refused_and_left_as_it_was(backend: Backend) -> None:
    backend.open().close()
    newer = backend.module.SCHEMA_VERSION + 1
    backend.set_version(newer)
    with pytest.raises(SchemaTooNew) as refused:
        backend.open()
    assert refused.value.reason is ReasonCode.SCHEMA_TOO_NEW and not refused.value.retryable
    assert f"schema version {newer}" in refused.value.message
    assert backend.version() == newer


def test_migration_steps_run_in_order_once_each_and_a_failing_step_changes_nothing(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later release's steps (here a table added by step 1 → 2, a row by 2 → 3) run on an unversioned
    store after step 0 → 1, in order, in one transaction; a step that fails leaves the version and tables."""
    old_store(backend)
    sqlite = backend.kind == "sqlite"
    create = "CREATE TABLE {p}notes (n INTEGER)".replace("{p}", "" if sqlite else "{p}")
    insert = "INSERT INTO {p}notes VALUES (1)".replace("{p}", "" if sqlite else "{p}")
    broken = "INSERT INTO {p}no_such_table VALUES (1)".replace("{p}", "" if sqlite else "{p}")

    def steps(*sql: str) -> tuple[Any, ...]:
        if sqlite:
            return tuple((lambda db, s=s: db.execute(s)) for s in sql)
        return sql

    module = backend.module
    first = module.MIGRATIONS[0]
    monkeypatch.setattr(module, "MIGRATIONS", (first, *steps(create, broken)))
    monkeypatch.setattr(module, "SCHEMA_VERSION", 3)
    with pytest.raises(Exception, match="no_such_table"):
        backend.open()
    assert backend.version() in (0, None)  # nothing of the failed migration stayed

    monkeypatch.setattr(module, "MIGRATIONS", (first, *steps(create, insert)))
    backend.open().close()
    backend.open().close()  # at version 3 already: no step runs again (the insert would add a second row)
    assert backend.version() == 3
    if sqlite:
        db = sqlite3.connect(backend.path)
        rows = db.execute("SELECT n FROM notes").fetchall()
        db.close()
    else:
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            rows = conn.execute(f"SELECT n FROM {backend.prefix}notes".encode()).fetchall()
    assert rows == [(1,)]


def test_old_timestamps_still_read(backend: Backend) -> None:
    old_store(backend)
    store = backend.open()
    try:
        assert store.get_session("s1").created_at == datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    finally:
        store.close()
