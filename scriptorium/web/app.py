"""The REST API over the modification interface (FastAPI).

Every ``/api/memory/*`` route needs a token (``Authorization: Bearer …``) and
declares which scopes it admits (:mod:`scriptorium.web.auth`): most are the
owner's; search, records, changes and proposals also answer ``propose`` and
``write`` requesters, within what they may see. The workspace comes from the
server's configuration, never from the request. Reason codes map to HTTP statuses; error bodies carry the reason,
whether a retry can help, the message and repair guidance.

``/mcp`` serves the MCP tools over streamable HTTP, behind the same tokens as ``scriptorium mcp --http``
(:class:`scriptorium.runtimes.mcp.HttpMCP`): with ``/api/hooks``, all a runtime wired by
``setup claude-code --server`` needs from one resident process.
"""

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.convertors import Convertor, register_url_convertor
from starlette.routing import Route

from scriptorium.access.owner import owner_token
from scriptorium.access.requests import Proposals, forget_request, submit
from scriptorium.access.scope import visible_record
from scriptorium.access.tokens import TokenStore
from scriptorium.changes.provenance import conversation_sources, provenance
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import Forbidden, ReasonCode, ScriptoriumError
from scriptorium.provider import effective_core_rendering, injected_text
from scriptorium.recall.branches import shared_view
from scriptorium.recall.index import DEFAULT_LIMIT, RecallIndex, SearchMode
from scriptorium.runtimes.mcp import HttpMCP
from scriptorium.runtimes.watcher import every_interval
from scriptorium.schemas.changes import ForgetRequest, UpdateRequest
from scriptorium.settings import Settings
from scriptorium.web.auth import Caller, Guard, declared_scopes
from scriptorium.web.limits import BodyLimits
from scriptorium.web.page import MemoryPage
from scriptorium.web.runtime import RuntimeRoutes
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.paths import CORE_SOURCE
from scriptorium.workspace.writer_history import WriterHistory


class AnyPath(Convertor[str]):
    """Starlette's ``path`` convertor, line breaks included: a path no route would match is answered 404
    before its scope is checked, and a caller without the scope must get the same 403 for every path."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anypath", AnyPath())

STATUS_FOR: dict[ReasonCode, int] = {
    ReasonCode.NOT_FOUND: 404,
    ReasonCode.WORKSPACE_NOT_INITIALIZED: 404,
    ReasonCode.REVISION_CONFLICT: 409,
    ReasonCode.LOCK_HELD: 503,
    ReasonCode.INVALID_ARGUMENT: 400,
    ReasonCode.INVALID_PATH: 400,
    ReasonCode.INVALID_PATCH: 400,
    ReasonCode.FORBIDDEN: 403,
    ReasonCode.PROPOSAL_CLOSED: 409,
    ReasonCode.REQUESTER_REVOKED: 409,
    ReasonCode.PAYLOAD_TOO_LARGE: 413,
    ReasonCode.QUOTA_EXCEEDED: 429,
    ReasonCode.RATE_LIMITED: 429,
    ReasonCode.REQUEST_TIMEOUT: 408,
}
"""Everything else permanent is 422 (the edit was understood and refused); everything else retryable 503."""


def http_status(reason: ReasonCode) -> int:
    return STATUS_FOR.get(reason, 503 if reason.retryable else 422)


class Rejection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    why: str = Field(default="", max_length=2000, description="The owner's note (kept with the proposal).")


class CoreSave(BaseModel):
    """A compare-and-set save of ``topics/core.md``."""

    model_config = ConfigDict(extra="forbid")
    content: str
    expected_revision: str


def _link(path: str, method: str, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link to the operation at ``path`` (its parameters from this response): what a client, or
    a stateful test, calls next with what it got."""
    return {"operationRef": f"#/paths/{path.replace('~', '~0').replace('/', '~1')}/{method}", "parameters": parameters}


_PROPOSAL = "/api/memory/proposals/{proposal_id}"
_RECORD = "/api/memory/records/{memory_id}"


