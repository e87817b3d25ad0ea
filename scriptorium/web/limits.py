"""Limits checked before a request body is read, and while it is: who is asking, how big the body is, how long
it takes to come, how deep its JSON nests.

FastAPI reads and parses a route's body before its dependencies run, the token check among them, so
without this an unauthenticated caller could make the server buffer and parse any amount (300 MB took a
gigabyte of memory). This ASGI middleware answers first:

* an ``/api/`` request that carries a body but no token: 401 (a token the server does not know, or one
  whose scope the route does not take: 403, as the route's guard says), before one byte is read;
* a body declared (``Content-Length``) over :data:`MAX_BODY_BYTES`: 413 ``PAYLOAD_TOO_LARGE``, unread;
* a body sent without a length (chunked): read only up to the limit, then 413;
* a body not whole within ``body_timeout_s`` of the route's first read (a trickle: 1,100 such sign-ins
  held a server): 408 ``REQUEST_TIMEOUT``, and the connection closes;
* a JSON body whose arrays and objects nest deeper than :data:`MAX_JSON_DEPTH`: 400 ``INVALID_ARGUMENT``,
  before any route parses it (depth 1,000 made the standard parser raise ``RecursionError``: a 500).

The body is read whole when the route first asks for it, then handed over in one piece. The page
(``/memory``, cookie-authenticated forms) has the same size limit and deadline; its forms are not JSON.
Operation counts are the schemas' own (``memory_changes``: at most
:data:`scriptorium.schemas.changes.MAX_OPERATIONS`). Refusals are the reason-code body
(:func:`scriptorium.errors.error_body`), the 401 and 403 with ``detail`` as the routes' guard words it.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import numpy

from scriptorium.audience import Principal
from scriptorium.defaults import DEFAULT_BODY_TIMEOUT_S
from scriptorium.errors import (
    Forbidden,
    InvalidArgument,
    QuotaExceeded,
    ReasonCode,
    RequestTimeout,
    ScriptoriumError,
    Unauthorized,
    error_body,
)
from scriptorium.web.auth import token_names

MAX_BODY_BYTES = 8 * 1024 * 1024
MAX_JSON_DEPTH = 64
"""Arrays and objects nested in one JSON body: far deeper than any request or payload a runtime sends."""
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})

_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_STEPS = bytes(1 if c in b"[{" else 0xFF if c in b"]}" else 0 for c in range(256))
"""An opening bracket as +1, a closing one as -1 (as signed bytes)."""
_RUN = 1 << 20


def json_depth(body: bytes) -> int:
    """How deep a JSON text's arrays and objects nest, as a parser would descend into them: brackets inside
    strings are text. Linear in the body's length and done in C (about 0.3 s for the worst 8 MiB): escaped
    backslashes and quotes out, every other piece between quotes out, brackets as +1 and -1, the highest
    running sum."""
    unescaped = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    structure = b"".join(unescaped.split(b'"')[::2]).translate(_STEPS, _NOT_BRACKETS)
    steps = numpy.frombuffer(structure, dtype=numpy.int8)
    deepest = level = 0
    for start in range(0, len(steps), _RUN):  # in runs, so the running sums stay a few MiB
        levels = numpy.cumsum(steps[start : start + _RUN], dtype=numpy.int64) + level
        deepest, level = max(deepest, int(levels.max())), int(levels[-1])
    return deepest


def client_key(host: str | None) -> str:
    """Who a connection or a request comes from, for per-client limits: its address, an IPv6 client's /64
    (one host is given a whole /64, and could speak from any address in it)."""
    if not host:
        return ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class _Refused(Exception):
    def __init__(self, status: int, error: ScriptoriumError) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error


class BodyLimits:
    def __init__(
        self,
        app: ASGIApp,
        identify: Callable[[str | None], Principal | None],
        declared: Callable[[Scope], list[str] | None] = lambda scope: None,
        max_bytes: int = MAX_BODY_BYTES,
        body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
        takes_json: Callable[[Scope], bool] = lambda scope: True,
    ) -> None:
        self.app = app
        self.identify = identify
        self.declared = declared
        """The scopes the route a request goes to takes (None: no route, or one that declares none)."""
        self.max_bytes = max_bytes
        self.body_timeout_s = body_timeout_s
        self.takes_json = takes_json
        """Whether the route a request goes to reads its body as JSON (the page's forms do not)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _BODILESS:
            await self.app(scope, receive, send)
            return
        headers = {key.lower(): value for key, value in scope["headers"]}
        if scope["path"].startswith("/api/"):  # as the routes' guard answers, but before the body
            authorization = headers.get(b"authorization")
            if authorization is None:
                await _refuse_token(send, Unauthorized("a token is required"), {"www-authenticate": "Bearer"})
                return
            principal = self.identify(authorization.decode("latin-1"))
            if principal is None:
                await _refuse_token(send, Forbidden("this token names nobody this server knows"), {})
                return
            allowed = self.declared(scope)
            if allowed is not None and principal.scope not in allowed:
                await _refuse_token(send, Forbidden(f"this route takes {token_names(allowed)}"), {})
                return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _refuse(send, self._too_large())
            return
        json_body = self.takes_json(scope)
        refusal: _Refused | None = None
        handed = left = False

        async def limited() -> Message:
            nonlocal refusal, handed, left
            if refusal is not None:  # to the app, the client is gone (it never gets a whole body)
                return {"type": "http.disconnect"}
            if handed:  # the body is the app's: what comes now is the client leaving
                return await receive()
            try:
                message = await self._read(receive, json_body)
            except _Refused as refused:
                refusal = refused
                return {"type": "http.disconnect"}
            handed = message["type"] == "http.request"
            left = not handed
            return message

        answered = False

        async def answering(message: Message) -> None:
            nonlocal answered
            if refusal is None:
                await send(message)
            elif message["type"] == "http.response.start" and not answered:
                answered = True
                await _refuse(send, refusal)

        try:
            await self.app(scope, limited, answering)
        except Exception:
            if refusal is None and not left:  # a client gone mid-body hears nothing more: no error to log
                raise
        if refusal is not None and not answered:
            await _refuse(send, refusal)

    async def _read(self, receive: Receive, json_body: bool) -> Message:
        """The whole body as one message, within the size limit and the deadline (and, for JSON, the depth)."""
        chunks: list[bytes] = []
        seen = 0
        with anyio.move_on_after(self.body_timeout_s) as deadline:
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return message  # the client left: the app hears it
                chunk = message.get("body", b"")
                seen += len(chunk)
                if seen > self.max_bytes:
                    raise self._too_large()
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if deadline.cancelled_caught:
            late = RequestTimeout(
                f"the request body did not arrive within {self.body_timeout_s:g} s",
                guidance="Send the whole body at once; a retry that does may succeed.",
            )
            raise _Refused(408, late)
        body = b"".join(chunks)
        opened = body.count(b"[") + body.count(b"{")  # no deeper than this: most bodies need no more
        if json_body and opened > MAX_JSON_DEPTH and (depth := json_depth(body)) > MAX_JSON_DEPTH:
            deep = InvalidArgument(
                f"the JSON body nests {depth} levels deep; at most {MAX_JSON_DEPTH} are read",
                guidance="Flatten the structure: no request or payload of this API nests that deep.",
            )
            raise _Refused(400, deep)
        return {"type": "http.request", "body": body, "more_body": False}

    def _too_large(self) -> _Refused:
        error = QuotaExceeded(
            f"the request body is over {self.max_bytes} bytes",
            reason=ReasonCode.PAYLOAD_TOO_LARGE,
            guidance="Send fewer operations per request, or smaller ones.",
        )
        return _Refused(413, error)


async def _refuse(send: Send, refused: _Refused) -> None:
    """The reason-code body; the connection closes after it (the rest of the body stays unread)."""
    extra = {"connection": "close"}
    if refused.error.retryable:
        extra["retry-after"] = "1"
    await _answer(send, refused.status, error_body(refused.error), extra)


async def _refuse_token(send: Send, error: ScriptoriumError, extra: dict[str, str]) -> None:
    """A request whose token this route does not take, before its body is read: 401 or 403, as the routes'
    guard answers (its message in ``detail`` too, as FastAPI's refusals have it)."""
    status = 401 if error.reason == ReasonCode.UNAUTHORIZED else 403
    await _answer(send, status, error_body(error, detail=error.message), extra)


async def _answer(send: Send, status: int, body: dict[str, Any], extra: dict[str, str]) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
