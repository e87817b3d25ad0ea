"""What an attacker sends and what it must never see: a record to create, where a record lives, and the two
requesters' private words."""

from __future__ import annotations

from typing import Any

from tests.helpers.requesters import Served

ALICE_PRIVATE = ("blue notebook", "tea recipes", "runtime/alice-s", "oolong")
BOB_PRIVATE = ("garden vault", "deploy keys", "runtime/bob-s")
"""Their records' words and their sources' paths (a topic path the attacker names itself is its own)."""


def create(
    text: str, *sources: str, topic: str = "topics/notes.md", headings: list[str] | None = None, **placed: Any
) -> dict[str, Any]:
    """One ``create_record`` citing ``sources``; ``placed``: more of its destination (position, anchor)."""
    destination: dict[str, Any] = {"topic_path": topic, **placed}
    if headings is not None:
        destination["headings"] = headings
    return {
        "message": "a note",
        "memory_changes": [
            {
                "op": "create_record",
                "content": text,
                "time": "2026-11-21",
                "sources": [{"source": s, "label": "memo"} for s in sources],
                "destination": destination,
            }
        ],
    }


def topic_of(s: Served, session: str) -> str:
    (memory_id, *_) = sorted(s.world.ids(session))
    topic: str = s.call("owner", "GET", f"/api/memory/records/{memory_id}").json()["topic_path"]
    return topic


def assert_no_leak(text: str, private: tuple[str, ...]) -> None:
    found = [p for p in private if p in text]
    assert not found, f"leaked {found}: {text[:2000]}"
