"""``benchmarks/recall.py --writer llm``: the writer's effect on recall, measured through a real HTTP endpoint.

The endpoint is the scripted OpenAI-compatible server the LLM writer's tests use: it
writes each message it is sent as one record citing it, so recall through it is what
the pipeline (benchmark → write passes → LLM writer over HTTP → index) gives back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_openai import FakeOpenAI

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "recall.py"
TURNS = [
    ("Ann", "I adopted a greyhound called Biscuit last week."),
    ("Ben", "Biscuit is a lovely name for a greyhound!"),
    ("Ann", "My sister Clara teaches violin in Lisbon."),
    ("Ben", "Lisbon must be a great city for music."),
]
DATASET = [
    {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": s, "dia_id": f"D1:{n + 1}", "text": t} for n, (s, t) in enumerate(TURNS[:2])],
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": [{"speaker": s, "dia_id": f"D2:{n + 1}", "text": t} for n, (s, t) in enumerate(TURNS[2:])],
        },
        "qa": [
            {
                "question": "What is the name of Ann's greyhound?",
                "answer": "Biscuit",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {"question": "What is Lisbon great for, says Ben?", "answer": "music", "evidence": ["D2:2"], "category": 4},
            {"question": "Who is Clara?", "answer": "Ann's sister", "evidence": ["D2:1"], "category": 4},
        ],
    }
]
_MESSAGE = re.compile(
    r"^\[(?P<ref>[^\]\s]+)\] \w+ at (?P<day>\d{4}-\d\d-\d\d)\S*:\n(?P<text>.*?)(?=\n\n\[|\Z)", re.M | re.S
)


def write_each_message(body: dict[str, Any]) -> dict[str, Any]:
    """A model that writes every message it is sent as one record citing it, then commits."""
    if body["messages"][-1]["role"] == "tool":
        return {"tool_calls": [("commit_edits", {})]}
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    records = [f"{m['day']}: {m['text'].strip()} [said]({m['ref']})" for m in _MESSAGE.finditer(user)]
    path = f"topics/conversation-{abs(hash(user)) % 10_000}.md"
    return {"tool_calls": [("write_topic", {"path": path, "content": "# Talk\n\n" + "\n\n".join(records) + "\n"})]}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    server.organizer_commits = True
    try:
        yield server
    finally:
        server.close()


def run(tmp_path: Path, **env: str) -> tuple[list[str], dict[str, Any]]:
    dataset = tmp_path / "tiny.json"
    dataset.write_text(json.dumps(DATASET))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCRIPTORIUM_")}
    out = subprocess.run(
        [sys.executable, str(BENCH), str(dataset), "--writer", "llm"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # no writer.json of anyone's in ./.scriptorium
        env={**clean, **env},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    return lines, json.loads(lines[-1])


def test_without_a_model_it_is_skipped_with_the_reason(tmp_path: Path) -> None:
    lines, last = run(tmp_path)
    assert last["writer"] == "llm" and "no writer model configured" in last["skipped"]
    assert lines[0].startswith("skipped: --writer llm: ")


def test_a_model_that_fails_every_call_is_skipped_not_scored(tmp_path: Path, fake: FakeOpenAI) -> None:
    _lines, last = run(tmp_path, SCRIPTORIUM_WRITER_MODEL="scripted", SCRIPTORIUM_WRITER_BASE_URL=fake.base_url)
    assert "did not write" in last["skipped"]
    assert fake.requests, "it did try the endpoint"


def test_recall_through_the_llm_writer_over_http(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.default = write_each_message
    lines, last = run(tmp_path, SCRIPTORIUM_WRITER_MODEL="scripted", SCRIPTORIUM_WRITER_BASE_URL=fake.base_url)
    assert (last["writer"], last["mode"], last["questions"]) == ("llm", "bm25", 3)
    assert last["recall_at_10"] == 1.0 and last["recall_at_5"] == 1.0, lines
    assert any(r["model"] == "scripted" for r in fake.requests)