def _proposal_links(pointer: str, suffix: str = "") -> dict[str, Any]:
    """Links to the proposal whose ID is at ``pointer`` in the response: read it, approve it, reject it."""
    where = f"$response.body#{pointer}"
    return {
        f"Proposal{suffix}": _link(_PROPOSAL, "get", proposal_id=where),
        f"Approve{suffix}": _link(f"{_PROPOSAL}/approve", "post", proposal_id=where),
        f"Reject{suffix}": _link(f"{_PROPOSAL}/reject", "post", proposal_id=where),
    }


_CHANGE_LINKS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Applied (or, with dry_run, validated): the revision, the created IDs, the diff",
        "links": {
            "CreatedRecord": _link(_RECORD, "get", memory_id="$response.body#/created_ids/0"),
            "CreatedRecordProvenance": _link(f"{_RECORD}/provenance", "get", memory_id="$response.body#/created_ids/0"),
        },
    },
    202: {
        "description": "Held: the proposal (a propose token's change), with its dry run",
        "links": _proposal_links("/id"),
    },
}
_LIST_LINKS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The proposals the caller may see, oldest first",
        "links": _proposal_links("/proposals/0/id", "First"),
    }
}
_SEARCH_LINKS: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The best records the caller may see",
        "links": {"FirstHit": _link(_RECORD, "get", memory_id="$response.body#/results/0/memory_id")},
    }
}


