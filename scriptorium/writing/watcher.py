"""The session watcher, the way in for sessions no hook ends: which get the forced write, which were handled.

One rule for every deployment: the cluster's beat sweep (:func:`scriptorium.workers.handling.sweep`, its
handled marks in Redis) and the embedded default's sweep (:mod:`scriptorium.runtimes.hooks.watcher`, its marks in
``<memory>/.scriptorium/watcher.json``) both ask :func:`due_sessions`.

A session is due when it has been idle for the idle time and was not handled since it last changed — the
runtime may never say that it ended (a closed terminal, a killed process) — or, as a safety net, when its
oldest unwritten message is older than the pending bound. A forced write marks its session handled at the
time the session last changed unless the outcome is pending (a write that succeeded, or failed in
a way retrying will not fix, is not revisited until the session changes; a pending one is tried again at
the next scan).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.sessions import Session
from scriptorium.writing.outcomes import Outcome, Pending

WATCHER_FILE = "watcher.json"
WATCHER_VERSION = 1
"""``watcher.json``'s layout (:mod:`scriptorium.formats`)."""


@dataclass(frozen=True, slots=True)
class Due:
    """A session the watcher writes now, and why."""

    session_id: str
    why: Literal["idle", "stale"]


def due_sessions(
    sessions: Iterable[Session],
    handled: Mapping[str, float],
    now: datetime,
    idle_after_s: float,
    pending_bound_s: float,
    pending_since: Callable[[str], datetime | None],
) -> list[Due]:
    """The sessions due for a forced write at ``now``; ``handled`` maps a session to the ``updated_at``
    (a POSIX timestamp) its last settled write saw."""
    due: list[Due] = []
    for session in sessions:
        idle = session.updated_at <= now - timedelta(seconds=idle_after_s)
        if idle and handled.get(session.id, -1.0) < session.updated_at.timestamp():
            due.append(Due(session.id, "idle"))
            continue
        since = pending_since(session.id)
        if since is not None and since <= now - timedelta(seconds=pending_bound_s):
            due.append(Due(session.id, "stale"))
    return due


def settles(outcome: Outcome) -> bool:
    """Whether a forced write's ``outcome`` marks its session handled (anything but pending)."""
    return not isinstance(outcome, Pending)


class HandledLedger:
    """The embedded watcher's handled marks: session → the ``updated_at`` its last settled write saw."""

    def __init__(self, runtime_dir: Path) -> None:
        self.path = runtime_dir / WATCHER_FILE

    def load(self) -> dict[str, float]:
        try:
            raw = json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}  # a torn or missing file only means the next scan looks at every idle session again
        handled = read_versioned(raw, WATCHER_VERSION, str(self.path)).get("handled") if isinstance(raw, dict) else None
        if not isinstance(handled, dict):
            return {}
        return {str(k): float(v) for k, v in handled.items() if isinstance(v, int | float)}

    def mark(self, marks: Mapping[str, float]) -> None:
        """Add ``marks`` (session → updated_at) to the ledger (callers hold the watcher's lock)."""
        if not marks:
            return
        handled = {**self.load(), **marks}
        atomic_write(self.path, json.dumps(versioned({"handled": handled}, WATCHER_VERSION), sort_keys=True).encode())
