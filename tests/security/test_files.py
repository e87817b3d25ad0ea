"""What the CLI and the server create is the user's alone, whatever the umask they start under."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.helpers.served import ROOT
from tests.helpers.transcripts import claude_transcript

SCRIPT = Path(sys.executable).with_name("scriptorium")


def open_to_others(state: Path) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(state):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                found.append(f"{oct(mode & 0o777)} {path.relative_to(state)}")
    return found


def test_state_is_private_under_a_permissive_umask(tmp_path: Path) -> None:
    state = tmp_path / "state"
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 2)

    def run(*argv: str) -> None:
        subprocess.run(
            [str(SCRIPT), *argv, "--state", str(state)],
            cwd=ROOT,
            check=True,
            capture_output=True,
            timeout=120,
            preexec_fn=lambda: os.umask(0o022),
        )

    run("memory", "init")
    run("ingest", str(transcript))
    run("token", "create", "--scope", "runtime")
    assert (state / "sessions").is_dir() and (state / "memory" / ".git").is_dir()
    assert open_to_others(state) == []
