"""SQLite store writes are one transaction each: a write that fails half-way leaves nothing behind, and the
store takes the next write (no transaction left open)."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from scriptorium.sessions.sqlite import SQLiteSessionStore
from tests.sessions_fixtures import chain


def test_a_write_that_fails_half_way_is_rolled_back_and_the_next_one_goes_through(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    store.create_session("s1")
    first, second = chain("s1", ["m1", "m2"])
    bad = dataclasses.replace(second, role=None)  # type: ignore[arg-type]  # NOT NULL fails on the second row
    with pytest.raises(sqlite3.IntegrityError):
        store.add_nodes([first, bad], head="m2")
    assert store.node_count("s1") == 0
    assert store.get_session("s1").head is None  # type: ignore[union-attr]
    assert store.add_nodes([first, second], head="m2") == 2
    assert [n.id for n in store.get_branch("s1")] == ["m1", "m2"]
    store.close()
