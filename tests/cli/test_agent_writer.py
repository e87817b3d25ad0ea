"""The agent writers end to end in the embedded default: the real ``scriptorium`` command, the stand-ins on PATH."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from scriptorium.workspace import MemoryWorkspace
from tests.agent_fixtures import StandIns, standins
from tests.helpers.hooks import common, hook

__all__ = ["standins"]

SCRIPT = Path(sys.executable).with_name("scriptorium")
REPO = Path(__file__).resolve().parents[2]


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, **env},
    )


def test_a_transcript_ingested_with_the_claude_code_writer_lands_as_its_topics(
    tmp_path: Path, standins: StandIns
) -> None:
    standins.scenario("claude", "valid")
    state = tmp_path / "state"
    out = run("ingest", "examples/transcript.jsonl", "--state", str(state), SCRIPTORIUM_WRITER="claude-code")
    assert out.returncode == 0, out.stderr
    calls = standins.calls("claude")
    assert calls, "the ingest ran the agent"
    with MemoryWorkspace(state / "memory") as ws:
        topics = ws.snapshot().topics
        assert topics and all(path.startswith("topics/agent/") for path in topics), sorted(topics)
        records = [r for t in topics.values() for r in t.records]
        cited = {path for t in topics.values() for r in t.records for path in t.cited_paths(r)}
        assert len(records) == sum(len(re.findall(r"^\[[^\]]+\] (user|assistant) at", c["stdin"], re.M)) for c in calls)
        assert cited and all(ws.archive.exists(path) for path in cited), "every record cites an archived source"
        assert ws.git.head() is not None and ws.revision == ws.snapshot().tree
    status = run("memory", "status", "--state", str(state), SCRIPTORIUM_WRITER="claude-code")
    assert status.returncode == 0, status.stderr
    assert "writer: claude-code" in status.stdout and "written, pending 0 [claude-code]" in status.stdout
    again = run("ingest", "examples/transcript.jsonl", "--state", str(state), SCRIPTORIUM_WRITER="claude-code")
    assert again.returncode == 0 and len(standins.calls("claude")) == len(calls), "nothing new: no agent run"


def test_a_logged_out_agent_leaves_the_transcript_pending_and_says_how_to_log_in(
    tmp_path: Path, standins: StandIns
) -> None:
    standins.scenario("codex", "logged_out")
    state = tmp_path / "state"
    out = run("ingest", "examples/transcript.jsonl", "--state", str(state), "--json", SCRIPTORIUM_WRITER="codex")
    assert out.returncode != 0
    result = json.loads(out.stdout)
    assert "WRITER_START_FAILED" in json.dumps(result), result
    with MemoryWorkspace(state / "memory") as ws:
        assert ws.snapshot().topics == {}


def test_scriptoriums_hooks_stand_aside_inside_a_writers_own_run(tmp_path: Path) -> None:
    state = tmp_path / "state"
    out = hook(state, common("SessionStart", source="startup"), SCRIPTORIUM_WRITER_RUN="1")
    assert out.returncode == 0 and out.stdout == "" and out.stderr == ""
    assert not state.exists(), "the hook touched nothing"
    served = run("mcp", "--state", str(state), SCRIPTORIUM_WRITER_RUN="1")
    assert served.returncode != 0 and "FORBIDDEN" in served.stderr + served.stdout


def test_a_writer_json_naming_no_backend_is_refused_with_its_reason(tmp_path: Path) -> None:
    state = tmp_path / "state"
    MemoryWorkspace.init(state / "memory").close()
    (state / "writer.json").write_text('{"backend": "claude"}')
    out = run("memory", "status", "--state", str(state), "--json")
    assert out.returncode != 0 and json.loads(out.stderr)["reason"] == "INVALID_ARGUMENT"
    assert "writer.json" in out.stderr and "claude-code" in out.stderr
