"""Codex writes each message twice (a ``response_item`` and an ``event_msg``) and the importer keeps one: the
copy still waiting for its twin is forgotten once the other role speaks, so an interrupted turn's lone copy
never swallows the same words said again later."""

from __future__ import annotations

from pathlib import Path

import pytest

from scriptorium.producers.codex import parse_increment
from scriptorium.producers.importing import read_increment
from scriptorium.sessions import NodeKind
from tests.helpers.transcripts import codex_line as line
from tests.helpers.transcripts import codex_message as message
from tests.helpers.transcripts import write


def _copy(n: int, role: str, text: str, copy: str) -> str:
    if copy == "item":
        return line(n, "response_item", message(role, text))
    return line(n, "event_msg", {"type": "user_message" if role == "user" else "agent_message", "message": text})


@pytest.mark.parametrize(("first", "again"), [("item", "event"), ("event", "item")])
def test_a_message_said_again_after_an_interrupted_turn_is_not_taken_for_the_first_ones_twin(
    tmp_path: Path, first: str, again: str
) -> None:
    """The user says "continue", the turn is interrupted before Codex writes its second copy, the assistant
    answers, and the user says "continue" again in a turn interrupted the other way round: two messages."""
    lines = [
        line(0, "session_meta", {"id": "019b0000-mirror", "cwd": "/srv/app"}),
        _copy(1, "user", "continue", first),
        line(2, "event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
        _copy(3, "assistant", "Where should I pick up?", "item"),
        _copy(4, "assistant", "Where should I pick up?", "event"),
        _copy(5, "user", "continue", again),
        line(6, "event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
        _copy(7, "user", "the migration", "item"),
        _copy(8, "user", "the migration", "event"),
    ]
    path = write(tmp_path / "rollout.jsonl", lines)
    (session,), _state = parse_increment(read_increment(path, None))
    said = [(n.role, n.content) for n in session.nodes if n.kind in (NodeKind.USER, NodeKind.ASSISTANT)]
    assert said == [
        ("user", "continue"),
        ("assistant", "Where should I pick up?"),
        ("user", "continue"),
        ("user", "the migration"),
    ]
