"""The prompt that opens a session where no SessionStart hook runs (``core=first-prompt``) carries the core, its
project's newest records and the prompt's recall (issue 59): no record in both the project block and the
recall block."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.helpers.hooks import common, context, hook
from tests.helpers.transcripts import cc


def test_the_first_prompt_shows_each_record_once(state: Path, tmp_path: Path) -> None:
    project = tmp_path / "harbour"
    (project / ".git").mkdir(parents=True)

    def session(name: str, text: str) -> Path:
        path = tmp_path / f"{name}.jsonl"
        lines = []
        for n, said in enumerate([text, "Noted."]):
            entry = json.loads(cc(n, f"e{n - 1}" if n else None, "user" if n == 0 else "assistant", said))
            lines.append(json.dumps({**entry, "sessionId": name, "cwd": str(project)}))
        path.write_text("".join(f"{line}\n" for line in lines))
        return path

    for name, text in (
        ("cc-ship", "The harbour app deploys with make ship."),
        ("cc-tides", "The harbour app keeps its tide tables in src/tides."),
    ):
        transcript = session(name, text)
        assert hook(state, common("SessionEnd", session=name, transcript=transcript, reason="exit")).returncode == 0

    payload = common(
        "UserPromptSubmit", session="cc-new", cwd=str(project), prompt="how does the harbour app deploy, make ship?"
    )
    text = context(hook(state, {**payload, "core": "first-prompt"}), "UserPromptSubmit")
    assert '<memory-context kind="project">' in text and '<memory-context kind="recall">' in text, text
    project_block = text[text.index('<memory-context kind="project">') :].split("</memory-context>")[0]
    recall_block = text[text.index('<memory-context kind="recall">') :].split("</memory-context>")[0]
    in_project = set(re.findall(r"\^(\S+)", project_block))
    in_recall = set(re.findall(r"\^(\S+)", recall_block))
    assert in_recall and in_project & in_recall == set(), text
    assert "make ship" in recall_block and "make ship" not in project_block
