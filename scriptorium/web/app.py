"""The owner REST API over the modification interface (FastAPI).

Every ``/api/memory/*`` route needs the owner's token (``Authorization: Bearer
…``); the workspace comes from the server's configuration, never from the
request. Reason codes map to HTTP statuses; error bodies carry the reason,
whether a retry can help, the message and repair guidance.
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from schemas.changes import UpdateRequest
from scriptorium.access import TokenStore
from scriptorium.changes.provenance import conversation_sources, provenance
from scriptorium.changes.read import record_payload
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import ReasonCode, ScriptoriumError
from scriptorium.owner import owner_token
from scriptorium.provider import effective_core
from scriptorium.recall.branches import shared_view
from scriptorium.recall.index import DEFAULT_LIMIT, RecallIndex, SearchMode
from scriptorium.settings import Settings
from scriptorium.tokens import count_tokens
from scriptorium.web.auth import Guard, Principal
from scriptorium.web.page import MemoryPage
from scriptorium.web.runtime import RuntimeRoutes
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.paths import CORE_SOURCE
from scriptorium.writing.history import WriterHistory

STATUS_FOR: dict[ReasonCode, int] = {
    ReasonCode.NOT_FOUND: 404,
    ReasonCode.WORKSPACE_NOT_INITIALIZED: 404,
    ReasonCode.REVISION_CONFLICT: 409,
    ReasonCode.LOCK_HELD: 503,
    ReasonCode.INVALID_ARGUMENT: 400,
    ReasonCode.INVALID_PATH: 400,
    ReasonCode.INVALID_PATCH: 400,
}
"""Everything else permanent is 422 (the edit was understood and refused); everything else retryable 503."""


def http_status(reason: ReasonCode) -> int:
    return STATUS_FOR.get(reason, 503 if reason.retryable else 422)


class CoreSave(BaseModel):
    """A compare-and-set save of ``topics/core.md``."""

    model_config = ConfigDict(extra="forbid")
    content: str
    expected_revision: str


def create_app(settings: Settings) -> FastAPI:
    """The API for the workspace at ``<state>/memory``."""
    token, _ = owner_token(settings.state)
    state: dict[str, MemoryWorkspace] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        runtime_routes.close()
        for workspace in state.values():
            workspace.close()

    app = FastAPI(title="Scriptorium memory API", version="1", lifespan=lifespan)

    guard = Guard(token, TokenStore(settings.state))
    owner = guard.requires("owner")

    def workspace(_: Annotated[Principal, owner["dependencies"][0]]) -> MemoryWorkspace:
        if settings.backend == "none":  # refused before any workspace is opened or created
            raise HTTPException(404, "memory is disabled (memory.backend=none)")
        return open_workspace()

    Workspace = Annotated[MemoryWorkspace, Depends(workspace)]

    def open_workspace() -> MemoryWorkspace:
        if "ws" not in state:
            state["ws"] = MemoryWorkspace(settings.memory_dir, settings.workspace_config())
        return state["ws"]

    app.include_router(MemoryPage(settings, token, open_workspace).router)
    runtime_routes = RuntimeRoutes(settings, open_workspace, guard)
    app.include_router(runtime_routes.router)

    @app.exception_handler(ScriptoriumError)
    async def scriptorium_error(request: Request, exc: ScriptoriumError) -> JSONResponse:
        headers = {"Retry-After": "1"} if exc.retryable else None
        return JSONResponse(exc.to_dict(), status_code=http_status(exc.reason), headers=headers)

    @app.post("/api/memory/changes", **owner)
    def post_changes(body: UpdateRequest, ws: Workspace) -> dict[str, Any]:
        """Apply memory_changes, whole-topic changes or a unified diff (exactly one)."""
        return update_memory(ws, **body.arguments()).to_dict()

    @app.get("/api/memory/records/{memory_id}", **owner)
    def get_record(memory_id: str, ws: Workspace) -> dict[str, Any]:
        return record_payload(ws.snapshot(), memory_id, shared_view(settings.session_store_url))

    @app.get("/api/memory/records/{memory_id}/provenance", **owner)
    def get_provenance(memory_id: str, ws: Workspace) -> dict[str, Any]:
        """The record, each source it cites as archived, and the commits that introduced and last changed it."""
        return provenance(ws, memory_id, shared_view(settings.session_store_url))

    @app.get("/api/memory/sources", **owner)
    def get_sources(ws: Workspace, thread: str | None = None, session: str | None = None) -> dict[str, Any]:
        """What was archived from one conversation (``thread=provider/thread`` or ``session=ID``), each
        source with the records citing it."""
        return conversation_sources(ws, thread=thread, session=session)

    @app.get("/api/memory/topics", **owner)
    def list_topics(ws: Workspace) -> dict[str, Any]:
        snap = ws.snapshot()
        return {"revision": snap.tree, "topics": sorted(snap.topic_shas)}

    @app.get("/api/memory/topics/{path:path}", **owner)
    def get_topic(path: str, ws: Workspace) -> dict[str, Any]:
        return {"path": path, "content": ws.read_topic(path), "revision": ws.revision}

    @app.get("/api/memory/core", **owner)
    def get_core(ws: Workspace) -> dict[str, Any]:
        """The authoritative source, the rendered block and the effective injection, as one snapshot."""
        with ws.lock():  # never mid-install
            snap = ws.snapshot()
            source = ws.read_topic(CORE_SOURCE) if CORE_SOURCE in snap.topic_shas else ""
            core = ws.core_rendering()
            mtime = (ws.root / CORE_SOURCE).stat().st_mtime if source else None
            branches = shared_view(settings.session_store_url)
            effective = effective_core(ws, RecallIndex.open(ws.root), branches) if settings.core_inject else ""
        return {
            "revision": snap.tree,
            "content": source,
            "size": len(source.encode()),
            "mtime": mtime,
            "rendered": core.text,
            "inject": settings.core_inject,
            "effective": effective,
            "tokens": count_tokens(effective) if effective else 0,
            "budget": core.budget,
            "omitted_ids": list(core.omitted_ids),
        }

    @app.put("/api/memory/core", **owner)
    def put_core(body: CoreSave, ws: Workspace) -> dict[str, Any]:
        """Save ``topics/core.md`` only if the workspace is still at ``expected_revision``."""
        exists = CORE_SOURCE in ws.snapshot().topic_shas
        change = TopicChange(CORE_SOURCE, "update" if exists else "create", body.content)
        return update_memory(
            ws, changes=[change], message="Edit core", expected_revision=body.expected_revision
        ).to_dict()

    @app.get("/api/memory/search", **owner)
    def search(
        ws: Workspace,
        q: Annotated[str, Query(min_length=1, max_length=2000, description="words to look for")],
        limit: Annotated[int, Query(ge=1, le=100)] = DEFAULT_LIMIT,
        include_pending: bool = False,
        mode: SearchMode | None = None,
    ) -> dict[str, Any]:
        """Search the records (bm25, embedding or hybrid; default from settings); the owner may include
        records backed by pending sources (marked)."""
        index = RecallIndex.open(ws.root)
        branches = shared_view(settings.session_store_url)
        chosen = mode or settings.search_mode
        hits = index.search(q, limit, include_pending=include_pending, mode=chosen, branches=branches)
        return {"query": q, "revision": ws.revision, "results": [hit.to_dict() for hit in hits]}

    @app.get("/api/memory/status", **owner)
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

    return app
