"""Reading one record the way the modification interface describes it."""

from __future__ import annotations

from typing import Any

from scriptorium.errors import NotFound
from scriptorium.recall.branches import BranchView
from scriptorium.workspace.snapshot import Snapshot


def record_payload(snap: Snapshot, memory_id: str, branches: BranchView | None = None) -> dict[str, Any]:
    """A record as JSON: IDs, place, time, content, its sources (identity and label) and, with
    ``branches`` (the session store's view), its branch status (``current``, ``alternative`` or null)
    and where its sessions came from (``continued_from`` a fork's parent, ``spawned_by`` a subagent's), the
    projects they ran in and the git branches its turns were said on."""
    record = snap.record(memory_id)
    if record is None:
        raise NotFound(f"no record ^{memory_id}")
    notes = snap.topics[record.topic].footnotes
    cited = snap.topics[record.topic].cited_paths(record)
    return {
        "memory_id": record.memory_id,
        "block_ids": list(record.block_ids),
        "topic_path": record.topic,
        "headings": list(record.headings),
        "time": record.date,
        "content": record.text,
        "sources": [
            {"source": note.source.identity, "label": note.link_label}
            for label in record.refs
            if (note := notes.get(label)) is not None and note.source is not None
        ],
        "branch": branches([cited])[0] if branches is not None else None,
        "origins": branches.origins(cited) if branches is not None else [],
        **(branches.where(cited) if branches is not None else {"projects": [], "git_branches": []}),
        "revision": snap.tree,
    }
