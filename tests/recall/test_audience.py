"""Requester-level filtering in process: sources and sessions carry an audience, records fold it from
every source they cite, and every read answers a viewer only with what it may see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scriptorium.access.scope import visible_record
from scriptorium.audience import ANYONE, OWNER, OWNER_PRINCIPAL, Principal, Viewer, fold
from scriptorium.changes.structured import Citation, CreateRecord, Destination
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import NotFound, ReasonCode, ValidationRejected
from scriptorium.provider import effective_core
from scriptorium.recall.context import installed_core_if_trusted
from scriptorium.recall.index import SEARCH_MODES, RecallIndex, SearchMode
from scriptorium.runtimes.mcp.tools import call_tool
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.paths import source_identity_from_path
from scriptorium.workspace.sources import SourceMessage, parse_source, render_source
from scriptorium.workspace.threads import read_entry
from tests.requesters_fixtures import (
    ALICE_SEES,
    BOB_SEES,
    EVERYTHING,
    SHARED_ONLY,
    World,
    requesters_world,
    source_of,
)
from tests.requirements import require


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return requesters_world(tmp_path_factory.mktemp("audience") / "state")


def _ws(world: World) -> MemoryWorkspace:
    return MemoryWorkspace(world.state / "memory")


def test_a_source_keeps_its_audience_and_a_shared_one_keeps_its_bytes() -> None:
    shared = SourceMessage("p", "t", "m", "user", "2026-11-20T09:00:00Z", "hello")
    private = SourceMessage("p", "t", "m", "user", "2026-11-20T09:00:00Z", "hello", audience="alice")
    assert b"audience" not in render_source(shared)  # every source written before keeps its bytes
    assert b'audience: "alice"' in render_source(private)
    assert parse_source("sources/p/8e/t/m.md", render_source(private)).audience == "alice"
    assert parse_source("sources/p/8e/t/m.md", render_source(shared)).audience is None
    with_origin = SourceMessage("p", "t", "m", "user", "t", "x", origin=("spawned_by", "s0"), audience="bob")
    back = parse_source("sources/p/8e/t/m.md", render_source(with_origin))
    assert (back.origin, back.audience) == (("spawned_by", "s0"), "bob")
    with pytest.raises(ValidationRejected) as bad:
        render_source(SourceMessage("p", "t", "m", "user", "t", "x", audience="no spaces allowed"))
    assert bad.value.reason is ReasonCode.INVALID_SOURCE
    forged = render_source(private).replace(b'"alice"', b'"a b"')
    with pytest.raises(ValidationRejected):
        parse_source("sources/p/8e/t/m.md", forged)


def test_a_records_audience_folds_every_cited_source() -> None:
    assert fold([None, None]) == ""
    assert fold([None, "alice", "alice"]) == "alice"
    assert fold(["bob", None, "alice"]) == "alice,bob"
    alice = Viewer("alice")
    assert alice.sees("") and alice.sees("alice") and not alice.sees("bob") and not alice.sees("alice,bob")
    assert OWNER.sees("alice,bob") and ANYONE.sees("") and not ANYONE.sees("alice")


def test_the_write_pass_archives_a_sessions_audience(world: World) -> None:
    memory = world.state / "memory"
    assert b'audience: "alice"' in read_entry(memory, "sources/runtime/22/alice-s/alice-s-1.md")
    assert b"audience" not in read_entry(memory, "sources/runtime/94/shared-s/shared-s-1.md")


@pytest.mark.parametrize(
    ("viewer", "sees"),
    [(Viewer("alice"), ALICE_SEES), (Viewer("bob"), BOB_SEES), (ANYONE, SHARED_ONLY), (OWNER, EVERYTHING)],
    ids=["alice", "bob", "no requester", "owner"],
)
@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_search_answers_each_viewer_with_what_it_may_see(
    world: World, viewer: Viewer, sees: tuple[str, ...], mode: SearchMode
) -> None:
    if mode != "bm25":
        require("embeddings")
    index = RecallIndex.open(world.state / "memory")
    found = {hit.memory_id for hit in index.search("memo", 50, mode=mode, viewer=viewer)}
    assert found == world.ids(*sees)
    if viewer is OWNER:  # the owner's hits are marked with their audience
        marks = {hit.memory_id: hit.audience for hit in index.search("memo", 50, viewer=OWNER)}
        assert {marks[i] for i in world.ids("mixed")} == {"alice,bob"}
        assert {marks[i] for i in world.ids("alice-s")} == {"alice"}
        assert {marks[i] for i in world.ids("shared-s")} == {""}


def test_the_filter_survives_the_disk_cache(world: World) -> None:
    RecallIndex(world.state / "memory").search("memo")  # one process builds the index and saves it
    fresh = RecallIndex(world.state / "memory")  # a new process: the state comes from the disk cache
    assert {h.memory_id for h in fresh.search("memo", 50, viewer=Viewer("bob"))} == world.ids(*BOB_SEES)
    assert fresh.last_refresh.records_indexed == 0, "answered from the cache, not rebuilt"


def test_get_is_not_found_for_a_record_the_viewer_may_not_see(world: World) -> None:
    ws = _ws(world)
    (bobs,) = sorted(world.ids("bob-s"))[:1]
    (mixed,) = world.ids("mixed")
    assert visible_record(ws, bobs, Viewer("bob"))["audience"] == ["bob"]
    assert visible_record(ws, mixed, OWNER)["audience"] == ["alice", "bob"]
    for viewer, memory_id in [(Viewer("alice"), bobs), (Viewer("alice"), mixed), (Viewer("bob"), mixed)]:
        with pytest.raises(NotFound) as refused:
            visible_record(ws, memory_id, viewer)
        with pytest.raises(NotFound) as missing:
            visible_record(ws, "m-000000000000", viewer)
        # exactly what a record that does not exist gets: no hint that it does
        assert refused.value.to_dict() == {**missing.value.to_dict(), "message": f"no record ^{memory_id}"}
    ws.close()


def test_the_core_shows_each_viewer_its_own_and_the_shared_records(world: World) -> None:
    ws = _ws(world)
    index = RecallIndex.open(ws.root)
    assert "alice drinks oolong" in effective_core(ws, index, viewer=Viewer("alice"))
    for viewer in (Viewer("bob"), ANYONE):
        text = effective_core(ws, index, viewer=viewer)
        assert "standups are short" in text and "oolong" not in text
    # The hook's fast path must not answer for a core holding a requester's record.
    assert installed_core_if_trusted(ws.root) is None
    ws.close()


def test_the_model_tools_answer_the_requester_they_speak_for(world: World) -> None:
    ws = _ws(world)
    alice = Principal("propose", "alice", "t1")
    found = call_tool(ws, "memory_search", {"query": "memo", "limit": 20}, principal=alice)
    assert {r["memory_id"] for r in found["results"]} == world.ids(*ALICE_SEES)
    (bobs,) = sorted(world.ids("bob-s"))[:1]
    refused = call_tool(ws, "memory_get", {"memory_id": bobs}, principal=alice)
    assert refused["ok"] is False and refused["reason"] == "NOT_FOUND"
    topic = call_tool(ws, "memory_get", {"topic_path": "topics/mixed.md"}, principal=alice)
    assert topic["ok"] is False and topic["reason"] == "FORBIDDEN"
    status = call_tool(ws, "memory_status", {}, principal=alice)
    assert status["ok"] and "records" not in status
    owner = call_tool(ws, "memory_search", {"query": "memo", "limit": 20}, principal=OWNER_PRINCIPAL)
    assert {r["memory_id"] for r in owner["results"]} == world.ids(*EVERYTHING)
    ws.close()


def test_an_import_gives_new_sessions_their_audience_and_never_changes_one(tmp_path: Path) -> None:
    from scriptorium.errors import InvalidArgument
    from scriptorium.producers.ingest import import_paths
    from scriptorium.sessions import audience_of, open_store

    transcript = Path(__file__).parents[1] / "data" / "compaction.jsonl"
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        with pytest.raises(InvalidArgument):
            import_paths(store, [transcript], audience="not a name", redactor=None)
        assert store.list_sessions() == [], "a refused import stores nothing"
        report = import_paths(store, [transcript], audience="alice", redactor=None)
        (session_id,) = report.sessions
        session = store.get_session(session_id)
        assert session is not None and audience_of(session) == "alice"
        import_paths(store, [transcript], audience="bob", redactor=None)  # a later import keeps the session's audience
        again = store.get_session(session_id)
        assert again is not None and audience_of(again) == "alice"
    finally:
        store.close()


def test_a_requesters_scores_count_only_the_records_it_may_see(tmp_path: Path) -> None:
    """The score side channel: words only in bob's private records move neither the idf nor the average
    length alice's scores use — her scores are the same before and after bob's records are added, where
    the owner's and bob's change."""
    world = requesters_world(tmp_path / "state")
    ws = _ws(world)
    index = RecallIndex.open(ws.root)
    query = "memo notebook vault standup"

    def scores(viewer: Viewer) -> dict[str, float]:
        return {hit.memory_id: hit.score for hit in index.search(query, 50, viewer=viewer)}

    before = {viewer: scores(viewer) for viewer in (Viewer("alice"), Viewer("bob"), OWNER)}
    changes = [
        CreateRecord(f"Memo {n}: the vault vault keeps copies.", "2026-11-21", (Citation(source_of("bob-s"), "memo"),),
                     Destination("topics/vault.md"))
        for n in range(6)
    ]  # fmt: skip
    update_memory(ws, memory_changes=changes, message="bob's vault notes")
    after = {viewer: scores(viewer) for viewer in (Viewer("alice"), Viewer("bob"), OWNER)}
    assert after[Viewer("alice")] == before[Viewer("alice")] and before[Viewer("alice")]
    for viewer in (Viewer("bob"), OWNER):  # the same records, other statistics: the added ones count
        common = set(before[viewer]) & set(after[viewer])
        assert common and any(after[viewer][i] != before[viewer][i] for i in common), viewer
    ws.close()


VIEWS = [
    (Viewer("alice"), ("blue notebook", "oolong"), ("garden vault",)),
    (Viewer("bob"), ("garden vault",), ("blue notebook", "oolong")),
    (ANYONE, (), ("blue notebook", "oolong", "garden vault")),
]


@pytest.mark.parametrize(("viewer", "shown", "hidden"), VIEWS, ids=["alice", "bob", "no requester"])
def test_the_provider_gives_a_runtime_its_requesters_records_and_no_others(
    world: World, viewer: Viewer, shown: tuple[str, ...], hidden: tuple[str, ...]
) -> None:
    from scriptorium.composition import build_runtime
    from scriptorium.provider import ScriptoriumMemory
    from scriptorium.settings import Settings

    runtime = build_runtime(Settings(state=world.state))
    try:
        memory = ScriptoriumMemory(runtime.service, viewer=viewer)
        context = memory.search("memo notebook vault standup", 50) + memory.system_prompt()
    finally:
        runtime.close()
        runtime.workspace.close()
    assert "standups are short" in context and "standup moves to nine thirty" in context  # the shared ones
    assert all(word in context for word in shown), (viewer, context)
    assert not [word for word in hidden if word in context], (viewer, context)


@pytest.mark.parametrize(("viewer", "shown", "hidden"), VIEWS, ids=["alice", "bob", "no requester"])
def test_the_hooks_give_the_runtime_its_requesters_records_and_no_others(
    world: World, tmp_path: Path, viewer: Viewer, shown: tuple[str, ...], hidden: tuple[str, ...]
) -> None:
    import shutil

    from tests.helpers.hooks import common, hook

    state = tmp_path / "state"
    shutil.copytree(world.state, state, symlinks=True)
    env = {"SCRIPTORIUM_HOOK_AUDIENCE": viewer.requester} if viewer.requester else {}
    context = ""
    for event, fields in (
        ("SessionStart", {"source": "startup"}),
        ("UserPromptSubmit", {"prompt": "memo notebook vault"}),
    ):
        done = hook(state, common(event, session="new-session", **fields), **env)
        assert done.returncode == 0 and done.stdout, done.stderr
        context += json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "standups are short" in context
    assert all(word in context for word in shown), (viewer, context)
    assert not [word for word in hidden if word in context], (viewer, context)


def test_a_record_of_a_private_and_a_shared_source_is_the_private_ones_in_either_order(
    world: World, tmp_path: Path
) -> None:
    """A record's audience is the fold of every source it cites, never one of them: alice's private source
    cited before a shared one, or after it, leaves the record alice's alone — in the index as built, as read
    back from its disk cache and as re-evaluated when a cited source is promoted, and in a get. Taking the
    first or the last source's audience instead would show one of them to bob and to a caller of no
    requester."""
    import shutil

    state = tmp_path / "state"
    shutil.copytree(world.state, state, symlinks=True)
    ws = MemoryWorkspace(state / "memory")
    pending = SourceMessage("web", "page-s", "page-s-1", "user", "2026-11-21T09:00:00Z", "memo a page", trust="pending")
    with ws.lock():
        ws.transact(lambda stage: None, message="archive", appended_sources=ws.archive_sources([pending]))
    alice, shared = source_of("alice-s"), source_of("shared-s")
    orders = {
        "alice first": (alice, shared),
        "shared first": (shared, alice),
        "pending first": (pending.identity, alice),
        "pending last": (alice, pending.identity),
    }
    made: dict[str, str] = {}
    for name, sources in orders.items():
        cited = tuple(Citation(s, "memo") for s in sources)
        change = CreateRecord(f"Folded memo {name}: quince jam.", "2026-11-21", cited, Destination("topics/folded.md"))
        (made[name],) = update_memory(ws, memory_changes=[change], message=f"folded {name}").created_ids
    snap = ws.snapshot()
    for name, memory_id in made.items():  # cited in the order given: the order the fold must not depend on
        record = snap.record(memory_id)
        assert record is not None
        paths = snap.topics[record.topic].cited_paths(record)
        assert ["/".join(source_identity_from_path(p) or ()) for p in paths] == list(orders[name])

    def found(index: RecallIndex) -> dict[str, set[str]]:
        viewers = (Viewer("alice"), Viewer("bob"), ANYONE)
        return {v.label: {h.memory_id for h in index.search("quince jam", 50, viewer=v)} for v in viewers}

    trusted = {made["alice first"], made["shared first"]}
    for index in (RecallIndex(ws.root), RecallIndex(ws.root)):  # the second answers from the disk cache
        assert found(index) == {"alice": trusted, "bob": set(), "shared": set()}
        marks = {h.memory_id: h.audience for h in index.search("quince jam", 50, viewer=OWNER, include_pending=True)}
        assert marks == dict.fromkeys(made.values(), "alice")
    ws.promote_source(pending.identity)  # the index re-evaluates the records citing it, parsing no topic
    assert index.search("quince jam", 50, viewer=Viewer("bob")) == []
    assert index.last_refresh.trust_changed == 2 and index.last_refresh.topics_parsed == 0
    assert found(index) == {"alice": set(made.values()), "bob": set(), "shared": set()}
    for memory_id in made.values():
        assert visible_record(ws, memory_id, Viewer("alice"))["audience"] == ["alice"]
        for viewer in (Viewer("bob"), ANYONE):
            with pytest.raises(NotFound):
                visible_record(ws, memory_id, viewer)
    ws.close()
