"""What the API's routes are given: the served settings, the one workspace and the caller, as FastAPI
dependencies read from the app (``app.state``: :func:`serve_on` puts them there), and how a route declares
its scopes, its answer and its refusals (:func:`declared`)."""

from __future__ import annotations

import threading
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request

from scriptorium.audience import Scope
from scriptorium.settings import Settings
from scriptorium.web.auth import Guard, requires
from scriptorium.web.errors import READ_ERRORS, error_responses
from scriptorium.workspace import MemoryWorkspace


class ServedWorkspace:
    """The workspace at ``<state>/memory``, opened by the first request that needs it, closed with the app."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._ws: MemoryWorkspace | None = None
        self._lock = threading.Lock()

    def __call__(self) -> MemoryWorkspace:
        with self._lock:
            if self._ws is None:
                self._ws = MemoryWorkspace(self.settings.memory_dir, self.settings.workspace_config())
            return self._ws

    def close(self) -> None:
        with self._lock:
            if self._ws is not None:
                self._ws.close()


def serve_on(app: FastAPI, settings: Settings, guard: Guard, workspace: ServedWorkspace) -> None:
    """What the routers' dependencies read: the settings, the guard, the workspace."""
    app.state.settings = settings
    app.state.guard = guard
    app.state.workspace = workspace


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


ServedSettings = Annotated[Settings, Depends(_settings)]


def _workspace(request: Request, settings: ServedSettings) -> MemoryWorkspace:
    if settings.backend == "none":  # refused before any workspace is opened or created
        raise HTTPException(404, "memory is disabled (memory.backend=none)")
    opened: ServedWorkspace = request.app.state.workspace
    return opened()


Workspace = Annotated[MemoryWorkspace, Depends(_workspace)]

OWNER: tuple[Scope, ...] = ("owner",)
REQUESTERS: tuple[Scope, ...] = ("owner", "propose", "write")
"""Search, records, changes and proposals also answer requesters, within what they may see."""


def declared(
    scopes: tuple[Scope, ...],
    errors: tuple[int, ...] = READ_ERRORS,
    answers: dict[int | str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A route's keyword arguments: the scopes it admits (checked, and declared as ``x-scopes``), its refusals
    (each the reason-code body) beside its ``answers``, and its answer served as its model has it (the
    keys the handler returned, no default added)."""
    return {
        **requires(*scopes),
        "responses": {**error_responses(errors), **(answers or {})},
        "response_model_exclude_unset": True,
    }


def link(path: str, method: str, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link to the operation at ``path`` (its parameters from this response): what a client, or
    a stateful test, calls next with what it got."""
    return {"operationRef": f"#/paths/{path.replace('~', '~0').replace('/', '~1')}/{method}", "parameters": parameters}


RECORD = "/api/memory/records/{memory_id}"
PROPOSAL = "/api/memory/proposals/{proposal_id}"
