"""An import costs what the transcripts gained: importing a folder again, with nothing new in it, runs no
write pass for the sessions it had written (it ran one per session of the folder every time, each listing
every stored session: a month's import grew with everything imported before)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scriptorium.writing.history import WriterHistory

ROOT = Path(__file__).resolve().parents[2]


def transcript(folder: Path, session: str, turns: int) -> Path:
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


def ingest(state: Path, folder: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "scriptorium.cli.main", "ingest", str(folder), "--state", str(state), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def passes(state: Path) -> int:
    return sum(1 for entry in WriterHistory(state / "memory" / ".scriptorium").recent(10_000) if entry["op"] == "write")


def test_importing_a_folder_again_writes_only_what_grew(tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    for n in range(4):
        transcript(folder, f"s{n}", 4)
    state = tmp_path / "state"
    first = ingest(state, folder)
    assert first["records"] and first["failed"] == 0
    after_first = passes(state)
    assert after_first >= 4
    again = ingest(state, folder)
    assert again["new_nodes"] == 0 and again["records"] == 0
    assert passes(state) == after_first, "nothing grew: no pass ran"
    transcript(folder, "s2", 6)  # one conversation goes on
    grown = ingest(state, folder)
    assert grown["new_nodes"] == 2 and grown["records"] == 2
    assert passes(state) == after_first + 1, "one session grew: one pass"
