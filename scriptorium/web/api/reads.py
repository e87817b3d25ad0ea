"""Reading the memory: one record (as the caller may see it) and its provenance, what one conversation left
in the archive, the topics, and the core as the runtimes get it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.convertors import Convertor, register_url_convertor

from scriptorium.access.scope import visible_record
from scriptorium.changes.provenance import conversation_sources, provenance
from scriptorium.provider import effective_core_rendering, injected_text
from scriptorium.recall.branches import shared_view
from scriptorium.recall.index import RecallIndex
from scriptorium.schemas.api import ConversationSources, CoreView, Record, RecordProvenance, Topic, TopicList
from scriptorium.web.api.served import OWNER, REQUESTERS, ServedSettings, Workspace, declared
from scriptorium.web.auth import Caller
from scriptorium.workspace.paths import CORE_SOURCE


class AnyPath(Convertor[str]):
    """Starlette's ``path`` convertor, line breaks included: a path no route would match is answered 404
    before its scope is checked, and a caller without the scope must get the same 403 for every path."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anypath", AnyPath())

router = APIRouter()


@router.get("/api/memory/records/{memory_id}", response_model=Record, **declared(REQUESTERS))
def get_record(memory_id: str, ws: Workspace, caller: Caller, settings: ServedSettings) -> dict[str, Any]:
    """One record, if the caller may see it (else NOT_FOUND, as for a record that does not exist)."""
    return visible_record(ws, memory_id, caller.viewer, shared_view(settings.session_store_url))


@router.get("/api/memory/records/{memory_id}/provenance", response_model=RecordProvenance, **declared(OWNER))
def get_provenance(memory_id: str, ws: Workspace, settings: ServedSettings) -> dict[str, Any]:
    """The record, each source it cites as archived, and the commits that introduced and last changed it."""
    return provenance(ws, memory_id, shared_view(settings.session_store_url))


@router.get("/api/memory/sources", response_model=ConversationSources, **declared(OWNER))
def get_sources(ws: Workspace, thread: str | None = None, session: str | None = None) -> dict[str, Any]:
    """What was archived from one conversation (``thread=provider/thread`` or ``session=ID``), each
    source with the records citing it."""
    return conversation_sources(ws, thread=thread, session=session)


@router.get("/api/memory/topics", response_model=TopicList, **declared(OWNER))
def list_topics(ws: Workspace) -> dict[str, Any]:
    snap = ws.snapshot()
    return {"revision": snap.tree, "topics": sorted(snap.topic_shas)}


@router.get("/api/memory/topics/{path:anypath}", response_model=Topic, **declared(OWNER))
def get_topic(path: str, ws: Workspace) -> dict[str, Any]:
    return {"path": path, "content": ws.read_topic(path), "revision": ws.revision}


@router.get("/api/memory/core", response_model=CoreView, **declared(OWNER))
def get_core(ws: Workspace, settings: ServedSettings) -> dict[str, Any]:
    """The authoritative source, the rendered block and the effective injection, as one snapshot."""
    with ws.lock():  # never mid-install
        snap = ws.snapshot()
        source = ws.read_topic(CORE_SOURCE) if CORE_SOURCE in snap.topic_shas else ""
        core = ws.core_rendering()
        mtime = (ws.root / CORE_SOURCE).stat().st_mtime if source else None
        branches = shared_view(settings.session_store_url)
        rendering = effective_core_rendering(ws, RecallIndex.open(ws.root), branches)
        effective = injected_text(rendering) if settings.core_inject else ""
    return {
        "revision": snap.tree,
        "content": source,
        "size": len(source.encode()),
        "mtime": mtime,
        "rendered": core.text,
        "inject": settings.core_inject,
        "effective": effective,
        "tokens": rendering.tokens if settings.core_inject else 0,  # as `memory core` and `memory status` count it
        "budget": core.budget,
        "omitted_ids": list(core.omitted_ids),
    }
