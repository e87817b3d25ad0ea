"""Records know their branch: Flask on one branch, FastAPI on another — current, alternative, and the swap.

Written by the real write pass (verbatim writer, forced boundary write of every branch) into a real
workspace, on SQLite and on PostgreSQL; the status is read from the session store at search time.
"""

from __future__ import annotations

from datetime import timedelta

from scriptorium.provider import ScriptoriumMemory
from scriptorium.recall.branches import BranchView
from scriptorium.recall.index import RecallIndex
from scriptorium.sessions import Node, NodeKind, SessionStore
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.service import WriteService, WriteSettings
from tests.sessions_fixtures import T0

TURNS = {  # node: (parent, kind, text)
    "m1": (None, NodeKind.USER, "Atlas needs a web framework for its public API."),
    "m2": ("m1", NodeKind.ASSISTANT, "Two candidates fit Atlas: a small one and an async one."),
    "a3": ("m2", NodeKind.USER, "Let's build the Atlas API on Flask."),
    "a4": ("a3", NodeKind.ASSISTANT, "Done: Atlas API routes now run on Flask blueprints."),
    "b3": ("m2", NodeKind.USER, "Let's build the Atlas API on FastAPI instead."),
    "b4": ("b3", NodeKind.ASSISTANT, "Done: Atlas API routes now run on FastAPI routers."),
}


def conversation(store: SessionStore, head: str) -> None:
    store.create_session("atlas", {"provider": "test", "title": "Atlas"})
    nodes = [
        Node(node, "atlas", parent, str(kind), kind, text, T0 + timedelta(minutes=n))
        for n, (node, (parent, kind, text)) in enumerate(TURNS.items())
    ]
    store.add_nodes(nodes, head=head)


def written(ws: MemoryWorkspace, store: SessionStore) -> WriteService:
    service = WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0))
    assert service.write("atlas", force=True).ok  # the head's branch, then every other tip
    return service


def by_node(ws: MemoryWorkspace, hits: list) -> dict[str, str | None]:  # type: ignore[type-arg]
    snap = ws.snapshot()
    out = {}
    for hit in hits:
        record = snap.record(hit.memory_id)
        assert record is not None
        notes = snap.topics[record.topic].footnotes
        (node,) = {notes[ref].source.message for ref in record.refs if notes[ref].source}  # type: ignore[union-attr]
        out[node] = hit.branch
    return out


def test_records_from_the_left_branch_are_alternatives_and_swap_when_the_head_moves(
    ws: MemoryWorkspace, store: SessionStore
) -> None:
    conversation(store, head="b4")
    written(ws, store)
    index, view = RecallIndex(ws.root), BranchView(store)
    hits = index.search("Atlas API Flask FastAPI framework", 10, branches=view)
    assert by_node(ws, hits) == {
        "m1": None, "m2": None,  # the shared prefix: on every branch
        "a3": "alternative", "a4": "alternative",  # Flask: the branch the user left
        "b3": "current", "b4": "current",  # FastAPI: where the head is
    }  # fmt: skip
    before = {p: ws.read_topic(p) for p in ws.snapshot().topics}
    store.set_head("atlas", "a4")  # the user goes back to the Flask branch and continues there
    swapped = by_node(ws, index.search("Atlas API Flask FastAPI framework", 10, branches=view))
    assert swapped["a4"] == swapped["a3"] == "current" and swapped["b4"] == swapped["b3"] == "alternative"
    assert {p: ws.read_topic(p) for p in ws.snapshot().topics} == before, "no topic was rewritten"
    assert all(hit.branch is None for hit in index.search("Atlas API Flask FastAPI", 10)), "no view, no status"


def test_automatic_context_puts_the_current_branch_first_and_labels_the_option_not_taken(
    ws: MemoryWorkspace, store: SessionStore
) -> None:
    conversation(store, head="b4")
    memory = ScriptoriumMemory(written(ws, store))
    text = memory.search("Atlas API routes Flask FastAPI", 4)
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    fastapi = [n for n, line in enumerate(lines) if "FastAPI" in line]
    flask = [n for n, line in enumerate(lines) if "Flask" in line]
    assert fastapi and flask and max(fastapi) < min(flask), lines
    assert all("option not taken" in lines[n] for n in flask)
    assert not any("option not taken" in lines[n] for n in fastapi)


