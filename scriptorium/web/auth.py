"""Who is asking, and what each route lets them do: one guard for every route of the API.

A request carries ``Authorization: Bearer <token>``: the owner token
(``<state>/owner-token``) or a scoped token (:mod:`scriptorium.access.tokens`). Every
route declares the scopes it admits with :meth:`Guard.requires`, which also
writes them into the OpenAPI document as ``x-scopes`` — so a test can walk the
served document and check that every route refuses a request without a token
(401) and one whose token lacks the scope (403). For a request with a body the
same answers come from :mod:`scriptorium.web.limits`, before the body is read
(FastAPI parses a body before a route's dependencies run): :func:`declared_scopes`
finds the route's declaration.

* ``owner`` — the owner token: the memory API and the page.
* ``runtime`` — what an agent runtime needs and nothing else (events, session
  nodes, the effective core, trusted search, hooks). The owner token is not a
  runtime token: a route for runtimes refuses it.
* ``propose`` / ``write`` — a requester's reads (search, records, the core) and
  changes (held as proposals, or applied within its audience).

A route's handler reads who is asking with the :data:`Caller` parameter (the
principal the guard found, kept on the request).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, MutableMapping
from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request
from fastapi.routing import APIRoute
from starlette.applications import Starlette
from starlette.routing import Match

from scriptorium.access.tokens import TokenStore, identify
from scriptorium.audience import Principal, Scope

SCOPES_KEY = "x-scopes"


class Guard:
    """Checks bearer tokens against the owner token and the scoped-token store."""

    def __init__(self, owner_token: str, tokens: TokenStore) -> None:
        self.owner_token = owner_token
        self.tokens = tokens

    def identify(self, authorization: str | None) -> Principal | None:
        """The principal behind an ``Authorization`` header, or None when it names nobody we know."""
        return identify(self.owner_token, self.tokens, authorization)

    def requires(self, *scopes: Scope, openapi_extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Route keyword arguments admitting ``scopes`` only: the check, and its declaration in OpenAPI
        (merged into the route's own ``openapi_extra``)."""
        return _requiring(lambda request: self, scopes, openapi_extra)

    def admit(self, request: Request, authorization: str | None, scopes: Iterable[Scope]) -> Principal:
        """The principal behind ``authorization`` if its scope is one of ``scopes`` (kept on the request), else
        401 without a token, 403 with one that names nobody or has another scope."""
        names = token_names(scopes)
        if authorization is None:
            raise HTTPException(401, f"{names} is required", headers={"WWW-Authenticate": "Bearer"})
        principal = self.identify(authorization)
        if principal is None or principal.scope not in frozenset(scopes):
            raise HTTPException(403, f"this route takes {names}")
        request.state.principal = principal
        return principal


def requires(*scopes: Scope, openapi_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """:meth:`Guard.requires` for a route declared before its app is made (the routers of
    :mod:`scriptorium.web.api`): the app's guard (``app.state.guard``) checks."""
    return _requiring(_app_guard, scopes, openapi_extra)


def _app_guard(request: Request) -> Guard:
    guard = getattr(request.app.state, "guard", None)
    if not isinstance(guard, Guard):  # an app without a guard admits nobody
        raise HTTPException(403, "this server has no guard")
    return guard


def _requiring(
    guard: Callable[[Request], Guard], scopes: tuple[Scope, ...], openapi_extra: dict[str, Any] | None
) -> dict[str, Any]:
    allowed = sorted(frozenset(scopes))

    def check(request: Request, authorization: Annotated[str | None, Header()] = None) -> Principal:
        return guard(request).admit(request, authorization, scopes)

    return {"dependencies": [Depends(check)], "openapi_extra": {**(openapi_extra or {}), SCOPES_KEY: allowed}}


def token_names(scopes: Iterable[str]) -> str:
    """``the owner token or a propose token``: what a refusal says a route takes."""
    return " or ".join(f"a {s} token" if s != "owner" else "the owner token" for s in scopes)


def declared_scopes(app: Starlette, scope: MutableMapping[str, Any]) -> list[str] | None:
    """The scopes the API route a request goes to declares (:meth:`Guard.requires`); None: no such route."""
    return _declared(app.routes, scope)


def _declared(routes: Iterable[Any], scope: MutableMapping[str, Any]) -> list[str] | None:
    for route in routes:
        if isinstance(route, APIRoute):
            if route.matches(scope)[0] == Match.FULL:
                declared = (route.openapi_extra or {}).get(SCOPES_KEY)
                return list(declared) if declared is not None else None
            continue
        # An included router (FastAPI keeps it whole, as ``original_router``) or a mounted one.
        inner = getattr(getattr(route, "original_router", route), "routes", None)
        if inner is not None and (found := _declared(inner, scope)) is not None:
            return found
    return None


def _caller(request: Request) -> Principal:
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):  # a route that forgot its guard must fail closed
        raise HTTPException(403, "this route has no scope declared")
    return principal


Caller = Annotated[Principal, Depends(_caller)]
"""Who is asking: a handler parameter, filled in by the route's guard (which runs first)."""
