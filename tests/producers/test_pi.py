"""The pi coding-agent importer: a generated v3 tree with branches and every entry type, and real v1 files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from scriptorium.producers.importing import read_increment
from scriptorium.producers.pi import parse_increment
from scriptorium.sessions import NodeKind
from tests.producers.helpers import cited_once, ingest, nodes_of
from tests.requirements import SHARED_DATA, require

SHARED = SHARED_DATA / "transcripts" / "pi-mono"


def entry(kind: str, entry_id: str, parent: str | None, **fields: Any) -> str:
    return json.dumps({"type": kind, "id": entry_id, "parentId": parent, "timestamp": "2026-11-03T09:00:00Z", **fields})


def msg(entry_id: str, parent: str | None, role: str, content: Any, **extra: Any) -> str:
    return entry("message", entry_id, parent, message={"role": role, "content": content, **extra})


def tree() -> list[str]:
    """Two branches from u2's reply: the user went back and tried FastAPI after Flask."""
    return [
        json.dumps(
            {"type": "session", "version": 3, "id": "pi-tree", "timestamp": "2026-11-03T09:00:00Z", "cwd": "/w"}
        ),
        entry("model_change", "mc", None, provider="anthropic", modelId="claude"),
        entry("thinking_level_change", "tl", "mc", thinkingLevel="high"),
        msg("u1", "tl", "user", [{"type": "text", "text": "Start a web service for the invoices"}]),
        msg(
            "a1",
            "u1",
            "assistant",
            [
                {"type": "thinking", "thinking": "SECRET-THINKING"},
                {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": "SECRET-ARGS"}},
            ],
        ),
        msg("r1", "a1", "toolResult", [{"type": "text", "text": "SECRET-RESULT"}], toolCallId="t1"),
        msg("a2", "r1", "assistant", [{"type": "text", "text": "The invoice service skeleton is ready"}]),
        entry("label", "lb", "a2", targetId="a2", label="SECRET-LABEL"),
        msg("u2", "lb", "user", "Use Flask for it"),
        msg("a3", "u2", "assistant", [{"type": "text", "text": "Switched the service to Flask"}]),
        msg("b1", "a3", "bashExecution", "SECRET-BASH", command="ls"),
        entry("custom", "cu", "b1", customType="ext", data={"x": "SECRET-CUSTOM"}),
        entry("custom_message", "cm", "cu", customType="ext", content="SECRET-CUSTOM-MESSAGE", display=True),
        entry("compaction", "cp", "cm", summary="SECRET-COMPACTION", firstKeptEntryId="u2", tokensBefore=100),
        # The user goes back to a2 and tries another framework: a real fork of the same session.
        entry("branch_summary", "bs", "a2", fromId="cp", summary="SECRET-BRANCH-SUMMARY"),
        msg("u3", "bs", "user", "Actually use FastAPI"),
        msg("a4", "u3", "assistant", [{"type": "text", "text": "Switched the service to FastAPI"}]),
        entry("session_info", "si", "a4", name="Invoice service"),
        entry("future_entry_type", "fx", "si", whatever="SECRET-UNKNOWN"),
        "not json at all",
    ]


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_v3_tree_keeps_both_branches_and_the_leaf_is_the_head(tmp_path: Path) -> None:
    (session,), _state = parse_increment(read_increment(write(tmp_path / "s.jsonl", tree()), None))
    nodes = {n.id: n for n in session.nodes}
    assert session.title == "Invoice service" and session.head == "a4"
    assert nodes["u1"].parent_id is None, "re-parented through model and thinking changes"
    assert nodes["u2"].parent_id == "a2", "re-parented through the label"
    assert nodes["bs"].parent_id == "a2" and nodes["u3"].parent_id == "bs"
    assert nodes["cp"].parent_id == "b1", "re-parented through custom entries"
    kinds = {n.id: n.kind for n in session.nodes}
    assert kinds["a1"] is NodeKind.TOOL_CALL and kinds["r1"] is NodeKind.TOOL_RESULT
    assert kinds["b1"] is NodeKind.SYSTEM and kinds["cp"] is kinds["bs"] is NodeKind.COMPACTION_SUMMARY
    assert not any("SECRET" in n.content for n in session.nodes if n.kind in (NodeKind.USER, NodeKind.ASSISTANT))
    assert not any("SECRET" in n.content for n in session.nodes if n.kind in (NodeKind.TOOL_CALL, NodeKind.TOOL_RESULT))
    assert session.skipped == {"future_entry_type": 1} and session.bad_lines == 1


def test_every_branch_is_written_the_shared_prefix_once_and_nothing_excluded(tmp_path: Path) -> None:
    write(tmp_path / "pi" / "sessions" / "--w--" / "s.jsonl", tree())
    state = tmp_path / "state"
    first = ingest(state, tmp_path / "pi" / "sessions")
    assert first["formats"] == {"pi": 1} and first["records"] == 6
    for topic in (state / "memory" / "topics").rglob("*.md"):
        assert "SECRET" not in topic.read_text()
    cited_once(state / "memory", nodes_of(state, "pi-tree"))
    again = ingest(state, tmp_path / "pi" / "sessions")
    assert again["records"] == 0 and again["revision"] == first["revision"]


def test_the_framework_the_user_went_back_from_is_the_alternative(tmp_path: Path) -> None:
    """The tree's two tries, Flask then FastAPI from the same point: FastAPI is where the leaf is."""
    from scriptorium.recall.branches import BranchView
    from scriptorium.recall.index import RecallIndex
    from scriptorium.sessions import open_store

    write(tmp_path / "pi" / "sessions" / "--w--" / "s.jsonl", tree())
    state = tmp_path / "state"
    ingest(state, tmp_path / "pi" / "sessions")
    store = open_store(f"sqlite:///{state / 'sessions' / 'sessions.db'}")
    try:
        hits = RecallIndex(state / "memory").search(
            "switched the service to Flask FastAPI", 10, branches=BranchView(store)
        )
    finally:
        store.close()
    status = {h.snippet.split(": ", 1)[-1]: h.branch for h in hits}
    assert status["Switched the service to FastAPI"] == "current"
    assert status["Switched the service to Flask"] == "alternative"
    assert status["The invoice service skeleton is ready"] is None, "before the fork: every branch's"


def test_a_branched_session_is_continued_from_its_parent(tmp_path: Path) -> None:
    header = {"type": "session", "version": 3, "id": "pi-child", "timestamp": "2026-11-03T09:00:00Z", "cwd": "/w",
              "parentSession": "pi-tree"}  # fmt: skip
    lines = [json.dumps(header), msg("c1", None, "user", "Carry on from the invoice service")]
    (session,), _state = parse_increment(read_increment(write(tmp_path / "c.jsonl", lines), None))
    assert session.metadata["parent_session"] == "pi-tree" and session.metadata["spawn"] == "fork"


def test_a_v1_linear_file_chains_its_entries(tmp_path: Path) -> None:
    lines = [
        json.dumps({"type": "session", "id": "pi-v1", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"}),
        json.dumps({"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "hi"}]}}),
        json.dumps({"type": "thinking_level_change", "thinkingLevel": "off"}),
        json.dumps({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": "hey"}]}}),
    ]
    (session,), state = parse_increment(read_increment(write(tmp_path / "v1.jsonl", lines), None))
    assert [(n.id, n.parent_id) for n in session.nodes] == [("l2", None), ("l4", "l2")]
    assert state["version"] == 1 and session.head == "l4"


def test_the_real_pi_session_is_ingested_exactly_once(tmp_path: Path) -> None:
    require("pi-transcripts")
    state = tmp_path / "state"
    first = ingest(state, SHARED)
    assert first["failures"] == [] and first["formats"] == {"pi": 1}
    nodes = [n for session_id in first["session_ids"] for n in nodes_of(state, session_id)]  # type: ignore[attr-defined]
    assert sum(n.kind is NodeKind.TOOL_RESULT for n in nodes) > 300, "tool results are nodes, never written"
    cited_once(state / "memory", nodes)
    again = ingest(state, SHARED)
    assert again["records"] == 0 and again["revision"] == first["revision"]


def test_untitled_sessions_started_in_the_same_minute_get_topics_of_their_own(tmp_path: Path) -> None:
    """pi names a session only when asked; two untitled ones of one minute have UUIDv7s that share their first
    eight characters, and used to share the topic "Session 019b3a2c". Each is titled by its first message and
    the end of its ID; its topic file is named by its whole ID, and its heading carries the title."""
    folder = tmp_path / "pi" / "sessions" / "--w--"
    ids = ["019b3a2c-1111-7aaa-8aaa-000000000001", "019b3a2c-2222-7bbb-8bbb-000000000002"]
    for sid in ids:
        lines = [
            json.dumps({"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-03T09:00:00Z", "cwd": "/w"}),
            msg(
                "u1",
                None,
                "user",
                "Plan the   release\nnotes for   the invoice service, then the changelog entries too",
            ),
            msg("a1", "u1", "assistant", [{"type": "text", "text": f"Planned, in {sid[-4:]}"}]),
        ]
        (folder / f"{sid}.jsonl").parent.mkdir(parents=True, exist_ok=True)
        (folder / f"{sid}.jsonl").write_text("\n".join(lines) + "\n")
    state = tmp_path / "state"
    ingest(state, folder)
    from scriptorium.sessions import open_store
    from scriptorium.settings import Settings

    store = open_store(Settings(state=state).session_store_url)
    titles = [store.get_session(sid).title for sid in ids]  # type: ignore[union-attr]
    store.close()
    assert titles == [
        "Plan the release notes for the invoice service… · 00000001",
        "Plan the release notes for the invoice service… · 00000002",
    ]
    topics = sorted(p for p in (state / "memory" / "topics").rglob("*.md") if "session-019b3a2c" in p.name)
    assert len(topics) == 2 and all(sid in p.name for sid, p in zip(ids, topics, strict=True)), topics
    assert [p.read_text().splitlines()[0] for p in topics] == [f"# {title}" for title in titles]


def test_a_fork_names_its_parent_by_path_and_repeats_its_prefix_which_is_written_once(tmp_path: Path) -> None:
    """pi's /fork writes a new file: its header names the parent by file path, its first entries repeat the
    parent's with the same IDs. The parent is resolved to its session, the prefix is written once (the
    parent's), and the fork's own turns are a branch continued from it."""
    folder = tmp_path / "pi" / "sessions" / "--w--"
    folder.mkdir(parents=True)

    def header(sid: str, **extra: Any) -> str:
        return json.dumps({"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-03T09:00:00Z", **extra})

    prefix = [
        msg("u1", None, "user", "Draft the quarterly report outline"),
        msg("a1", "u1", "assistant", [{"type": "text", "text": "Outline: revenue, costs, hiring"}]),
    ]
    parent = folder / "2026-11-03T09-00-00_pi-parent.jsonl"
    parent.write_text("\n".join([header("pi-parent"), *prefix, msg("u2", "a1", "user", "Add a risks section")]) + "\n")
    fork = folder / "2026-11-03T09-05-00_pi-fork.jsonl"
    own = [
        msg("u9", "a1", "user", "Make it a slide deck instead"),
        msg("a9", "u9", "assistant", [{"type": "text", "text": "Deck: five slides"}]),
    ]
    fork.write_text("\n".join([header("pi-fork", parentSession=str(parent)), *prefix, *own]) + "\n")
    state = tmp_path / "state"
    ingest(state, folder)
    from scriptorium.sessions import open_store
    from scriptorium.settings import Settings
    from tests.checks import records_citing

    store = open_store(Settings(state=state).session_store_url)
    forked = store.get_session("pi-fork")
    store.close()
    assert forked is not None and forked.metadata["parent_session"] == "pi-parent"
    cited = records_citing(state / "memory")
    mine = {k: v for k, v in cited.items() if k.startswith("pi/")}
    assert mine == {
        "pi/pi-parent/u1": 1,
        "pi/pi-parent/a1": 1,
        "pi/pi-parent/u2": 1,
        "pi/pi-fork/u9": 1,
        "pi/pi-fork/a9": 1,
    }


def test_a_forks_turns_are_current_and_the_parents_turns_after_the_fork_point_the_alternative(
    tmp_path: Path,
) -> None:
    """A fork is a branch like any other: where the parent and its fork part (after the prefix the fork repeats),
    the branch the conversation went on in (the session changed last) is ``current``, the one it left
    ``alternative``, and the shared prefix neither. Going back to the parent and going on there swaps the two."""
    from scriptorium.recall.branches import BranchView
    from scriptorium.sessions import open_store
    from scriptorium.settings import Settings
    from scriptorium.workspace.paths import source_path

    folder = tmp_path / "pi" / "sessions" / "--w--"
    folder.mkdir(parents=True)

    def header(sid: str, **extra: Any) -> str:
        return json.dumps({"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-03T09:00:00Z", **extra})

    def at(line: str, minute: int) -> str:
        return line.replace("2026-11-03T09:00:00Z", f"2026-11-03T09:{minute:02d}:00Z")

    prefix = [
        msg("u1", None, "user", "Draft the quarterly report outline"),
        msg("a1", "u1", "assistant", [{"type": "text", "text": "Outline: revenue, costs, hiring"}]),
    ]
    parent = folder / "2026-11-03T09-00-00_pi-parent.jsonl"
    parent.write_text(
        "\n".join([header("pi-parent"), *prefix, at(msg("u2", "a1", "user", "Add a risks section"), 1)]) + "\n"
    )
    fork = folder / "2026-11-03T09-05-00_pi-fork.jsonl"
    own = [
        at(msg("u9", "a1", "user", "Make it a slide deck instead"), 5),
        at(msg("a9", "u9", "assistant", [{"type": "text", "text": "Deck: five slides"}]), 5),
    ]
    fork.write_text("\n".join([header("pi-fork", parentSession=str(parent)), *prefix, *own]) + "\n")
    state = tmp_path / "state"
    ingest(state, folder)
    cited = [
        [source_path("pi", thread, message)]
        for thread, message in [("pi-parent", "u1"), ("pi-parent", "u2"), ("pi-fork", "u9"), ("pi-fork", "a9")]
    ]
    store = open_store(Settings(state=state).session_store_url)
    try:
        assert BranchView(store)(cited) == [None, "alternative", "current", "current"]
        with parent.open("a") as out:  # the user goes back to the parent and goes on there
            out.write(at(msg("a2", "u2", "assistant", [{"type": "text", "text": "Risks added"}]), 9) + "\n")
    finally:
        store.close()
    ingest(state, folder)
    store = open_store(Settings(state=state).session_store_url)
    try:
        assert BranchView(store)(cited) == [None, "current", "alternative", "alternative"], "back on the parent"
    finally:
        store.close()


def test_the_title_an_untitled_session_takes_from_its_first_message_goes_with_a_forget_of_the_session(
    tmp_path: Path,
) -> None:
    """The title is the first message's words: after ``memory forget --session --purge-history`` no file under
    the state folder (the session store, the index, the topics, git's objects) holds them, and importing the
    same transcript again does not bring the title back."""
    import subprocess
    import sys

    from tests.producers.helpers import ROOT

    folder = tmp_path / "pi" / "sessions" / "--w--"
    sid = "019b3a2c-3333-7ccc-8ccc-000000000003"
    header = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-03T09:00:00Z", "cwd": "/w"}
    lines = [
        json.dumps(header),
        msg("u1", None, "user", "Plan the Quillfeather expedition route"),
        msg("a1", "u1", "assistant", [{"type": "text", "text": "Planned: the northern pass."}]),
    ]
    write(folder / f"{sid}.jsonl", lines)
    state = tmp_path / "state"
    ingest(state, folder)

    def holding() -> list[str]:
        files = [p for p in sorted(state.rglob("*")) if p.is_file()]
        found = [str(p.relative_to(state)) for p in files if b"quillfeather" in p.read_bytes().lower()]
        objects = subprocess.run(
            ["git", "-C", str(state / "memory"), "cat-file", "--batch-all-objects", "--batch"], capture_output=True
        ).stdout
        return found + (["git objects"] if b"quillfeather" in objects.lower() else [])

    assert holding(), "the title and the message are stored before the forget"
    forget = [sys.executable, "-m", "scriptorium.cli.main", "memory", "forget", "--session", sid, "--purge-history"]
    done = subprocess.run([*forget, "--state", str(state), "--json"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert holding() == []
    ingest(state, folder)
    assert holding() == [], "importing the transcript again brings neither the text nor the title back"
