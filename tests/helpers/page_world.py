"""A memory as the Memory page's reader meets it: two sessions opened with the same first prompt, said on
one day with their turns interleaved, and a private session of requester alice (written by the real write
pass, as conversations are)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from scriptorium.composition import build_runtime
from scriptorium.sessions import AUDIENCE_KEY, TITLE_FROM_KEY, Node, NodeKind
from scriptorium.settings import Settings

DAY = "2026-11-20"
TITLE = "Plan the release"
FIRST = "0199a1b2-c3d4-7e5f-8a1c-44f2e93b0a11"
SECOND = "0199a1b2-c3d4-7e5f-9b2d-55a3f04c1b22"
PRIVATE = "0199a1b2-c3d4-7e5f-8c3e-66b4a15d2c33"
EARLIER = "0199a0f1-0000-7e5f-8d4f-77c5b26e3d44"


def _at(hour: int, minute: int) -> datetime:
    return datetime(2026, 11, 20, hour, minute, tzinfo=UTC)


SAID: dict[str, list[tuple[datetime, str]]] = {
    FIRST: [
        (_at(9, 0), "Release train: we cut the branch on Monday."),
        (_at(9, 5), "Release train: the changelog is written by hand."),
        (_at(10, 30), "Release train: tag only after the smoke test passes."),
    ],
    SECOND: [
        (_at(9, 15), "Release notes: the blog post goes out on Tuesday."),
        (_at(9, 20), "Release notes: screenshots come from the staging site."),
    ],
    PRIVATE: [(_at(11, 0), "Memo: alice keeps her tea recipes in the blue notebook.")],
    EARLIER: [(datetime(2026, 11, 19, 16, 0, tzinfo=UTC), "Kickoff: the release is planned for next week.")],
}
"""Session → what its user said, when: FIRST and SECOND interleave, PRIVATE is alice's alone, EARLIER the day
before (a closed day when DAY is shown)."""
IN_TIME_ORDER = ["09:00", "09:05", "09:15", "09:20", "10:30", "11:00"]


def page_world(state: Path) -> None:
    settings = Settings(state=state)
    runtime = build_runtime(settings)
    try:
        for session, said in SAID.items():
            first = f"{session[-4:]}-1"
            metadata = {
                "provider": "runtime",
                "title": {PRIVATE: "Tea", EARLIER: "Kickoff"}.get(session, TITLE),
                TITLE_FROM_KEY: first,
            }
            if session == PRIVATE:
                metadata[AUDIENCE_KEY] = "alice"
            runtime.store.create_session(session, metadata)
            nodes, parent = [], None
            for n, (when, text) in enumerate(said, 1):
                node = Node(f"{session[-4:]}-{n}", session, parent, "user", NodeKind.USER, text, when)
                nodes.append(node)
                parent = node.id
            runtime.store.add_nodes(nodes, head=parent)
            outcome = runtime.service.write(session, force=True)
            assert outcome.ok, outcome
    finally:
        runtime.close()
        runtime.workspace.close()
