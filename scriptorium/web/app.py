"""The server ``scriptorium serve`` runs (FastAPI): the wiring of its parts.

* the REST API over the modification interface (:mod:`scriptorium.web.api`, routers by job): every
  ``/api/memory/*`` route needs a token (``Authorization: Bearer …``) and declares which scopes it admits
  (:mod:`scriptorium.web.auth`): most are the owner's; search, records, changes and proposals also answer
  ``propose`` and ``write`` requesters, within what they may see. The workspace comes from the server's
  configuration, never from the request;
* the runtime routes (:mod:`scriptorium.web.runtime`) and the Memory page (:mod:`scriptorium.web.page`);
* ``/mcp``: the MCP tools over streamable HTTP, behind the same tokens as ``scriptorium mcp --http``
  (:class:`scriptorium.runtimes.mcp.server.HttpMCP`): with ``/api/hooks``, all a runtime wired by
  ``setup claude-code --server`` needs from one resident process.

Every JSON answer has its model (:mod:`scriptorium.schemas.api`), so ``/openapi.json`` describes it; every
refusal is the reason-code body (:mod:`scriptorium.web.errors`): the reason, whether a retry can help, the
message and repair guidance, with the reason's HTTP status.
"""

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.routing import Route

from scriptorium.access.owner import owner_token
from scriptorium.access.tokens import TokenStore
from scriptorium.runtimes.hooks.watcher import every_interval
from scriptorium.runtimes.mcp.server import HttpMCP
from scriptorium.settings import Settings
from scriptorium.web import errors
from scriptorium.web.api import ROUTERS
from scriptorium.web.api.served import ServedWorkspace, serve_on
from scriptorium.web.auth import Guard, declared_scopes
from scriptorium.web.limits import BodyLimits
from scriptorium.web.page import MemoryPage
from scriptorium.web.runtime import RuntimeRoutes


def create_app(settings: Settings) -> FastAPI:
    """The server for the workspace at ``<state>/memory``."""
    token, _ = owner_token(settings.state)
    guard = Guard(token, TokenStore(settings.state))
    workspace = ServedWorkspace(settings)
    runtime_routes = RuntimeRoutes(settings, workspace, guard)
    # The MCP tools beside the hooks route: a runtime wired with `setup --server` reaches both here, and
    # starts no process of its own per session or per hook.
    mcp = HttpMCP(settings, token)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        stop_watching = threading.Event()
        every_interval(settings, stop_watching)  # the session watcher runs beside the server (module docs)
        async with mcp.running():
            yield
        stop_watching.set()
        runtime_routes.close()
        workspace.close()

    # No /docs or /redoc: FastAPI serves their pages with scripts from a CDN; the schema is at /openapi.json.
    app = FastAPI(title="Scriptorium memory API", version="1", lifespan=lifespan, docs_url=None, redoc_url=None)
    serve_on(app, settings, guard, workspace)
    errors.install(app)
    app.include_router(MemoryPage(settings, token, workspace).router)
    app.add_api_route("/", _to_the_page, include_in_schema=False)
    app.include_router(runtime_routes.router)
    for router in ROUTERS:
        app.include_router(router)
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
    return app


def _to_the_page() -> RedirectResponse:
    """The address ``serve`` prints leads to the page (its sign-in first), not to a JSON 404."""
    return RedirectResponse("/memory", status_code=303)
