"""The Claude Code importer and ``scriptorium ingest`` on real and fixture transcripts."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from scriptorium.producers.claude_code import parse_sessions, read_entries, store_sessions, transcript_files
from scriptorium.sessions import NodeKind, open_store
from tests.checks import by_message, records_citing, tree_problems
from tests.producers.helpers import ingest
from tests.requirements import SHARED_DATA, require

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SHARED = SHARED_DATA / "transcripts" / "claude-code"


def cited(memory: Path) -> Counter[str]:
    """How many records cite each node, read from the files (nothing opens the workspace)."""
    assert tree_problems(memory) == []
    return by_message(records_citing(memory))


def test_compaction_forks_progress_and_agents_map_to_the_right_kinds() -> None:
    session, agent = parse_sessions(transcript_files([DATA]))
    kinds = {node.id: node.kind for node in session.nodes}
    parents = {node.id: node.parent_id for node in session.nodes}
    assert session.id == "comp-session" and session.title == "Compaction fixture"
    assert session.bad_lines == 1
    assert kinds["cb-6"] is NodeKind.SYSTEM and parents["cb-6"] == "a-5", (
        "the boundary re-attaches to its logical parent"
    )
    assert kinds["s-7"] is NodeKind.COMPACTION_SUMMARY
    assert "p-3" not in kinds and parents["u-4"] == "a-2", "progress entries are skipped and re-parented through"
    assert kinds["m-10"] is NodeKind.SYSTEM
    assert "ag-1" not in kinds and "ag-2" not in kinds, "the subagent is a session of its own"
    assert session.head == "m-10"
    assert agent.id == "comp-session.agent-ag-1" and agent.head == "ag-2"
    assert agent.metadata == {"parent_session": "comp-session", "spawn": "subagent"}
    assert [(n.id, n.kind, n.parent_id) for n in agent.nodes] == [
        ("ag-1", NodeKind.USER, None), ("ag-2", NodeKind.ASSISTANT, "ag-1"),
    ]  # fmt: skip
    content = {node.id for node in session.nodes if node.is_content}
    assert content == {"u-1", "a-2", "u-4", "a-5", "u-8", "a-9", "u-8b", "a-9b"}


def test_the_graph_stays_connected_across_the_compaction(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    store_sessions(store, parse_sessions(transcript_files([DATA])))
    branch = [node.id for node in store.get_branch("comp-session")]
    assert branch == ["u-1", "a-2", "u-4", "a-5", "cb-6", "s-7", "u-8b", "a-9b", "m-10"]
    assert set(store.branch_tips("comp-session")) == {"a-9", "m-10"}
    assert [node.id for node in store.get_branch("comp-session.agent-ag-1")] == ["ag-1", "ag-2"]
    store.close()


def test_ingest_writes_every_branch_once_and_nothing_else(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = ingest(state, DATA)
    assert first["sessions"] == 2 and first["records"] == 10 and first["failures"] == []
    counts = cited(state / "memory")
    main = ("u-1", "a-2", "u-4", "a-5", "u-8", "a-9", "u-8b", "a-9b")
    assert counts == Counter({n: 1 for n in (*main, "ag-1", "ag-2")}), "the subagent's prompt and report too"
    topics = {p.name: p.read_text() for p in (state / "memory" / "topics").rglob("*.md")}
    assert not any("Summary: tea and coffee" in t or "/clear" in t for t in topics.values())
    assert sum("Subagent report" in t for t in topics.values()) == 1
    again = ingest(state, DATA)
    assert again["new_nodes"] == 0 and again["records"] == 0 and again["revision"] == first["revision"]


def test_the_example_transcript_of_the_quick_start(tmp_path: Path) -> None:
    result = ingest(tmp_path / "state", ROOT / "examples" / "transcript.jsonl")
    assert result["records"] == 7 and result["sources"] == 7
    assert result["topics"] == ["topics/conversations/2026-11/2026-11-30-planning-the-scriptorium-cluster.md"]


def test_real_claude_code_sessions_are_ingested_exactly_once(tmp_path: Path) -> None:
    require("claude-code-transcripts")
    files = transcript_files([SHARED])
    sessions = parse_sessions(files)
    expected: set[str] = set()
    sidechain = 0
    for path in files:
        for entry in read_entries(path)[0]:
            kept = entry.get("type") in ("user", "assistant", "system")
            sidechain += bool(entry.get("isSidechain") and entry.get("uuid") and kept)
    nodes = [node for session in sessions for node in session.nodes]
    spawned = [n for session in sessions if session.metadata.get("spawn") == "subagent" for n in session.nodes]
    assert len(spawned) == sidechain and all(n.metadata.get("sidechain") for n in spawned)
    assert not any(n.metadata.get("sidechain") for s in sessions if "spawn" not in s.metadata for n in s.nodes)
    for node in nodes:
        if node.kind in (NodeKind.USER, NodeKind.ASSISTANT) and node.content.strip():
            expected.add(node.id)
        assert node.kind is not NodeKind.USER or not node.content.startswith("<command-")
    assert len(expected) > 10
    state = tmp_path / "state"
    first = ingest(state, SHARED)
    assert first["failures"] == []
    counts = cited(state / "memory")
    assert set(counts) == expected and set(counts.values()) == {1}
    again = ingest(state, SHARED)
    assert again["records"] == 0 and again["revision"] == first["revision"]


def test_five_parallel_subagents_are_sessions_spawned_by_their_task_calls() -> None:
    require("claude-code-transcripts")
    sessions = parse_sessions([SHARED / "fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"])
    main = "fe5e1c67-53e7-4862-81ae-d0e013e3270b"
    agents = [s for s in sessions if s.metadata.get("parent_session") == main]
    assert len(agents) == 5 and all(s.metadata["spawn"] == "subagent" for s in agents)
    calls = [s.metadata.get("task_call") for s in agents]
    assert all(isinstance(c, str) and c.startswith("toolu_") for c in calls) and len(set(calls)) == 5
    for agent in agents:  # each its own graph: one root, the prompt its parent's Task call sent
        roots = [n for n in agent.nodes if n.parent_id is None]
        assert len(roots) == 1 and roots[0].kind is NodeKind.USER and all(n.session_id == agent.id for n in agent.nodes)


def test_ingest_rejects_missing_paths(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "scriptorium.cli.main",
            "ingest",
            str(tmp_path / "nope.jsonl"),
            "--state",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 3 and "no such file" in out.stderr
