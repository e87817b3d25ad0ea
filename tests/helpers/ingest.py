"""A folder of Claude Code transcripts, and ``scriptorium ingest`` of it as a process of its own (a fresh process:
what it leaves on disk is all the next one finds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.package import ROOT


def transcript(folder: Path, session: str, turns: int) -> Path:
    """``folder/SESSION.jsonl``: ``turns`` turns of ``session``, user and assistant in turn."""
    lines, parent = [], None
    for n in range(turns):
        role = "user" if n % 2 == 0 else "assistant"
        uuid = f"{session}-{n}"
        text = f"Turn {n} of {session}: we settled the release checklist item {n}."
        content = text if role == "user" else [{"type": "text", "text": text}]
        lines.append(
            {
                "parentUuid": parent,
                "sessionId": session,
                "type": role,
                "uuid": uuid,
                "timestamp": f"2026-11-20T09:00:{n:02d}.000Z",
                "message": {
                    "role": role,
                    "content": content if role == "user" else [{"type": "text", "text": content}],
                },
            }
        )
        parent = uuid
    path = folder / f"{session}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def command_json(state: Path, *args: str) -> dict[str, object]:
    """``scriptorium ARGS --state STATE --json`` in a process of its own: its JSON answer (exit 0 asserted)."""
    done = subprocess.run(
        [sys.executable, "-m", "scriptorium.cli.main", *args, "--state", str(state), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def ingest(state: Path, folder: Path) -> dict[str, object]:
    """``scriptorium ingest FOLDER --json`` in a process: its report."""
    return command_json(state, "ingest", str(folder))
