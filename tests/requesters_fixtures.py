"""A memory shared by two requesters: alice's private session, bob's private session and a shared one,
written by the real write pass; a core citing alice's and the shared session; a record mixing both
private sessions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scriptorium.changes.structured import Citation, CreateRecord, Destination
from scriptorium.changes.update import update as update_memory
from scriptorium.composition import build_runtime
from scriptorium.sessions import AUDIENCE_KEY, Node, NodeKind
from scriptorium.settings import Settings
from scriptorium.workspace.paths import source_identity_from_path

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
SESSIONS = {
    "alice-s": ("alice", "memo alice keeps her tea recipes in the blue notebook"),
    "bob-s": ("bob", "memo bob stores the deploy keys in the garden vault"),
    "shared-s": (None, "memo the team standup moves to nine thirty"),
}


@dataclass(frozen=True, slots=True)
class World:
    state: Path
    records: dict[str, set[str]]
    """Session (or ``core-alice``, ``core-shared``, ``mixed``) → its records' memory IDs."""

    def ids(self, *keys: str) -> set[str]:
        return set().union(*(self.records[key] for key in keys))


def source_of(session: str, n: int = 1) -> str:
    return f"runtime/{session}/{session}-{n}"


def requesters_world(state: Path) -> World:
    settings = Settings(state=state)
    runtime = build_runtime(settings)
    try:
        for session, (audience, text) in SESSIONS.items():
            metadata = {"provider": "runtime", "title": session} | ({AUDIENCE_KEY: audience} if audience else {})
            runtime.store.create_session(session, metadata)
            first = Node(f"{session}-1", session, None, "user", NodeKind.USER, text, T0)
            reply = f"{text.replace('memo ', 'memo noted: ', 1)}"
            second = Node(f"{session}-2", session, first.id, "assistant", NodeKind.ASSISTANT, reply, T0 + timedelta(1))
            runtime.store.add_nodes([first, second], head=second.id)
            outcome = runtime.service.write(session, force=True)
            assert outcome.ok, outcome
        ws = runtime.workspace
        records: dict[str, set[str]] = {}
        for topic in ws.snapshot().topics.values():
            for record in topic.records:
                for path in topic.cited_paths(record):
                    identity = source_identity_from_path(path)
                    assert identity is not None
                    records.setdefault(identity[1], set()).add(record.memory_id)
        assert set(records) == set(SESSIONS), records

        def create(topic: str, text: str, *sources: str) -> str:
            change = CreateRecord(text, "2026-11-20", tuple(Citation(s, "memo") for s in sources), Destination(topic))
            result = update_memory(ws, memory_changes=[change], message=f"add {text}")
            (created,) = result.created_ids
            return created

        records["core-alice"] = {create("topics/core.md", "Core memo: alice drinks oolong.", source_of("alice-s"))}
        records["core-shared"] = {create("topics/core.md", "Core memo: standups are short.", source_of("shared-s"))}
        records["mixed"] = {
            create(
                "topics/mixed.md", "Mixed memo: the notebook and the vault.", source_of("alice-s"), source_of("bob-s")
            )
        }
    finally:
        runtime.close()
        runtime.workspace.close()
    return World(state, records)


ALICE_SEES = ("alice-s", "shared-s", "core-alice", "core-shared")
BOB_SEES = ("bob-s", "shared-s", "core-shared")
SHARED_ONLY = ("shared-s", "core-shared")
EVERYTHING = ("alice-s", "bob-s", "shared-s", "core-alice", "core-shared", "mixed")
