"""Shared steps of the importer tests: run ``scriptorium ingest``, read back what was stored and cited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from scriptorium.sessions import Node, NodeKind, open_store
from tests.checks import records_citing, tree_problems

ROOT = Path(__file__).resolve().parents[2]


def ingest(state: Path, *paths: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-m", "scriptorium.cli.main", "ingest", *map(str, paths), "--state", str(state), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def nodes_of(state: Path, session_id: str) -> list[Node]:
    """Every node of a session, on every branch (each once)."""
    store = open_store(f"sqlite:///{state / 'sessions' / 'sessions.db'}")
    try:
        found: dict[str, Node] = {}
        for tip in store.branch_tips(session_id):
            for node in store.get_branch(session_id, tip):
                found.setdefault(node.id, node)
        return list(found.values())
    finally:
        store.close()


def cited_once(memory: Path, nodes: list[Node]) -> None:
    """Every user message and reply among ``nodes`` is cited by exactly one record; no other node is cited."""
    assert tree_problems(memory) == []
    by_turn: dict[tuple[str, str], int] = {}
    for identity, count in records_citing(memory).items():
        _provider, thread, message = identity.split("/", 2)
        by_turn[(thread, message)] = by_turn.get((thread, message), 0) + count
    sessions = {n.session_id for n in nodes}
    content = {
        (n.session_id, n.id) for n in nodes if n.kind in (NodeKind.USER, NodeKind.ASSISTANT) and n.content.strip()
    }
    cited = {turn for turn in by_turn if turn[0] in sessions}
    assert cited == content, (sorted(cited - content)[:5], sorted(content - cited)[:5])
    assert {by_turn[turn] for turn in cited} <= {1}, "a turn is cited by more than one record"
