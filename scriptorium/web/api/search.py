"""Finding things in the memory, and how it stands: search (bm25, embedding or hybrid, within what the caller
may see) and the status (revision, counts, the recent write passes)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from scriptorium.errors import Forbidden
from scriptorium.recall.branches import shared_view
from scriptorium.recall.index import DEFAULT_LIMIT, RecallIndex, SearchMode
from scriptorium.schemas.api import SearchResults, Status
from scriptorium.web.api.served import OWNER, RECORD, REQUESTERS, ServedSettings, Workspace, declared, link
from scriptorium.web.auth import Caller
from scriptorium.workspace.writer_history import WriterHistory

router = APIRouter()

_FOUND: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The best records the caller may see",
        "links": {"FirstHit": link(RECORD, "get", memory_id="$response.body#/results/0/memory_id")},
    }
}


@router.get("/api/memory/search", response_model=SearchResults, **declared(REQUESTERS, answers=_FOUND))
def search(
    ws: Workspace,
    caller: Caller,
    settings: ServedSettings,
    q: Annotated[str, Query(min_length=1, max_length=2000, description="words to look for")],
    limit: Annotated[int, Query(ge=1, le=100)] = DEFAULT_LIMIT,
    include_pending: bool = False,
    mode: SearchMode | None = None,
) -> dict[str, Any]:
    """Search the records the caller may see (bm25, embedding or hybrid; default from settings); the owner
    may include records backed by pending sources (marked)."""
    if include_pending and caller.scope != "owner":
        raise Forbidden("only the owner searches records backed by pending sources")
    index = RecallIndex.open(ws.root)
    branches = shared_view(settings.session_store_url)
    chosen = mode or settings.search_mode
    hits = index.search(q, limit, include_pending=include_pending, mode=chosen, branches=branches, viewer=caller.viewer)
    return {"query": q, "revision": ws.revision, "results": [hit.to_dict() for hit in hits]}


@router.get("/api/memory/status", response_model=Status, **declared(OWNER))
def get_status(ws: Workspace) -> dict[str, Any]:
    snap = ws.snapshot()
    history = WriterHistory(ws.root / ".scriptorium").recent(20)
    return {
        "revision": snap.tree,
        "topics": len(snap.topics),
        "records": len(snap.id_to_topic),
        "recent_passes": history,
        "failures": [h for h in history if not h.get("ok", True)],
    }
