"""The Codex CLI rollout importer: generated rollouts with every line type, and the real one in ../shared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scriptorium.producers.codex import parse_increment
from scriptorium.producers.importing import read_increment
from scriptorium.sessions import NodeKind
from tests.helpers.transcripts import codex_line as line
from tests.helpers.transcripts import codex_message as message
from tests.helpers.transcripts import rollout, write
from tests.producers.helpers import cited_once, ingest, nodes_of
from tests.requirements import SHARED_DATA, require

SHARED = SHARED_DATA / "transcripts" / "codex"


def test_every_line_type_maps_to_the_right_kind(tmp_path: Path) -> None:
    path = write(tmp_path / "rollout.jsonl", rollout())
    (session,), state = parse_increment(read_increment(path, None))
    kinds = [(n.kind, n.content[:20]) for n in session.nodes]
    content = [n.content for n in session.nodes if n.kind in (NodeKind.USER, NodeKind.ASSISTANT)]
    assert content == [
        "Please move the billing job to the nightly queue",
        "The billing job now runs in the nightly queue",
        "Also keep the retries at three",
        "Retries stay at three",
    ], kinds
    by_kind = {kind: sum(n.kind is kind for n in session.nodes) for kind in NodeKind}
    assert by_kind[NodeKind.TOOL_CALL] == 4 and by_kind[NodeKind.TOOL_RESULT] == 2
    assert by_kind[NodeKind.COMPACTION_SUMMARY] == 1 and by_kind[NodeKind.SYSTEM] == 3
    assert all("SECRET" not in n.content for n in session.nodes if n.kind is NodeKind.TOOL_CALL)
    results = [n for n in session.nodes if n.kind is NodeKind.TOOL_RESULT]
    assert [r.metadata["call_node"] for r in results] == ["l10", "l12"], "outputs paired with their calls"
    assert session.skipped == {"brand_new_line_type": 1} and session.bad_lines == 1
    assert session.metadata["cwd"] == "/srv/app" and state["session"] == session.id
    parents = [n.parent_id for n in session.nodes]
    assert parents == [None, *[n.id for n in session.nodes[:-1]]], "a rollout is one linear chain"
    assert session.head == session.nodes[-1].id


def test_ingest_writes_each_message_once_and_nothing_excluded(tmp_path: Path) -> None:
    path = write(tmp_path / "codex" / "sessions" / "2026" / "11" / "02" / "rollout-a.jsonl", rollout())
    state = tmp_path / "state"
    first = ingest(state, tmp_path / "codex" / "sessions")
    assert first["formats"] == {"codex": 1} and first["records"] == 4
    memory = (state / "memory" / "topics").rglob("*.md")
    assert not any("SECRET" in p.read_text() for p in memory), "nothing excluded is ever written"
    cited_once(state / "memory", nodes_of(state, "019b0000-aaaa"))
    again = ingest(state, path)
    assert again["records"] == 0 and again["revision"] == first["revision"] and again["lines_read"] == 0


def test_a_forked_rollout_links_its_parent_and_writes_the_shared_prefix_once(tmp_path: Path) -> None:
    parent = rollout("parent-1")
    fork = [
        *rollout("fork-1", forked_from="parent-1"),
        line(30, "response_item", message("user", "On this fork, use a weekly queue instead")),
        line(31, "response_item", message("assistant", "The fork uses a weekly queue")),
    ]
    write(tmp_path / "sessions" / "2026" / "a-parent.jsonl", parent)
    write(tmp_path / "sessions" / "2026" / "b-fork.jsonl", fork)
    state = tmp_path / "state"
    result = ingest(state, tmp_path / "sessions")
    assert result["records"] == 6, "four in the parent, two new on the fork"
    fork_nodes = nodes_of(state, "fork-1")
    copies = [n for n in fork_nodes if "copy_of" in n.metadata]
    assert len(copies) == 4 and all(n.kind is NodeKind.SYSTEM for n in copies)
    from scriptorium.sessions import open_store

    store = open_store(f"sqlite:///{state / 'sessions' / 'sessions.db'}")
    session = store.get_session("fork-1")
    store.close()
    assert session is not None and session.metadata["parent_session"] == "parent-1"


def test_the_real_codex_rollout_is_ingested_exactly_once(tmp_path: Path) -> None:
    require("codex-transcripts")
    state = tmp_path / "state"
    first = ingest(state, SHARED)
    assert first["failures"] == [] and first["formats"] == {"codex": len(list(SHARED.glob("*.jsonl")))}
    memory = state / "memory"
    for topic in (memory / "topics").rglob("*.md"):
        text = topic.read_text()
        assert "<environment_context>" not in text and "AGENTS.md" not in text
    expected = [n for session_id in first["session_ids"] for n in nodes_of(state, session_id)]
    assert sum(n.kind is NodeKind.USER for n in expected) >= 1
    cited_once(memory, expected)
    again = ingest(state, SHARED)
    assert again["records"] == 0 and again["revision"] == first["revision"]


@pytest.mark.parametrize("where", ["line", "item"])
def test_a_compactions_output_is_never_written_as_a_reply(tmp_path: Path, where: str) -> None:
    """Codex 0.171 writes the compaction summary as an assistant response_item marked
    ``metadata.compaction_output``: a node of its own kind, never content; the turns after it are."""
    summary = message("assistant", "SECRET-SUMMARY of everything so far")
    marked = {**summary, "metadata": {"compaction_output": True}} if where == "item" else summary
    compacted = json.loads(line(20, "response_item", marked))
    if where == "line":
        compacted["metadata"] = {"compaction_output": True}
    lines = [
        *rollout()[:6],
        line(21, "response_item", message("assistant", "The billing job now runs nightly")),
        json.dumps(compacted),
        line(22, "response_item", message("user", "Thanks, and the retries?")),
    ]
    (session,), _ = parse_increment(read_increment(write(tmp_path / "rollout.jsonl", lines), None))
    content = [n.content for n in session.nodes if n.is_content]
    assert content[-2:] == ["The billing job now runs nightly", "Thanks, and the retries?"]
    assert not any("SECRET-SUMMARY" in text for text in content)
    (node,) = [n for n in session.nodes if n.metadata.get("codex_type") == "compaction_output"]
    assert node.kind is NodeKind.COMPACTION_SUMMARY


THREAD = "019b0000-0000-7000-8000-00000000aaaa"
SECOND = "019b0000-0001-7000-8000-0000000bbbbb"
THIRD = "019b0000-0002-7000-8000-000000cccccc"


def turn(n: int, question: str, answer: str) -> list[str]:
    """One turn as Codex 0.171 writes it: task events around the two messages (five lines)."""
    return [
        line(n, "event_msg", {"type": "task_started"}),
        line(n + 1, "response_item", message("user", question)),
        line(n + 2, "response_item", message("assistant", answer)),
        line(n + 3, "event_msg", {"type": "token_count"}),
        line(n + 4, "event_msg", {"type": "task_complete"}),
    ]


def meta(base: tuple[str, int] | None = None) -> str:
    payload: dict[str, Any] = {"id": THREAD, "cwd": "/srv/app", "cli_version": "0.171.0"}
    if base is not None:
        payload["history_base"] = {"thread_id": base[0], "end_ordinal_exclusive": base[1], "end_byte_offset": 1}
    return line(0, "session_meta", payload)


def test_a_reverted_thread_is_one_graph_whose_reverted_turns_are_the_other_branch(tmp_path: Path) -> None:
    """``thread/revert`` goes on in a new rollout of the same thread (``…_<rollout>.jsonl``) naming the history
    it continues and where it is cut (Codex 0.171): its lines' IDs never meet the first file's, it hangs
    under the last turn kept, and the turns reverted stay as the branch left. A revert of the continuation
    is cut in the ordinals of the continued history (the first file's lines, then the second's)."""
    day = tmp_path / "sessions" / "2026" / "12" / "02"
    # First rollout: meta (ordinal 0), turn A (1-5), turn B (6-10).
    write(
        day / f"rollout-2026-12-02T10-00-00-{THREAD}.jsonl",
        [meta(), *turn(1, "Question A", "Answer A"), *turn(6, "Question B", "Answer B")],
    )
    # Reverted before B (ordinal 6): meta (6), B' (7-11), C (12-16).
    second = [meta((THREAD, 6)), *turn(1, "Question B again", "Answer B again"), *turn(6, "Question C", "Answer C")]
    write(day / f"rollout-2026-12-02T10-00-01-{THREAD}_{SECOND}.jsonl", second)
    # That one reverted before C (ordinal 6 + 6 = 12): C' follows B'.
    write(
        day / f"rollout-2026-12-02T10-00-02-{THREAD}_{THIRD}.jsonl",
        [meta((SECOND, 12)), *turn(1, "Question C again", "Answer C again")],
    )
    state = tmp_path / "state"
    result = ingest(state, tmp_path / "sessions")
    assert result["records"] == 10, "five turns on three branches, each message once"
    nodes = nodes_of(state, THREAD)
    assert len({n.id for n in nodes}) == len(nodes) == 10
    from scriptorium.sessions import open_store

    store = open_store(f"sqlite:///{state / 'sessions' / 'sessions.db'}")
    try:
        session = store.get_session(THREAD)
        assert session is not None and session.title == "Question A · 0000aaaa", "the first rollout names the thread"
        branches = sorted(
            [n.content for n in store.get_branch(THREAD, tip) if n.is_content] for tip in store.branch_tips(THREAD)
        )
        head = [n.content for n in store.get_branch(THREAD) if n.is_content]
    finally:
        store.close()
    assert head == [
        "Question A",
        "Answer A",
        "Question B again",
        "Answer B again",
        "Question C again",
        "Answer C again",
    ]
    assert branches == [
        ["Question A", "Answer A", "Question B", "Answer B"],
        ["Question A", "Answer A", "Question B again", "Answer B again", "Question C", "Answer C"],
        head,
    ]
    cited_once(state / "memory", nodes)
    again = ingest(state, tmp_path / "sessions")
    assert again["records"] == 0 and again["lines_read"] == 0


def _pair(n: int, role: str, text: str, event_first: bool = False) -> list[str]:
    """One message as Codex writes it: its response_item and its event copy."""
    event = "user_message" if role == "user" else "agent_message"
    pair = [line(n, "response_item", message(role, text)), line(n + 1, "event_msg", {"type": event, "message": text})]
    return pair[::-1] if event_first else pair


def test_a_short_message_said_again_is_a_message_again(tmp_path: Path) -> None:
    """ "continue" after an interrupted turn, "yes" twice: each time the user says it is a message of its own,
    whichever copy comes first; only a copy pairs with its other copy."""
    lines = [
        line(0, "session_meta", {"id": "019b0000-rep", "cwd": "/srv/app"}),
        *_pair(1, "user", "continue"),
        line(3, "event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
        *_pair(4, "user", "continue", event_first=True),
        *_pair(6, "assistant", "Continuing with the migration"),
        *_pair(8, "user", "yes"),
        *_pair(10, "assistant", "Applied"),
        *_pair(12, "user", "yes", event_first=True),
        *_pair(14, "assistant", "Applied"),
    ]
    path = write(tmp_path / "rollout.jsonl", lines)
    (session,), _state = parse_increment(read_increment(path, None))
    said = [(n.role, n.content) for n in session.nodes if n.kind in (NodeKind.USER, NodeKind.ASSISTANT)]
    assert said == [
        ("user", "continue"),
        ("user", "continue"),
        ("assistant", "Continuing with the migration"),
        ("user", "yes"),
        ("assistant", "Applied"),
        ("user", "yes"),
        ("assistant", "Applied"),
    ]


@pytest.mark.parametrize("event_first", [False, True], ids=["item first", "event first"])
def test_the_two_copies_of_a_message_split_across_two_imports_are_one_message(
    tmp_path: Path, event_first: bool
) -> None:
    """The import stops between a message's two copies (the runtime had written one): the next import
    pairs the other copy with it, and ingest writes the message once."""
    path = tmp_path / "codex" / "sessions" / "rollout-split.jsonl"
    head = [
        line(0, "session_meta", {"id": "019b0000-split", "cwd": "/srv/app"}),
        *_pair(1, "user", "Ship it", event_first)[:1],
    ]
    write(path, head)
    state = tmp_path / "state"
    ingest(state, path)
    rest = [
        *_pair(1, "user", "Ship it", event_first)[1:],
        *_pair(3, "assistant", "Shipped"),
        *_pair(5, "user", "Ship it"),
    ]
    write(path, [*head, *rest])
    ingest(state, path)
    said = [
        (n.role, n.content) for n in nodes_of(state, "019b0000-split") if n.kind in (NodeKind.USER, NodeKind.ASSISTANT)
    ]
    assert sorted(said) == sorted([("user", "Ship it"), ("assistant", "Shipped"), ("user", "Ship it")])
    cited_once(state / "memory", nodes_of(state, "019b0000-split"))


def test_a_thread_rolled_back_in_its_own_rollout_leaves_the_dropped_turns_as_the_other_branch(
    tmp_path: Path,
) -> None:
    """``thread/rollback`` (and the TUI's backtrack) drops the thread's last turns in place: the rollout gains a
    ``thread_rolled_back`` event (``num_turns``) and goes on in the same file. The dropped turns stay, as the
    branch left; the head goes back to before them at once (before any new turn), and the turn asked again hangs
    there. Node IDs are the lines', so importing again changes nothing."""
    from scriptorium.recall.branches import BranchView
    from scriptorium.sessions import open_store
    from scriptorium.workspace.paths import source_path

    day = tmp_path / "sessions" / "2026" / "12" / "02"
    path = write(
        day / f"rollout-2026-12-02T10-00-00-{THREAD}.jsonl",
        [
            meta(),
            *turn(1, "Question A", "Answer A"),
            *turn(6, "Question B", "Answer B"),
            *turn(11, "Question C", "Answer C"),
            line(16, "event_msg", {"type": "thread_rolled_back", "num_turns": 2}),
        ],
    )
    state = tmp_path / "state"
    ingest(state, tmp_path / "sessions")
    url = f"sqlite:///{state / 'sessions' / 'sessions.db'}"
    store = open_store(url)
    try:
        assert [n.content for n in store.get_branch(THREAD) if n.is_content] == ["Question A", "Answer A"]
    finally:
        store.close()
    with path.open("a") as out:
        out.write("\n".join(turn(17, "Question B again", "Answer B again")) + "\n")
    ingest(state, tmp_path / "sessions")
    nodes = nodes_of(state, THREAD)
    store = open_store(url)
    try:
        head = [n.content for n in store.get_branch(THREAD) if n.is_content]
        branches = sorted(
            [n.content for n in store.get_branch(THREAD, tip) if n.is_content] for tip in store.branch_tips(THREAD)
        )
        by_text = {n.content: n.id for n in nodes if n.is_content}
        status = BranchView(store)(
            [[source_path("codex", THREAD, by_text[text])] for text in ("Answer A", "Question B", "Answer C")]
            + [[source_path("codex", THREAD, by_text["Question B again"])]]
        )
    finally:
        store.close()
    assert head == ["Question A", "Answer A", "Question B again", "Answer B again"]
    assert branches == [
        ["Question A", "Answer A", "Question B", "Answer B", "Question C", "Answer C"],
        ["Question A", "Answer A", "Question B again", "Answer B again"],
    ]
    assert status == [None, "alternative", "alternative", "current"]
    cited_once(state / "memory", nodes)
    again = ingest(state, tmp_path / "sessions")
    assert again["records"] == 0 and nodes_of(state, THREAD) == nodes
