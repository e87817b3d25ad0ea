"""Sessions that came from another: a fork continues it, a subagent is spawned by it.

The parent's boundary write covers them (each turn once), and a record says where its session came from.
"""

from __future__ import annotations

from scriptorium.changes.read import record_payload
from scriptorium.recall.branches import BranchView
from scriptorium.sessions import PARENT_KEY, SPAWN_KEY, SessionStore, spawned_from
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.paths import source_path
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.outcomes import Written
from scriptorium.writing.service import WriteService, WriteSettings
from tests.checks import records_citing
from tests.sessions_fixtures import chain


def family(store: SessionStore) -> None:
    """main; a subagent it spawned; a fork of that subagent; an unrelated session."""
    store.create_session("main", {"provider": "test"})
    store.add_nodes(chain("main", ["p1", "p2"]), head="p2")
    store.create_session("helper", {"provider": "test", PARENT_KEY: "main", SPAWN_KEY: "subagent"})
    store.add_nodes(chain("helper", ["h1", "h2", "h3"]), head="h3")
    store.create_session("helper-fork", {"provider": "test", PARENT_KEY: "helper"})
    store.add_nodes(chain("helper-fork", ["f1"]), head="f1")
    store.create_session("other", {"provider": "test"})
    store.add_nodes(chain("other", ["o1"]), head="o1")


def test_a_parents_boundary_write_covers_what_came_from_it_once(ws: MemoryWorkspace, store: SessionStore) -> None:
    family(store)
    service = WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0))
    outcome = service.write("main", force=True)
    assert isinstance(outcome, Written) and outcome.nodes_written == 6 and outcome.records_created == 6
    cited = records_citing(ws.root)
    written = {"test/main/p1", "test/main/p2", "test/helper/h1", "test/helper/h2", "test/helper/h3",
               "test/helper-fork/f1"}  # fmt: skip
    assert {k: v for k, v in cited.items() if k.startswith("test/")} == dict.fromkeys(written, 1)
    assert service.write("helper", force=True).ok and records_citing(ws.root) == cited, "nothing twice"
    assert service.write("main", force=False).ok, "an unforced write stays with its own session"


def test_a_record_says_where_its_session_came_from(ws: MemoryWorkspace, store: SessionStore) -> None:
    family(store)
    WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0)).write(
        "main", force=True
    )
    snap = ws.snapshot()
    view = BranchView(store)
    origins = {}
    for topic in snap.topics.values():
        for record in topic.records:
            payload = record_payload(snap, record.memory_id, view)
            node = payload["sources"][0]["source"].split("/")[1]
            origins[node] = payload["origins"]
    assert origins["main"] == [], "a session that came from nowhere"
    assert "other" not in origins, "an unrelated session is not part of main's boundary write"
    assert origins["helper"] == [{"session": "helper", "spawned_by": "main"}]
    assert origins["helper-fork"] == [{"session": "helper-fork", "continued_from": "helper"}]
    session = store.get_session("helper-fork")
    assert session is not None and spawned_from(session) == ("helper", "fork"), "fork is the default"


def test_sources_carry_where_their_session_came_from(ws: MemoryWorkspace, store: SessionStore) -> None:
    family(store)
    WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0)).write(
        "main", force=True
    )

    def origin(thread: str, message: str) -> tuple[str, str] | None:
        path = source_path("test", thread, message)
        return ws.archive.read(path).origin

    assert origin("main", "p1") is None
    assert origin("helper", "h1") == ("spawned_by", "main")
    assert origin("helper-fork", "f1") == ("continued_from", "helper")
    assert b"origin" not in (ws.archive.entry("sources/test/b2/main/p1.md") or b"origin"), "others keep their bytes"
    store.create_session("late", {"provider": "test", "trust": "pending", PARENT_KEY: "main"})
    store.add_nodes(chain("late", ["l1"]), head="l1")
    WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0)).write(
        "late", force=True
    )
    assert origin("late", "l1") == ("continued_from", "main")
    assert ws.promote_source("test/late/l1").changed_files  # the one change a source may see…
    promoted = ws.archive.read("sources/test/5d/late/l1.md")
    assert (promoted.trust, promoted.origin) == ("trusted", ("continued_from", "main")), "…keeps its origin"


def test_a_bad_origin_is_refused() -> None:
    import pytest

    from scriptorium.errors import ReasonCode, ValidationRejected
    from scriptorium.workspace.sources import SourceMessage, parse_source, render_source

    good = SourceMessage("p", "t", "m", "user", "2026-01-01T00:00:00Z", "hi", origin=("spawned_by", "main"))
    data = render_source(good)
    assert parse_source("sources/p/8e/t/m.md", data) == good
    with pytest.raises(ValidationRejected) as caught:
        render_source(SourceMessage("p", "t", "m", "user", "x", "hi", origin=("adopted_by", "main")))
    assert caught.value.reason == ReasonCode.INVALID_SOURCE
    forged = data.replace(b'{"spawned_by": "main"}', b'{"spawned_by": 3}')
    with pytest.raises(ValidationRejected):
        parse_source("sources/p/8e/t/m.md", forged)
