"""Backfill: trusted archived sources that no topic cites yet, cut into writer batches.

Sources get into the archive without a topic citing them when they were
archived directly (``memory archive``) or promoted from pending later. The
ledger (``.scriptorium/backfilled.json``) remembers every source a backfill
pass offered a writer, so a writer that chose not to cite one is not offered it
again: a second run processes nothing. Pending sources are never offered.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.sessions import Node, NodeKind
from scriptorium.tokencount import count_tokens
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.sources import SourceMessage
from scriptorium.writer_interface import Batch, BatchMessage

LEDGER = "backfilled.json"
LEDGER_VERSION = 2
"""The ledger's layout: 1, a bare JSON list of paths (before versions); 2, ``{"version", "paths"}``."""


def _paths_in_an_object(ledger: dict[str, object]) -> dict[str, object]:
    """1 → 2: the list becomes the object's ``paths``."""
    return {"paths": ledger["paths"]}


class BackfillLedger:
    """Source paths already offered to a writer by a backfill pass."""

    def __init__(self, runtime: Path) -> None:
        self.path = runtime / LEDGER

    def load(self) -> set[str]:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return set()
        if isinstance(raw, list):  # version 1 had no room for a version: a list is one
            raw = {"version": 1, "paths": raw}
        ledger = read_versioned(raw, LEDGER_VERSION, str(self.path), steps=(_paths_in_an_object,))
        return set(map(str, ledger["paths"]))

    def add(self, paths: Iterable[str]) -> None:
        done = self.load() | set(paths)
        atomic_write(self.path, json.dumps(versioned({"paths": sorted(done)}, LEDGER_VERSION)).encode())


def unwritten_sources(workspace: MemoryWorkspace, offered: set[str]) -> list[SourceMessage]:
    """Trusted sources in the installed tree that no topic cites and no backfill offered, oldest first."""
    snap = workspace.snapshot()
    cited = {
        note.source_path for topic in snap.topics.values() for note in topic.footnotes.values() if note.source_path
    }
    found = []
    for path in workspace.archive.keys(workspace.git, snap.tree):
        if path in cited or path in offered:
            continue
        message = workspace.archive.read(path)
        if message.trust == "trusted":
            found.append(message)
    found.sort(key=lambda m: (m.provider, m.thread, m.time, m.message))
    return found


def _node(message: SourceMessage) -> Node:
    try:
        created = datetime.fromisoformat(message.time.replace("Z", "+00:00"))
    except ValueError:
        created = datetime.now(UTC)
    kind = NodeKind.ASSISTANT if message.role == "assistant" else NodeKind.USER
    return Node(message.message, message.thread, None, message.role, kind, message.text, created)


def backfill_batches(messages: Sequence[SourceMessage], budget: int) -> list[Batch]:
    """One batch per thread run, cut at the token budget (at least one message each)."""
    batches: list[Batch] = []
    current: list[BatchMessage] = []
    used = 0

    def close() -> None:
        nonlocal current, used
        if current:
            first = current[0].source
            batches.append(Batch(first.thread, f"{first.provider} {first.thread}", tuple(current), ()))
        current, used = [], 0

    for message in messages:
        tokens = count_tokens(message.text)
        head = current[0].source if current else None
        if head and ((head.provider, head.thread) != (message.provider, message.thread) or used + tokens > budget):
            close()
        current.append(BatchMessage(_node(message), message, tokens))
        used += tokens
    close()
    return batches
