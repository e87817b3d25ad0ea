"""Where a session ran, as the importers record it (issue 58): Codex's git fields of its session_meta, Claude
Code's branch per turn, and the project each import stores with the session."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from scriptorium.producers.claude_code import parse_increment as claude_increment
from scriptorium.producers.codex import parse_increment as codex_increment
from scriptorium.producers.importing import read_increment
from scriptorium.sessions import NodeKind, open_store
from tests.helpers.transcripts import cc, codex_line, rollout, write
from tests.producers.helpers import ingest


def test_codex_records_the_repository_its_session_started_in(tmp_path: Path) -> None:
    lines = rollout()
    first = json.loads(lines[0])
    git = {"commit_hash": "4b1d2c3", "branch": "feature/nightly", "repository_url": "git@github.com:acme/billing.git"}
    lines[0] = codex_line(0, "session_meta", {**first["payload"], "git": git})
    (session,), _ = codex_increment(read_increment(write(tmp_path / "rollout.jsonl", lines), None))
    assert {k: session.metadata[k] for k in ("git_remote", "git_branch", "git_commit")} == {
        "git_remote": "git@github.com:acme/billing.git",
        "git_branch": "feature/nightly",
        "git_commit": "4b1d2c3",
    }


def test_claude_code_records_each_turns_branch(tmp_path: Path) -> None:
    entries = []
    for n, branch in enumerate(["main", "main", "fix/login", "fix/login"]):
        entry = json.loads(cc(n, f"e{n - 1}" if n else None, "user" if n % 2 == 0 else "assistant"))
        entries.append(json.dumps({**entry, "gitBranch": branch}))
    path = tmp_path / "session.jsonl"
    path.write_text("".join(f"{e}\n" for e in entries))
    (session, *_), _ = claude_increment(read_increment(path, None))
    said = [n for n in session.nodes if n.kind in (NodeKind.USER, NodeKind.ASSISTANT)]
    assert [n.metadata.get("git_branch") for n in said] == ["main", "main", "fix/login", "fix/login"]


def test_an_import_stores_the_sessions_project_by_its_remote(tmp_path: Path) -> None:
    repo = tmp_path / "code" / "harbour"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "https://github.com/Acme/Harbour.git"], check=True
    )
    lines = [json.dumps({**json.loads(cc(n, f"e{n - 1}" if n else None)), "cwd": str(repo / "src")}) for n in range(2)]
    transcript = tmp_path / "claude" / "projects" / "harbour" / "s.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("".join(f"{line}\n" for line in lines))
    state = tmp_path / "state"
    ingest(state, transcript)
    store = open_store(f"sqlite:///{state / 'sessions' / 'sessions.db'}")
    try:
        (session,) = store.list_sessions()
        assert session.metadata["project"] == "git:github.com/acme/harbour"
        assert session.metadata["cwd"] == str(repo / "src")
    finally:
        store.close()
