"""Every error answer of the API, one shape: the reason-code body (:func:`scriptorium.errors.error_body`,
described to clients as :class:`scriptorium.schemas.api.ErrorBody`).

Three handlers make it: a route's :class:`ScriptoriumError` (its reason code mapped to an HTTP status), a
request that fails its schema (422 ``INVALID_ARGUMENT``, every error found in ``detail``), and FastAPI's and
Starlette's own refusals (a missing token 401 ``UNAUTHORIZED``, a foreign one 403 ``FORBIDDEN``, an unknown
route 404, memory disabled 404: the reason for the status, ``detail`` as FastAPI said it). What refuses
before a route runs (:mod:`scriptorium.web.limits`, :mod:`scriptorium.web.serving`) and the MCP route build
the same body with the same function.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from scriptorium.errors import (
    Forbidden,
    InvalidArgument,
    NotFound,
    ReasonCode,
    ScriptoriumError,
    Unauthorized,
    error_body,
)
from scriptorium.schemas.api import ErrorBody

STATUS_FOR: dict[ReasonCode, int] = {
    ReasonCode.NOT_FOUND: 404,
    ReasonCode.WORKSPACE_NOT_INITIALIZED: 404,
    ReasonCode.REVISION_CONFLICT: 409,
    ReasonCode.LOCK_HELD: 503,
    ReasonCode.INVALID_ARGUMENT: 400,
    ReasonCode.INVALID_PATH: 400,
    ReasonCode.INVALID_PATCH: 400,
    ReasonCode.UNAUTHORIZED: 401,
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


_MEANING: dict[int, str] = {
    400: "A malformed request (INVALID_ARGUMENT, INVALID_PATH, INVALID_PATCH)",
    401: "No token (UNAUTHORIZED)",
    403: "A token this route does not take, or a change outside the caller's scope (FORBIDDEN)",
    404: "Nothing there the caller may see (NOT_FOUND), or memory disabled",
    408: "The body did not arrive in time (REQUEST_TIMEOUT)",
    409: "The revision moved on, or the proposal was decided (REVISION_CONFLICT, PROPOSAL_CLOSED)",
    413: "The body is too large (PAYLOAD_TOO_LARGE)",
    422: "The request fails its schema (INVALID_ARGUMENT, with detail), or the change was understood and refused",
    429: "Too many open proposals or too much stored (QUOTA_EXCEEDED)",
    503: "Retry later, after Retry-After (LOCK_HELD and the other retryable codes)",
}
READ_ERRORS = (400, 401, 403, 404, 422, 503)
"""What any route may answer: a bad request, no token, the wrong one, nothing there, the workspace busy."""
WRITE_ERRORS = (*READ_ERRORS, 408, 409, 413, 429)
"""What a route that takes a body may answer besides."""


def error_responses(statuses: tuple[int, ...] = READ_ERRORS) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route's refusals, each the reason-code body."""
    return {status: {"model": ErrorBody, "description": _MEANING[status]} for status in sorted(statuses)}


def answer(error: ScriptoriumError, status: int | None = None, **more: Any) -> JSONResponse:
    """The reason-code answer for ``error`` (retryable: with ``Retry-After``)."""
    headers = {"Retry-After": "1"} if error.retryable else None
    return JSONResponse(error_body(error, **more), status_code=status or http_status(error.reason), headers=headers)


async def scriptorium_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ScriptoriumError)
    return answer(exc)


async def invalid_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = jsonable_encoder(exc.errors())
    first = errors[0] if errors else {}
    where = ".".join(str(part) for part in first.get("loc", ()))
    message = f"{where}: {first.get('msg', 'invalid request')}" if where else "invalid request"
    refused = InvalidArgument(message, guidance="See the route's schema in /openapi.json.")
    return answer(refused, 422, detail=errors)


def _as_error(status: int, message: str) -> ScriptoriumError:
    if status == 401:
        return Unauthorized(message, guidance="Send Authorization: Bearer <token>.")
    if status == 403:
        return Forbidden(message)
    if status == 404:
        return NotFound(message)
    return ScriptoriumError(message, reason=ReasonCode.UNCLASSIFIED_ERROR if status >= 500 else None)


async def http_refusal(request: Request, exc: Exception) -> Response:
    """FastAPI's and Starlette's own refusals (the guard's 401 and 403, an unknown route, a wrong method)."""
    assert isinstance(exc, HTTPException)
    if exc.status_code in (204, 304) or exc.status_code < 200:  # no body allowed
        return Response(status_code=exc.status_code, headers=exc.headers)
    body = error_body(_as_error(exc.status_code, str(exc.detail)), detail=exc.detail)
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


def install(app: FastAPI) -> None:
    """The three handlers, on ``app``."""
    app.add_exception_handler(ScriptoriumError, scriptorium_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_refusal)