def test_get_carries_the_branch(ws: MemoryWorkspace, store: SessionStore) -> None:
    from scriptorium.changes.read import record_payload

    conversation(store, head="b4")
    written(ws, store)
    snap = ws.snapshot()
    view = BranchView(store)
    statuses = {
        payload["content"]: payload["branch"]
        for topic in snap.topics.values()
        for record in topic.records
        if (payload := record_payload(snap, record.memory_id, view))
    }
    assert {text.split(": ", 1)[-1].split(" [^")[0]: status for text, status in statuses.items()} == {
        TURNS[n][2]: status
        for n, status in {"m1": None, "m2": None, "a3": "alternative", "a4": "alternative", "b3": "current",
                          "b4": "current"}.items()
    }  # fmt: skip
    assert record_payload(snap, next(iter(snap.id_to_topic)))["branch"] is None  # no view given


def test_the_injected_core_leaves_out_an_option_not_taken(ws: MemoryWorkspace, store: SessionStore) -> None:
    from scriptorium.provider import effective_core
    from scriptorium.recall.context import installed_core_if_trusted
    from scriptorium.workspace import TopicChange

    conversation(store, head="b4")
    written(ws, store)
    core = (
        "# Core\n\n2026-11-01: The Atlas API is built on Flask [k](test/atlas/a4).\n\n"
        "2026-11-01: The Atlas API is built on FastAPI [k](test/atlas/b4).\n"
    )
    ws.apply_changes([TopicChange("topics/core.md", "create", core)], message="core")
    index, view = RecallIndex(ws.root), BranchView(store)
    text = effective_core(ws, index, view)
    assert "FastAPI" in text and "Flask" not in text
    assert "Flask" in effective_core(ws, index), "without the session store nothing is known of branches"
    assert installed_core_if_trusted(ws.root) is not None
    assert installed_core_if_trusted(ws.root, view) is None, "the hook's shortcut defers to the full rendering"
    store.set_head("atlas", "a4")
    swapped = effective_core(ws, index, view)
    assert "Flask" in swapped and "FastAPI" not in swapped


def test_the_view_notices_a_new_branch_even_when_the_head_stays(ws: MemoryWorkspace, store: SessionStore) -> None:
    store.create_session("line", {"provider": "test"})
    store.add_nodes([Node(f"n{i}", "line", f"n{i - 1}" if i else None, "user", NodeKind.USER, f"turn {i}", T0)
                     for i in range(3)], head="n2")  # fmt: skip
    view = BranchView(store)
    assert view.positions("line") == {}
    store.add_nodes([Node("x1", "line", "n0", "user", NodeKind.USER, "another try", T0)])  # no head move
    assert view.positions("line") == {"n1": "current", "n2": "current", "x1": "alternative"}
    assert view.positions("nobody") == {}


def test_a_head_that_moves_during_a_pass_loses_and_repeats_nothing(ws: MemoryWorkspace, store: SessionStore) -> None:
    """The user re-asks while a pass writes the branch: that pass finishes its branch; the next writes the
    new one; every turn is cited once and the statuses follow the head that moved."""
    from tests.checks import records_citing

    store.create_session("atlas", {"provider": "test", "title": "Atlas"})
    first = [n for n in TURNS if n not in ("b3", "b4")]  # the FastAPI branch arrives only during the pass
    store.add_nodes(
        [Node(n, "atlas", TURNS[n][0], str(TURNS[n][1]), TURNS[n][1], TURNS[n][2], T0 + timedelta(minutes=i))
         for i, n in enumerate(first)],
        head="a4",
    )  # fmt: skip
    base = set(first)
    store2_nodes = [
        Node(n, "atlas", p, str(k), k, t, T0 + timedelta(minutes=i))
        for i, (n, (p, k, t)) in enumerate(TURNS.items())
        if n in ("b3", "b4")
    ]

    class MovingWriter(VerbatimWriter):
        moved = False

        def write(self, batch, topics, repair=None):  # type: ignore[no-untyped-def]
            if not self.moved:
                self.moved = True
                store.add_nodes(store2_nodes, head="b4")  # mid-pass: a new branch, and the head on it
            super().write(batch, topics, repair)

    service = WriteService(ws, store, MovingWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0))
    assert service.write("atlas", force=False).ok
    assert base <= {k.rsplit("/", 1)[1] for k in records_citing(ws.root)}, "the branch the pass began with"
    assert service.write("atlas", force=False).ok
    cited = {k.rsplit("/", 1)[1]: v for k, v in records_citing(ws.root).items() if k.startswith("test/atlas/")}
    assert cited == dict.fromkeys(TURNS, 1)
    hits = RecallIndex(ws.root).search("Atlas API Flask FastAPI framework", 10, branches=BranchView(store))
    assert by_node(ws, hits) == {"m1": None, "m2": None, "a3": "alternative", "a4": "alternative",
                                 "b3": "current", "b4": "current"}  # fmt: skip
