"""Whether a session is written into memory: every turn cited once, none lost, duplicated or half-installed."""

from __future__ import annotations

from pathlib import Path

from scriptorium.sessions import open_store
from scriptorium.settings import Settings
from tests.checks import exactly_once, records_citing


def counts(state: Path, session: str, turns: int) -> dict[str, int]:
    store = open_store(Settings(state=state).session_store_url)
    try:
        return exactly_once(state / "memory", store, [(session, f"e{n}") for n in range(turns)])
    finally:
        store.close()


def clean(state: Path, session: str, turns: int) -> bool:
    if written(state, session) < turns:
        return False
    found = counts(state, session, turns)
    return found == {"turns": turns, "lost": 0, "duplicated": 0, "unmarked": 0, "partial_installs": 0}


def written(state: Path, session: str) -> int:
    """How many of the session's messages a record cites (0 before the memory exists)."""
    if not (state / "memory" / "topics").is_dir():
        return 0
    return sum(1 for source in records_citing(state / "memory") if source.startswith(f"claude-code/{session}/"))