def create_app(settings: Settings) -> FastAPI:
    """The API for the workspace at ``<state>/memory``."""
    token, _ = owner_token(settings.state)
    state: dict[str, MemoryWorkspace] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop_watching = threading.Event()
        every_interval(settings, stop_watching)  # the session watcher runs beside the server (module docs)
        async with mcp.running():
            yield
        stop_watching.set()
        runtime_routes.close()
        for workspace in state.values():
            workspace.close()

    # No /docs or /redoc: FastAPI serves their pages with scripts from a CDN; the schema is at /openapi.json.
    app = FastAPI(title="Scriptorium memory API", version="1", lifespan=lifespan, docs_url=None, redoc_url=None)

    guard = Guard(token, TokenStore(settings.state))
    owner = guard.requires("owner")
    requester = guard.requires("owner", "propose", "write")

    def workspace() -> MemoryWorkspace:
        if settings.backend == "none":  # refused before any workspace is opened or created
            raise HTTPException(404, "memory is disabled (memory.backend=none)")
        return open_workspace()

    Workspace = Annotated[MemoryWorkspace, Depends(workspace)]

    def open_workspace() -> MemoryWorkspace:
        if "ws" not in state:
            state["ws"] = MemoryWorkspace(settings.memory_dir, settings.workspace_config())
        return state["ws"]

    app.include_router(MemoryPage(settings, token, open_workspace).router)

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        """The address ``serve`` prints leads to the page (its sign-in first), not to a JSON 404."""
        return RedirectResponse("/memory", status_code=303)

    runtime_routes = RuntimeRoutes(settings, open_workspace, guard)
    app.include_router(runtime_routes.router)
    # The MCP tools beside the hooks route: a runtime wired with `setup --server` reaches both here, and
    # starts no process of its own per session or per hook.
    mcp = HttpMCP(settings, token)
    app.router.routes.append(Route("/mcp", endpoint=mcp))

    # Before any body is read (limits.py): who is asking, whether the route takes them, how big the body is;
    # while it is, how long it takes and how deep its JSON nests (every route but the page's forms).
    app.add_middleware(
        BodyLimits,
        identify=guard.identify,
        declared=lambda scope: declared_scopes(app, scope),
        body_timeout_s=settings.body_timeout_s,
        takes_json=lambda scope: not scope["path"].startswith("/memory/"),
    )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = jsonable_encoder(exc.errors())
        first = errors[0] if errors else {}
        where = ".".join(str(part) for part in first.get("loc", ()))
        body = {
            "reason": str(ReasonCode.INVALID_ARGUMENT),
            "retryable": False,
            "message": f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request",
            "guidance": "See the route's schema in /openapi.json.",
            "rejected_text": "",
            "path": "",
            "detail": errors,
        }
        return JSONResponse(body, status_code=422)

    @app.exception_handler(ScriptoriumError)
    async def scriptorium_error(request: Request, exc: ScriptoriumError) -> JSONResponse:
        headers = {"Retry-After": "1"} if exc.retryable else None
        return JSONResponse(exc.to_dict(), status_code=http_status(exc.reason), headers=headers)

    @app.post("/api/memory/changes", responses=_CHANGE_LINKS, **requester)
    def post_changes(body: UpdateRequest, ws: Workspace, caller: Caller) -> JSONResponse:
        """Apply memory_changes, whole-topic changes or a unified diff (exactly one; requesters send
        memory_changes only). A write token's change applies within its audience; a propose token's is
        validated as a dry run and held (202 with the proposal)."""
        status, result = submit(ws, body, caller)
        return JSONResponse(result, status_code=status)

    @app.get("/api/memory/records/{memory_id}", **requester)
    def get_record(memory_id: str, ws: Workspace, caller: Caller) -> dict[str, Any]:
        """One record, if the caller may see it (else NOT_FOUND, as for a record that does not exist)."""
        return visible_record(ws, memory_id, caller.viewer, shared_view(settings.session_store_url))

    @app.get("/api/memory/proposals", responses=_LIST_LINKS, **requester)
    def list_proposals(
        ws: Workspace, caller: Caller, state: Literal["held", "approved", "rejected", "stale"] | None = None
    ) -> dict[str, Any]:
        """The hold queue: every proposal for the owner, a requester's own for a requester."""
        return {"proposals": Proposals(ws, settings.state).listed(caller, state)}

    @app.get("/api/memory/proposals/{proposal_id}", **requester)
    def get_proposal(proposal_id: str, ws: Workspace, caller: Caller) -> dict[str, Any]:
        return Proposals(ws, settings.state).one(caller, proposal_id)

    @app.post("/api/memory/proposals/{proposal_id}/approve", **owner)
    def approve_proposal(proposal_id: str, ws: Workspace, caller: Caller) -> dict[str, Any]:
        """Apply a held proposal on the current revision (refused with its reason code when it no longer
        applies: the proposal stays, marked stale)."""
        return Proposals(ws, settings.state).approve(proposal_id, caller)

    @app.post("/api/memory/proposals/{proposal_id}/reject", **owner)
    def reject_proposal(
        proposal_id: str, ws: Workspace, caller: Caller, body: Rejection | None = None
    ) -> dict[str, Any]:
        """Discard a proposal: the memory does not change; the history records the decision."""
        return Proposals(ws, settings.state).reject(proposal_id, caller, body.why if body else "")

    @app.post("/api/memory/forget", **owner)
    def post_forget(body: ForgetRequest, ws: Workspace) -> dict[str, Any]:
        """Forget a conversation or some sources for real: records citing only them deleted, others losing
        those citations, the sources redacted to tombstones, derived state and the session store's copy
        erased; ``purge_history`` also rewrites git history. ``dry_run`` lists what would go."""
        return forget_request(ws, body, settings.session_store_url)

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

    @app.get("/api/memory/topics/{path:anypath}", **owner)
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

    @app.put("/api/memory/core", **owner)
    def put_core(body: CoreSave, ws: Workspace) -> dict[str, Any]:
        """Save ``topics/core.md`` only if the workspace is still at ``expected_revision``."""
        exists = CORE_SOURCE in ws.snapshot().topic_shas
        change = TopicChange(CORE_SOURCE, "update" if exists else "create", body.content)
        return update_memory(
            ws, changes=[change], message="Edit core", expected_revision=body.expected_revision
        ).to_dict()

    @app.get("/api/memory/search", responses=_SEARCH_LINKS, **requester)
    def search(
        ws: Workspace,
        caller: Caller,
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
        hits = index.search(
            q, limit, include_pending=include_pending, mode=chosen, branches=branches, viewer=caller.viewer
        )
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
