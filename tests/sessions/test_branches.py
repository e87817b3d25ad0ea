"""Branch status from the graph's shape: current on the head's path below a fork, alternative on a left branch."""

from __future__ import annotations

from scriptorium.sessions import SessionStore, branch_positions
from tests.sessions_fixtures import chain


def line(*ids: str, parent: str | None = None) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for node in ids:
        out[node] = parent
        parent = node
    return out


def test_a_session_that_never_forked_has_no_branches() -> None:
    assert branch_positions(line("m1", "m2", "m3"), "m3") == {}


def test_the_specs_fork_from_m3() -> None:
    """Nine main-branch messages, then the user goes back to m3: m4–m9 and b4–b9 are the two branches."""
    graph = {**line(*(f"m{n}" for n in range(1, 10))), **line(*(f"b{n}" for n in range(4, 10)), parent="m3")}
    status = branch_positions(graph, "b9")
    assert {n for n in graph if n not in status} == {"m1", "m2", "m3"}, "the shared prefix is on every branch"
    assert {n for n, s in status.items() if s == "current"} == {f"b{n}" for n in range(4, 10)}
    assert {n for n, s in status.items() if s == "alternative"} == {f"m{n}" for n in range(4, 10)}
    back = branch_positions(graph, "m9")  # the user returns to the first branch: the statuses swap
    assert {n for n, s in back.items() if s == "current"} == {f"m{n}" for n in range(4, 10)}


def test_three_way_forks_and_a_fork_inside_a_fork() -> None:
    graph = {
        **line("m1", "m2"),
        **line("a3", "a4", parent="m2"),
        **line("b3", "b4", parent="m2"),
        **line("c3", parent="m2"),
        **line("a5x", parent="a4"),
        **line("a5y", "a6y", parent="a4"),
    }
    status = branch_positions(graph, "a6y")
    assert status["a3"] == status["a4"] == status["a5y"] == status["a6y"] == "current"
    assert status["b3"] == status["b4"] == status["c3"] == status["a5x"] == "alternative"
    assert "m2" not in status
    inner = branch_positions(graph, "a5x")
    assert inner["a4"] == "current" and inner["a5x"] == "current" and inner["a5y"] == "alternative"


def test_a_head_in_the_middle_of_a_branch_keeps_its_descendants_current_only_up_to_it() -> None:
    graph = {**line("m1", "m2", "m3"), **line("b3", parent="m1")}
    status = branch_positions(graph, "m2")
    assert status == {"m2": "current", "m3": "alternative", "b3": "alternative"}


def test_positions_from_a_real_store(store: SessionStore) -> None:
    store.create_session("s")
    store.add_nodes(chain("s", ["m1", "m2", "m3", "m4"]), head="m4")
    store.add_nodes(chain("s", ["b3", "b4"], parent="m2", start=2), head="b4")
    session = store.get_session("s")
    assert session is not None
    assert branch_positions(store.node_parents("s"), session.head) == {
        "b3": "current", "b4": "current", "m3": "alternative", "m4": "alternative",
    }  # fmt: skip


def test_a_head_that_left_its_branch_is_told_apart_from_one_that_moved_on() -> None:
    from scriptorium.sessions import left_behind

    graph = {**line("m1", "m2", "m3", "m4"), **line("b3", "b4", parent="m2")}
    assert left_behind(graph, "m3", "m4") is None, "moved on along its branch"
    assert left_behind(graph, "m4", "m4") is None and left_behind(graph, None, "m4") is None
    assert left_behind(graph, "m4", "b4") == "m4", "jumped to the other branch"
    assert left_behind(graph, "m4", "m2") == "m4", "rewound to an ancestor"
    assert left_behind(graph, "nowhere", "b4") is None


def test_a_side_branch_without_content_is_no_alternative() -> None:
    """A compaction summary (or a progress entry, an empty retry) hanging off the conversation forks nothing."""
    graph = {**line("m1", "m2", "m3", "m4"), **line("summary", parent="m2"), **line("b3", "b4", parent="m2")}
    content = {"m1", "m2", "m3", "m4", "b3", "b4"}
    assert branch_positions({**line("m1", "m2", "m3"), "summary": "m2"}, "m3", {"m1", "m2", "m3"}) == {}
    status = branch_positions(graph, "m4", content)  # a real fork beside it still counts
    assert status == {"m3": "current", "m4": "current", "b3": "alternative", "b4": "alternative"}


def test_content_nodes_from_a_real_store(store: SessionStore) -> None:
    from scriptorium.sessions import Node, NodeKind
    from tests.sessions_fixtures import T0

    store.create_session("s")
    store.add_nodes(chain("s", ["m1", "m2", "m3"]), head="m3")
    extra = [
        Node("sum", "s", "m2", "user", NodeKind.COMPACTION_SUMMARY, "Summary of m1..m2", T0),
        Node("blank", "s", "m2", "assistant", NodeKind.ASSISTANT, " \n\t", T0),
        Node("tool", "s", "m2", "assistant", NodeKind.TOOL_CALL, "ls", T0),
    ]
    store.add_nodes(extra)
    assert store.content_node_ids("s") == {"m1", "m2", "m3"}
    session = store.get_session("s")
    assert session is not None
    assert branch_positions(store.node_parents("s"), session.head, store.content_node_ids("s")) == {}
