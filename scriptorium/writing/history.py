"""Runtime bookkeeping under ``.scriptorium/``: the writer history and the organize counters."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.writing.outcomes import Failed, NothingDue, Outcome, Pending, Written, outcome_name

HISTORY_FILE = "history.jsonl"
ORGANIZE_FILE = "organize.json"
HISTORY_VERSION = 1
"""The layout of a writer-history line (each line says its own: lines of two releases may share the file)."""
ORGANIZE_VERSION = 1
"""``organize.json``'s layout (:mod:`scriptorium.formats`)."""
HISTORY_KEEP = 2000
"""History lines kept when the file is compacted (it is compacted at twice this size)."""


class WriterHistory:
    """Append-only JSON lines, one per pass, readable by ``scriptorium memory status``."""

    def __init__(self, runtime_dir: Path) -> None:
        self.path = runtime_dir / HISTORY_FILE

    def append(self, entry: Mapping[str, Any]) -> None:
        line = (json.dumps(versioned(dict(entry), HISTORY_VERSION), sort_keys=True) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if self.path.stat().st_size > HISTORY_KEEP * 2 * 400:
            self._compact()

    def _compact(self) -> None:
        lines = self.path.read_bytes().splitlines(keepends=True)
        if len(lines) > HISTORY_KEEP * 2:
            atomic_write(self.path, b"".join(lines[-HISTORY_KEEP:]))

    def redact(self, replacements: Mapping[str, str]) -> int:
        """Replace every occurrence of each text of ``replacements`` (longest first) by its replacement inside
        the entries' strings; returns how many entries changed. The file is rewritten atomically (a forget or a
        redaction: no excerpt of the text stays)."""
        if not replacements:
            return 0
        needles = sorted(replacements, key=len, reverse=True)
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return 0
        changed = 0
        out = []
        for line in lines:
            scrubbed = line
            for needle in needles:
                encoded = json.dumps(needle)[1:-1]  # as the text appears inside a JSON string
                scrubbed = scrubbed.replace(encoded, json.dumps(replacements[needle])[1:-1])
            changed += scrubbed != line
            out.append(scrubbed)
        if changed:
            atomic_write(self.path, ("\n".join(out) + "\n").encode("utf-8"))
        return changed

    def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        out: list[dict[str, Any]] = []
        for line in lines[-limit:]:
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line after a crash: skip it
            out.append(read_versioned(parsed, HISTORY_VERSION, str(self.path)))
        return out


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
