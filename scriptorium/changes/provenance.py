"""Where a record came from: each source it cites as archived, and the commits that brought and changed it.

``scriptorium memory why MEMORY_ID`` and ``GET /api/memory/records/{id}/provenance`` answer with
:func:`provenance`. The history is git's: the commits on ``main`` that added or removed a line of
``topics/`` holding the record's ID (``git log -G``). A record's IDs close its last line, so its
writing, every rewrite of that line and every move between topics are found; an edit confined to an
earlier line of a multi-line record is not.
"""

from __future__ import annotations

import re
from typing import Any

from scriptorium.changes.read import record_payload
from scriptorium.errors import NotFound
from scriptorium.recall.branches import BranchView
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.paths import TOPICS
from scriptorium.workspace.topics import BLOCK_ID

_BLOCK_ID = re.compile(BLOCK_ID)


def provenance(ws: MemoryWorkspace, memory_id: str, branches: BranchView | None = None) -> dict[str, Any]:
    """The record as ``memory get`` shows it, with ``provenance``: its sources (identity, session, message,
    role, time, trust, origin, archive path) and its history (the commit that introduced it, the one that
    last changed it, and how many changed it). NOT_FOUND for a record that is not installed."""
    snap = ws.snapshot()
    payload = record_payload(snap, memory_id, branches)
    record = snap.record(memory_id)
    if record is None:  # record_payload raised already; kept for the type checker
        raise NotFound(f"no record ^{memory_id}")
    sources = []
    for path in dict.fromkeys(snap.topics[record.topic].cited_paths(record)):
        archived = ws.archive.read(path)
        sources.append(
            {
                "source": archived.identity,
                "provider": archived.provider,
                "session": archived.thread,
                "message": archived.message,
                "role": archived.role,
                "time": archived.time,
                "trust": archived.trust,
                "origin": {archived.origin[0]: archived.origin[1]} if archived.origin else None,
                "path": path,
            }
        )
    assert _BLOCK_ID.fullmatch(memory_id), memory_id  # an installed record's ID: safe inside a pattern
    commits = [
        {"commit": commit, "at": at, "message": subject}
        for commit, at, subject in ws.git.commits_changing(rf"\^{memory_id}([^A-Za-z0-9_-]|$)", TOPICS)
    ]
    payload["provenance"] = {
        "sources": sources,
        "introduced": commits[-1] if commits else None,
        "last_changed": commits[0] if commits else None,
        "changes": len(commits),
    }
    return payload
