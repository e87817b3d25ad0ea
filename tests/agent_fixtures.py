"""The agent CLIs' stand-ins (``tests/agent_standin.py``) installed first on ``PATH``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

STANDIN = Path(__file__).with_name("agent_standin.py")


class StandIns:
    """``claude`` and ``codex`` executables in one folder, their scenarios and what each run received."""

    def __init__(self, folder: Path) -> None:
        self.bin = folder
        folder.mkdir(parents=True, exist_ok=True)
        body = STANDIN.read_text()
        for persona in ("claude", "codex"):
            path = folder / persona
            path.write_text(f"#!{sys.executable}\n{body}")
            path.chmod(0o755)

    def scenario(self, persona: str, *steps: str) -> None:
        (self.bin / f"{persona}.scenario.json").write_text(json.dumps(list(steps)))
        (self.bin / f"{persona}.calls.jsonl").unlink(missing_ok=True)

    def calls(self, persona: str) -> list[dict[str, Any]]:
        path = self.bin / f"{persona}.calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def path_env(self) -> str:
        return f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture
def standins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIns]:
    """The stand-ins first on PATH, a UTF-8 locale (so Python in them adds nothing to what they record),
    and variables a worker may hold that no agent may see."""
    made = StandIns(tmp_path / "agent-bin")
    monkeypatch.setenv("PATH", made.path_env())
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.setenv("SCRIPTORIUM_TOKEN", "sk-owner-secret")
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:secret@db/app")
    monkeypatch.setenv("PGPASSWORD", "secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-login")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-login")
    yield made
