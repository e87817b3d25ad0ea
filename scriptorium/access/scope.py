"""What a requester may read and change: record audiences, visible reads, changes within an audience.

A record's audience is folded from its cited sources' (:mod:`scriptorium.audience`). Reads answer a
requester only with records it may see; a record it may not see is ``NOT_FOUND``, exactly as one that does
not exist — never a hint that it does (object-level authorization).

Changes from a requester (``propose`` or ``write``) are structured ``memory_changes`` only: a whole-topic
rewrite or a patch could carry records the requester may not see, so those formats stay the owner's.
Every record a change names (to update, delete, move, or anchor a position on) must be visible, and every
archived source it cites too. A ``write`` requester changes its own records directly — records whose
every requester is itself; a shared record is everyone's, so changing it goes through the owner (a
``propose`` token's held change). A new record may cite shared sources and the requester's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scriptorium.audience import Principal, Viewer, fold
from scriptorium.changes.read import record_payload
from scriptorium.changes.structured import (
    NEW_SOURCE_PREFIX,
    Change,
    CreateRecord,
    DeleteRecord,
    MoveRecords,
    UpdateRecord,
    missing_record,
)
from scriptorium.errors import Forbidden, NotFound, ReasonCode, ScriptoriumError, ValidationRejected
from scriptorium.recall.branches import BranchView
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.normalize import citation_source_path
from scriptorium.workspace.paths import TOPICS, source_identity_from_path
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.topics import Record, inline_links


def source_audience(ws: MemoryWorkspace, path: str) -> str | None:
    """The audience of the archived source at ``path`` ("" shared), or None when it is not archived or cannot
    be read (no one may cite it)."""
    try:
        return ws.archive.read(path).audience or ""
    except (OSError, ValueError, ScriptoriumError):
        return None


def record_audience(ws: MemoryWorkspace, snap: Snapshot, record: Record) -> str:
    """The record's audience: every cited source's, folded (a missing source counts as shared: such a record
    is pending, so it never reaches automatic context anyway)."""
    cited = dict.fromkeys(snap.topics[record.topic].cited_paths(record))
    return fold(source_audience(ws, path) for path in cited)


def visible_record(
    ws: MemoryWorkspace, memory_id: str, viewer: Viewer, branches: BranchView | None = None
) -> dict[str, Any]:
    """``memory get`` for ``viewer``: the record with its ``audience`` (requesters named, or null when
    shared); NOT_FOUND when it does not exist or ``viewer`` may not see it."""
    snap = ws.snapshot()
    record = snap.record(memory_id)
    audience = record_audience(ws, snap, record) if record is not None else ""
    if record is None or not viewer.sees(audience):
        raise NotFound(f"no record ^{memory_id}")
    payload = record_payload(snap, memory_id, branches)
    payload["audience"] = audience.split(",") if audience else None
    return payload


def check_within(ws: MemoryWorkspace, changes: Sequence[Change], principal: Principal) -> None:
    """Refuse ``changes`` a ``propose`` or ``write`` principal may not send (the owner may send any): NOT_FOUND
    for a record it may not see, FORBIDDEN for a visible record a ``write`` requester does not own,
    INVALID_SOURCE for a cited source it may not see or that is not archived (one refusal for both). Changes
    that would fail for everyone are otherwise left to the transaction's own validation."""
    if principal.scope == "owner":
        return
    viewer = principal.viewer
    snap = ws.snapshot()
    audiences: dict[str, str] = {}

    def visible(memory_id: str | None, *, changing: bool, anchor: bool = False) -> None:
        if memory_id is None:
            return
        record = snap.record(memory_id)
        if record is None:
            return  # the transaction says NOT_FOUND itself
        if memory_id not in audiences:
            audiences[memory_id] = record_audience(ws, snap, record)
        audience = audiences[memory_id]
        if not viewer.sees(audience):
            raise missing_record(memory_id, anchor=anchor)
        if changing and principal.scope == "write" and audience != principal.requester:
            raise Forbidden(
                f"record ^{memory_id} is {'shared' if not audience else 'not yours alone'}: a write token changes "
                "only its requester's own records",
                guidance="Send the change with a propose token: the owner approves or rejects it.",
            )

    for change in changes:
        if isinstance(change, UpdateRecord | DeleteRecord):
            visible(change.memory_id, changing=True)
        elif isinstance(change, MoveRecords):
            for memory_id in change.memory_ids:
                visible(memory_id, changing=True)
        if isinstance(change, CreateRecord | MoveRecords):
            visible(change.destination.anchor_memory_id, changing=False, anchor=True)
        if isinstance(change, CreateRecord | UpdateRecord):
            if isinstance(change, CreateRecord):
                topic = change.destination.topic_path
            else:
                topic = snap.id_to_topic.get(change.memory_id, "")
            targets = [m.group(2) for m in inline_links(change.content)]
            targets += [c.source for c in change.sources if not c.source.startswith(NEW_SOURCE_PREFIX)]
            for target in targets:  # request-level evidence (new-source-*) is archived as the requester's own
                _check_citable(ws, viewer, topic, target)


def _check_citable(ws: MemoryWorkspace, viewer: Viewer, topic: str, target: str) -> None:
    """Refuse a citation of a source ``viewer`` may not see exactly as one of a source that is not archived,
    and refuse that one here too, word for word as the normalizer does (its quoted line aside: see
    :meth:`~scriptorium.access.guard.RequesterGuard.refusal`): both at the same step of the same checks, so
    that no other refusal, and no field of this one, tells them apart."""
    found = citation_source_path(topic or f"{TOPICS}/x.md", target)
    if found is None:
        return  # not a citation (a plain link), or not one in the form of a source: refused as such later
    path = found[0]
    audience = source_audience(ws, path)
    if audience is not None and viewer.sees(audience):
        return
    identity = source_identity_from_path(path)
    assert identity is not None
    raise ValidationRejected(
        f"cited source {'/'.join(identity)} is not in the archive",
        reason=ReasonCode.INVALID_SOURCE,
        guidance="Cite only archived sources, written as [short keyword](provider/thread/message).",
        path=topic,
    )
