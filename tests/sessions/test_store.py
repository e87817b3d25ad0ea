"""Session stores: the same behaviour on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scriptorium.errors import InvalidArgument
from scriptorium.sessions import MARKER_KEY, Node, NodeKind, SessionStore, open_store
from tests.sessions_fixtures import T0, chain

WS = "ws1"


def seed(store: SessionStore, session: str = "s1") -> None:
    store.create_session(session, {"provider": "test"}, created_at=T0)
    main = chain(session, [f"m{i}" for i in range(1, 10)])
    store.add_nodes(main, head="m9", updated_at=T0 + timedelta(hours=1))


def ids(nodes: list[Node]) -> list[str]:
    return [n.id for n in nodes]


def test_get_branch_walks_predecessors_in_order(store: SessionStore) -> None:
    seed(store)
    assert ids(store.get_branch("s1")) == [f"m{i}" for i in range(1, 10)]
    assert ids(store.get_branch("s1", "m4")) == ["m1", "m2", "m3", "m4"]
    node = store.get_node("s1", "m2")
    assert node is not None and node.kind is NodeKind.ASSISTANT and node.parent_id == "m1"
    assert node.created_at == T0 + timedelta(minutes=1)


def test_re_adding_nodes_changes_nothing(store: SessionStore) -> None:
    seed(store)
    store.mark_written("s1", ["m1"], WS, "rev")
    again = chain("s1", ["m1", "m2"])
    assert store.add_nodes(again) == 0
    node = store.get_node("s1", "m1")
    assert node is not None and node.written_for(WS)


def test_pending_walks_back_to_the_first_marker(store: SessionStore) -> None:
    seed(store)
    assert ids(store.pending("s1", "m9", WS)) == [f"m{i}" for i in range(1, 10)]
    store.mark_written("s1", [f"m{i}" for i in range(1, 6)], WS, "rev1")
    assert ids(store.pending("s1", "m9", WS)) == ["m6", "m7", "m8", "m9"]
    assert ids(store.pending("s1", "m9", "other-workspace")) == [f"m{i}" for i in range(1, 10)]


def test_a_fork_from_m3_is_pending_without_the_shared_prefix(store: SessionStore) -> None:
    seed(store)
    store.mark_written("s1", [f"m{i}" for i in range(1, 10)], WS, "rev1")
    fork = chain("s1", [f"b{i}" for i in range(4, 10)], parent="m3", start=11)
    store.add_nodes(fork, head="b9")
    assert ids(store.pending("s1", "b9", WS)) == [f"b{i}" for i in range(4, 10)]
    assert ids(store.get_branch("s1")) == ["m1", "m2", "m3", *[f"b{i}" for i in range(4, 10)]]
    assert store.branch_tips("s1") == ["m9", "b9"]


def test_marking_never_changes_updated_at(store: SessionStore) -> None:
    seed(store)
    before = store.get_session("s1")
    store.mark_written("s1", ["m1", "m2", "m3"], WS, "rev1")
    store.mark_written("s1", ["m1"], "ws2", "rev9")
    after = store.get_session("s1")
    assert before is not None and after is not None
    assert after.updated_at == before.updated_at and after.head == before.head
    node = store.get_node("s1", "m1")
    assert node is not None and dict(node.metadata[MARKER_KEY]) == {WS: "rev1", "ws2": "rev9"}


def test_markers_naming_installs_a_restored_copy_lacks_are_dropped_and_only_those(store: SessionStore) -> None:
    seed(store)
    seed(store, "s2")
    seed(store, "s3")
    before = {sid: store.get_session(sid) for sid in ("s1", "s2", "s3")}
    store.mark_written("s1", ["m1", "m2"], WS, "rev1")
    store.mark_written("s1", ["m3"], WS, "rev3")
    store.mark_written("s2", ["m1"], WS, "rev2")
    store.mark_written("s2", ["m1"], "ws2", "rev3")  # another workspace's marker naming the same revision
    store.mark_written("s3", ["m1"], WS, "rev1")
    assert store.unmark_written_except(WS, {"rev1", "rev2"}) == ["s1"]
    assert ids(store.pending("s1", "m9", WS)) == [f"m{i}" for i in range(3, 10)], "rev3's turn is pending again"
    m2, m3 = store.get_node("s2", "m1"), store.get_node("s1", "m3")
    assert m2 is not None and dict(m2.metadata[MARKER_KEY]) == {WS: "rev2", "ws2": "rev3"}
    assert m3 is not None and not m3.written_for(WS)
    assert store.unmark_written_except(WS, {"rev1"}) == ["s2"]
    assert store.unmark_written_except(WS, {"rev1"}) == [], "nothing left to drop"
    assert {sid: store.get_session(sid) for sid in ("s1", "s2", "s3")} == before, "updated_at untouched"


def test_rewound_turns_are_filtered_from_branches_and_tips(store: SessionStore) -> None:
    store.create_session("s1")
    nodes = chain("s1", ["a", "b"])
    rewound = Node("r", "s1", "b", "user", NodeKind.USER, "abandoned", T0, {"rewound": True})
    store.add_nodes([*nodes, rewound], head="b")
    assert ids(store.get_branch("s1", "r")) == ["a", "b"]
    assert store.branch_tips("s1") == []


def test_list_sessions_by_idle_time(store: SessionStore) -> None:
    seed(store, "old")
    store.create_session("new")
    store.set_head("new", "x", updated_at=T0 + timedelta(days=30))
    idle = store.list_sessions(updated_before=T0 + timedelta(days=1))
    assert [s.id for s in idle] == ["old"]
    session = store.get_session("old")
    assert session is not None and session.metadata == {"provider": "test"}


def test_unknown_store_urls_are_rejected() -> None:
    with pytest.raises(InvalidArgument):
        open_store("mysql://nope")


def test_node_parents_is_the_graphs_shape(store: SessionStore) -> None:
    store.create_session("s")
    store.add_nodes(chain("s", ["m1", "m2", "m3"]), head="m3")
    store.add_nodes(chain("s", ["b4"], parent="m2", start=3), head="b4")
    assert store.node_parents("s") == {"m1": None, "m2": "m1", "m3": "m2", "b4": "m2"}
    assert store.node_parents("nobody") == {}


def test_forgetting_erases_text_and_keeps_ids_markers_and_shape(store: SessionStore) -> None:
    seed(store)
    store.create_session("s1", {"title": "a title quoting m1"})
    store.mark_written("s1", ["m1", "m2", "m3"], WS, "rev")
    stone = {"at": "2026-12-01T00:00:00+00:00", "by": "owner", "why": "asked"}
    parents = store.node_parents("s1")
    assert store.forget("s1", ["m2"], stone) == 1
    erased = store.get_node("s1", "m2")
    assert erased is not None and erased.content == "" and erased.metadata["forgotten"] == stone
    assert erased.written_for(WS) and erased.parent_id == "m1"  # identity, shape and markers kept
    assert "m2" not in store.content_node_ids("s1") and "m4" in store.content_node_ids("s1")
    assert store.add_nodes(chain("s1", ["m1", "m2"])) == 0  # a re-import brings nothing back
    assert store.get_node("s1", "m2").content == ""  # type: ignore[union-attr]
    assert store.forget("s1", None, stone) == 9  # the whole session
    assert store.content_node_ids("s1") == set() and store.node_parents("s1") == parents
    session = store.get_session("s1")
    assert session is not None and "title" not in session.metadata and session.metadata["forgotten"] == stone
    assert store.compact() is True
    assert all(n.content == "" for n in store.get_branch("s1"))


def test_rewriting_a_session_changes_only_its_strings(store: SessionStore) -> None:
    """``rewrite`` (a redaction) applies to every string of the session — node content and metadata, the
    session's title — in place: IDs, shape and markers stay; a dry run only counts; a second run finds none."""
    seed(store)
    seed(store, "s2")
    store.create_session("s1", {"title": "the title about m1"})
    store.mark_written("s1", ["m1", "m2"], WS, "rev")
    parents = store.node_parents("s1")

    def text(value: str) -> str:
        return value.replace("about m1", "[x]")

    said = store.get_node("s1", "m1").content  # type: ignore[union-attr]
    assert store.rewrite("s1", text, dry_run=True) == 2  # the node m1 and the title
    assert store.get_node("s1", "m1").content == said  # type: ignore[union-attr]
    assert store.rewrite("s1", text) == 2
    node = store.get_node("s1", "m1")
    assert node is not None and node.content == text(said) != said and node.written_for(WS)
    assert store.node_parents("s1") == parents
    session = store.get_session("s1")
    assert session is not None and session.metadata["title"] == "the title [x]"
    assert store.get_node("s2", "m1").content == said, "another session is untouched"  # type: ignore[union-attr]
    assert store.rewrite("s1", text) == 0
    assert store.compact() is True
