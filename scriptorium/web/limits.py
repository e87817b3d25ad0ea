"""Limits checked before a request body is read: who is asking, then how big the body is.

FastAPI reads and parses a route's body before its dependencies run, the token check among them, so
without this an unauthenticated caller could make the server buffer and parse any amount (300 MB took a
gigabyte of memory). This ASGI middleware answers first:

* an ``/api/`` request that carries a body but no token: 401 (a token the server does not know, or one
  whose scope the route does not take: 403, as the route's guard says), before one byte is read;
* a body declared (``Content-Length``) over :data:`MAX_BODY_BYTES`: 413 ``PAYLOAD_TOO_LARGE``, unread;
* a body sent without a length (chunked): read only up to the limit, then 413.

The page (``/memory``, cookie-authenticated forms) has the same size limit. Operation counts are the
schemas' own (``memory_changes``: at most :data:`scriptorium.schemas.changes.MAX_OPERATIONS`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from scriptorium.access.audience import Principal
from scriptorium.errors import ReasonCode
from scriptorium.web.auth import token_names

MAX_BODY_BYTES = 8 * 1024 * 1024
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


class BodyLimits:
    def __init__(
        self,
        app: ASGIApp,
        identify: Callable[[str | None], Principal | None],
        declared: Callable[[Scope], list[str] | None] = lambda scope: None,
        max_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.app = app
        self.identify = identify
        self.declared = declared
        """The scopes the route a request goes to takes (None: no route, or one that declares none)."""
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in _BODILESS:
            await self.app(scope, receive, send)
            return
        headers = {key.lower(): value for key, value in scope["headers"]}
        if scope["path"].startswith("/api/"):  # as the routes' guard answers, but before the body
            authorization = headers.get(b"authorization")
            if authorization is None:
                await _answer(send, 401, {"detail": "a token is required"}, {"www-authenticate": "Bearer"})
                return
            principal = self.identify(authorization.decode("latin-1"))
            if principal is None:
                await _answer(send, 403, {"detail": "this token names nobody this server knows"}, {})
                return
            allowed = self.declared(scope)
            if allowed is not None and principal.scope not in allowed:
                await _answer(send, 403, {"detail": f"this route takes {token_names(allowed)}"}, {})
                return
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _too_large(send, self.max_bytes)
            return
        seen = 0
        exceeded = False

        async def limited() -> Message:
            nonlocal seen, exceeded
            if exceeded:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:  # to the app, the client is gone (it never gets a whole body)
                    exceeded = True
                    return {"type": "http.disconnect"}
            return message

        answered = False

        async def answering(message: Message) -> None:
            nonlocal answered
            if not exceeded:
                await send(message)
            elif message["type"] == "http.response.start" and not answered:
                answered = True
                await _too_large(send, self.max_bytes)

        try:
            await self.app(scope, limited, answering)
        except Exception:
            if not exceeded:
                raise
        if exceeded and not answered:
            await _too_large(send, self.max_bytes)


async def _too_large(send: Send, limit: int) -> None:
    body = {
        "reason": str(ReasonCode.PAYLOAD_TOO_LARGE),
        "retryable": False,
        "message": f"the request body is over {limit} bytes",
        "guidance": "Send fewer operations per request, or smaller ones.",
        "rejected_text": "",
        "path": "",
    }
    await _answer(send, 413, body, {"connection": "close"})


async def _answer(send: Send, status: int, body: dict[str, Any], extra: dict[str, str]) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
