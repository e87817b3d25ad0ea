"""The OpenClaw importer: sessions read from an agent database laid out as OpenClaw 2026.9 lays it out
(``transcript_events``, events over a KiB zstd-compressed), incrementally, a rewritten session read again,
and the watcher's sweep finding a session that grew or is new. (The released OpenClaw writing a real
database: tests/runtimes/test_real_openclaw.py.)"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import zstandard

from scriptorium.errors import Forbidden
from scriptorium.producers.ingest import import_paths
from scriptorium.producers.opening import pinned
from scriptorium.runtimes.hooks.watcher import grown_transcripts
from scriptorium.sessions import NodeKind, open_store
from tests.producers.helpers import cited_once, ingest, nodes_of

SCHEMA = """
CREATE TABLE transcript_events (
  session_id TEXT NOT NULL, seq INTEGER NOT NULL, event_json TEXT, created_at INTEGER NOT NULL,
  event_zstd BLOB, event_utf8_bytes INTEGER, navigation_json TEXT, PRIMARY KEY (session_id, seq)
) STRICT;
"""
BIG = "The harbour office keeps the ferry timetable. " * 40  # over a KiB: OpenClaw compresses it


def event(kind: str, entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": "2026-12-04T08:05:29.406Z", **fields}


def message(entry_id: str, parent: str | None, role: str, content: Any) -> dict[str, Any]:
    return event("message", entry_id, parent, message={"role": role, "content": content})


def header(session: str) -> dict[str, Any]:
    return {"type": "session", "version": 4, "id": session, "timestamp": "2026-12-04T08:05:28.411Z", "cwd": "/w"}


class AgentDatabase:
    """An OpenClaw agent database with the one table the importer reads, written as OpenClaw writes it."""

    def __init__(self, home: Path) -> None:
        self.path = home / ".openclaw" / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
        self.path.parent.mkdir(parents=True)
        with sqlite3.connect(self.path) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)

    def append(self, session: str, *events: dict[str, Any]) -> None:
        with sqlite3.connect(self.path) as db:
            query = "SELECT COALESCE(MAX(seq), -1) FROM transcript_events WHERE session_id = ?"
            ((last,),) = db.execute(query, (session,))
            for seq, value in enumerate(events, start=last + 1):
                db.execute(
                    "INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_zstd, "
                    "event_utf8_bytes) VALUES (?, ?, ?, 0, ?, ?)",
                    (session, seq, *self._stored(value)),
                )

    def rewrite(self, session: str, seq: int, value: dict[str, Any]) -> None:
        with sqlite3.connect(self.path) as db:
            db.execute(
                "UPDATE transcript_events SET event_json = ?, event_zstd = ?, event_utf8_bytes = ? "
                "WHERE session_id = ? AND seq = ?",
                (*self._stored(value), session, seq),
            )

    @staticmethod
    def _stored(value: dict[str, Any]) -> tuple[str | None, bytes | None, int | None]:
        text = json.dumps(value)
        if len(text.encode()) <= 1024:
            return text, None, None
        return None, zstandard.ZstdCompressor().compress(text.encode()), len(text.encode())


def first_session(db: AgentDatabase) -> None:
    db.append(
        "s1",
        header("s1"),
        event("model_change", "mc", None, provider="scripted", modelId="m"),
        event("custom", "snap", "mc", customType="model-snapshot", data={}),
        message("u1", "snap", "user", "Our ferry leaves from Mallaig."),
        message("a1", "u1", "assistant", [{"type": "text", "text": BIG}]),
    )


def test_sessions_are_read_from_the_agent_database_compressed_events_included_and_each_turn_written_once(
    tmp_path: Path,
) -> None:
    db = AgentDatabase(tmp_path)
    first_session(db)
    db.append("s2", header("s2"), message("v1", None, "user", "Book the boiler service for Tuesday."))
    state = tmp_path / "state"
    report = ingest(state, tmp_path / ".openclaw" / "agents")
    assert report["formats"] == {"openclaw": 1} and sorted(report["session_ids"]) == ["s1", "s2"]  # type: ignore[call-overload]
    nodes = {n.id: n for n in nodes_of(state, "s1")}
    assert nodes["u1"].kind == NodeKind.USER and nodes["u1"].content == "Our ferry leaves from Mallaig."
    assert nodes["a1"].kind == NodeKind.ASSISTANT and nodes["a1"].content == BIG.strip(), "the zstd event, decoded"
    assert nodes["a1"].parent_id == "u1" and nodes["u1"].parent_id is None, "non-node entries re-parented"
    cited_once(state / "memory", nodes_of(state, "s1"))
    sources = sorted(
        p.relative_to(state / "memory" / "sources").parts[0] for p in (state / "memory" / "sources").rglob("*.md")
    )
    assert set(sources) == {"openclaw"}, "the sources are OpenClaw's, not pi's"

    reset = event("reset", "r", "u2", reason="new")
    db.append("s1", message("u2", "a1", "user", "Actually it leaves from Oban."), reset)
    again = ingest(state, db.path)
    assert again["new_nodes"] == 1 and again["lines_read"] == 2, again  # s1's two new rows only; s2 not read
    assert again["skipped_types"] == {}, "OpenClaw's reset entry is known, not an unknown type"
    assert {n.id for n in nodes_of(state, "s1") if n.kind == NodeKind.USER} == {"u1", "u2"}
    cited_once(state / "memory", nodes_of(state, "s1"))
    assert ingest(state, db.path)["lines_read"] == 0


def test_a_rewritten_session_is_read_again_from_its_start_and_adds_no_duplicate(tmp_path: Path) -> None:
    db = AgentDatabase(tmp_path)
    first_session(db)
    state = tmp_path / "state"
    ingest(state, db.path)
    db.rewrite("s1", 4, message("a1", "u1", "assistant", [{"type": "text", "text": "Noted: Mallaig."}]))
    db.append("s1", message("u2", "a1", "user", "And the return is on Friday."))
    report = ingest(state, db.path)
    assert report["restarted"] == [str(db.path)] and report["lines_read"] == 6, report
    nodes = nodes_of(state, "s1")
    assert {n.id for n in nodes if n.is_content} == {"u1", "a1", "u2"}
    cited_once(state / "memory", nodes)


def test_the_sweep_finds_a_database_whose_sessions_grew_or_that_holds_a_new_one(tmp_path: Path) -> None:
    db = AgentDatabase(tmp_path)
    first_session(db)
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    try:
        roots = [tmp_path / ".openclaw" / "agents"]
        import_paths(store, [db.path], redactor=None)
        assert grown_transcripts(store, roots) == [], "nothing past the cursors"
        db.append("s1", message("u2", "a1", "user", "Actually it leaves from Oban."))
        assert grown_transcripts(store, roots) == [db.path.resolve()], "a session grew"
        import_paths(store, [db.path], redactor=None)
        assert grown_transcripts(store, roots) == []
        db.append("s2", header("s2"), message("v1", None, "user", "Book the boiler service."))
        assert grown_transcripts(store, roots) == [db.path.resolve()], "a session no import read yet"
    finally:
        store.close()


def test_an_http_hook_import_never_opens_a_database(tmp_path: Path) -> None:
    """The HTTP route pins the files it lets the import open; SQLite opens its own (the WAL): refused."""
    db = AgentDatabase(tmp_path)
    first_session(db)
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    try:
        with pinned({}, [tmp_path]), pytest.raises(Forbidden, match="local hooks only"):
            import_paths(store, [db.path], redactor=None)
        assert store.list_sessions() == []
    finally:
        store.close()
