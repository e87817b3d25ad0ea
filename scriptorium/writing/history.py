"""Runtime bookkeeping under ``.scriptorium/``: the organize counters, and the writer history's line for one pass
(the history itself: :mod:`scriptorium.workspace.writer_history`)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scriptorium.formats import read_versioned, versioned
from scriptorium.writing.outcomes import Failed, NothingDue, Outcome, Pending, Written, outcome_name

ORGANIZE_FILE = "organize.json"
ORGANIZE_VERSION = 1
"""``organize.json``'s layout (:mod:`scriptorium.formats`)."""


@dataclass(slots=True)
class OrganizeCounters:
    """Batches and tokens written since the last organize, and when the last global organize ran."""

    batches_since: int = 0
    tokens_since: int = 0
    last_global: float = 0.0
    tree: str = ""
    """The workspace tree the last organize installed (or found nothing to change in): what the next one
    need not look at again ("": unknown, the next organize looks at every topic)."""


class OrganizeState:
    """Persists :class:`OrganizeCounters` (one action, two triggers: volume or a day)."""

    def __init__(self, runtime_dir: Path) -> None:
        self.path = runtime_dir / ORGANIZE_FILE

    def load(self) -> OrganizeCounters:
        try:
            data = read_versioned(json.loads(self.path.read_text()), ORGANIZE_VERSION, str(self.path))
        except (FileNotFoundError, json.JSONDecodeError):
            counters = OrganizeCounters(last_global=time.time())
            self.save(counters)
            return counters
        fields = ("batches_since", "tokens_since", "last_global", "tree")
        return OrganizeCounters(**{k: data[k] for k in fields if k in data})

    def save(self, counters: OrganizeCounters) -> None:
        # Replaced atomically but not fsynced: after a power loss the counters may lag by a
        # batch, which only moves the next organize by one batch.
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(versioned(asdict(counters), ORGANIZE_VERSION), sort_keys=True))
        os.replace(tmp, self.path)


def pass_entry(
    op: str, session_id: str | None, force: bool, outcome: Outcome, ms: float, writer: str
) -> dict[str, Any]:
    """The writer history's line for one pass: what it did, why not when it did not, and how long it took."""
    entry: dict[str, Any] = {
        "at": datetime.now(UTC).isoformat(),
        "op": op,
        "session": session_id,
        "force": force,
        "outcome": outcome_name(outcome),
        "ok": outcome.ok,
        "reason": str(outcome.reason) if outcome.reason else None,
        "retryable": outcome.retryable,
        "pending_nodes": outcome.pending_nodes,
        "revision": outcome.revision if isinstance(outcome, Written) else None,
        "changed_files": len(outcome.changed_files) if isinstance(outcome, Written) else 0,
        "nodes_written": outcome.nodes_written if not isinstance(outcome, NothingDue) else 0,
        "ms": ms,
        "writer": writer,
    }
    if isinstance(outcome, Pending | Failed):
        entry["message"] = outcome.message
    return entry
