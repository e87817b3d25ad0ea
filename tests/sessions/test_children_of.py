"""A write pass asks which sessions came from the one it writes (forks, subagents) on every forced pass: the
store answers with one indexed lookup (``children_of``), not by reading every session it holds — a year's
import read every session once per session written."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest

from scriptorium.sessions import PARENT_KEY, SPAWN_KEY, open_store, spawned_from
from scriptorium.writing.branching import spawned_sessions
from tests.requirements import PG_URL, require


def _fill(store: object) -> None:
    make = store.create_session  # type: ignore[attr-defined]
    make("root", {})
    for n in range(30):
        make(f"other-{n:02d}", {})
    make("fork-b", {PARENT_KEY: "root", SPAWN_KEY: "fork"})
    make("fork-a", {PARENT_KEY: "root"})
    make("agent", {PARENT_KEY: "fork-a", SPAWN_KEY: "subagent"})
    make("elsewhere", {PARENT_KEY: "other-03", SPAWN_KEY: "subagent"})


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_children_are_found_by_their_parent_as_a_scan_of_every_session_finds_them(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if kind == "postgres":
        require("postgres")
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    url = f"sqlite:///{tmp_path / 'sessions.db'}" if kind == "sqlite" else PG_URL
    store = open_store(url, table_prefix=prefix)
    try:
        _fill(store)
        everyone = store.list_sessions()
        for parent in ("root", "fork-a", "other-03", "agent", "nobody"):
            scanned = sorted(s.id for s in everyone if (came := spawned_from(s)) is not None and came[0] == parent)
            assert [s.id for s in store.children_of(parent)] == scanned, parent
        monkeypatch.setattr(type(store), "list_sessions", lambda *a, **k: pytest.fail("read every session"))
        assert spawned_sessions(store, "root") == ["fork-a", "fork-b", "agent"]
    finally:
        if kind == "postgres":
            import psycopg

            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {prefix}nodes, {prefix}sessions, {prefix}schema_version".encode())
        store.close()


def test_sqlite_answers_through_the_parent_index(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    open_store(f"sqlite:///{path}").close()
    from scriptorium.sessions.sqlite import _PARENT

    db = sqlite3.connect(path)
    try:
        plan = db.execute(f"EXPLAIN QUERY PLAN SELECT id FROM sessions WHERE {_PARENT} = ?", ("x",)).fetchall()
    finally:
        db.close()
    assert any("sessions_by_parent" in str(row) for row in plan), plan


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_projects_sessions_are_picked_by_the_store_as_a_scan_of_every_session_picks_them(
    kind: str, tmp_path: Path
) -> None:
    """What a session's opening asks (the sessions that ran in its project's folder or below), answered by one
    query: a sibling folder sharing the prefix (``atlas2`` beside ``atlas``) is not inside."""
    from scriptorium.runtimes.hooks.answer import same_project

    if kind == "postgres":
        require("postgres")
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    url = f"sqlite:///{tmp_path / 'sessions.db'}" if kind == "sqlite" else PG_URL
    store = open_store(url, table_prefix=prefix)
    project = tmp_path / "src" / "atlas"
    (project / ".git").mkdir(parents=True)
    try:
        for n, cwd in enumerate(
            [str(project), f"{project}/web", f"{project}/web/app", f"{project}2", str(project.parent), "", None]
        ):
            store.create_session(f"s{n}", {} if cwd is None else {"cwd": cwd})
        everyone = {s.id: s.metadata.get("cwd") for s in store.list_sessions()}
        for asked in (project, project / "web", project.parent / "atlas2"):
            scanned = same_project(everyone, asked, "s1")
            assert (
                same_project(store.sessions_under(str(asked if asked.name == "atlas2" else project)), asked, "s1")
                == scanned
            )
        inside = {"s0": str(project), "s1": f"{project}/web", "s2": f"{project}/web/app"}
        assert store.sessions_under(str(project)) == inside
        assert store.sessions_under(f"{project}/") == store.sessions_under(str(project)), "a trailing slash is one"
    finally:
        if kind == "postgres":
            import psycopg

            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {prefix}nodes, {prefix}sessions, {prefix}schema_version".encode())
        store.close()


def test_sqlite_picks_a_projects_sessions_through_the_folder_index(tmp_path: Path) -> None:
    """The query ``sessions_under`` sends is a range of the folder index, not a scan of every session (which
    made a year's SessionStart grow with the sessions of every project)."""
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    sent: list[str] = []
    try:
        for n in range(3):
            store.create_session(f"s{n}", {"cwd": f"/home/dev/p{n}"})
        store._db.set_trace_callback(sent.append)  # type: ignore[attr-defined]
        assert store.sessions_under("/home/dev/p1") == {"s1": "/home/dev/p1"}
        store._db.set_trace_callback(None)  # type: ignore[attr-defined]
        (query,) = [sql for sql in sent if sql.lstrip().upper().startswith("SELECT")]
        plan = store._db.execute(f"EXPLAIN QUERY PLAN {query}").fetchall()  # type: ignore[attr-defined]
    finally:
        store.close()
    assert any("sessions_by_cwd" in str(row) for row in plan), plan
    assert not any(str(row).rstrip(")'").endswith("SCAN sessions") for row in plan), plan


def test_a_projects_sessions_are_the_ones_a_path_comparison_picks(tmp_path: Path) -> None:
    """The opening decides most folders on their strings; every folder is decided as comparing Paths does
    (the root folder, trailing slashes, doubled slashes, a sibling sharing the prefix)."""
    from scriptorium.recall.places import project_root
    from scriptorium.runtimes.hooks.answer import same_project

    project = tmp_path / "atlas"
    (project / ".git").mkdir(parents=True)
    names = [
        "/",
        str(tmp_path),
        f"{tmp_path}/",
        f"{tmp_path}/.",
        str(project),
        f"{project}/",
        f"{project}//web",
        f"{project}/./web",
    ]
    names += [f"{project}/web/", f"{project}2", f"{project}2/web", f"{tmp_path}/other", "", "relative/web"]
    folders = {f"s{n}": name for n, name in enumerate(names)}

    def by_paths(cwd: Path) -> set[str]:  # the comparison the opening made before
        root = project_root(cwd)
        return {
            session
            for session, ran in folders.items()
            if ran and ((root is not None and Path(ran).is_relative_to(root)) or (root is None and Path(ran) == cwd))
        }

    for cwd in (Path("/"), tmp_path, project, project / "web"):
        assert same_project(folders, cwd) == by_paths(cwd), cwd
