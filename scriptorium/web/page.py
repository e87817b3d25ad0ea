"""The Memory web page at ``/memory``: Topics, Timeline, Recent, Core and Proposals, server-rendered; a
citation opens a read-only view of its source (promote and forget from there).

The owner signs in with the owner token and gets an HttpOnly, SameSite=Strict
session cookie: a random session ID, new at every sign-in, that ends with
**Sign out**, after :data:`SESSION_S` or when the server restarts (sessions are
kept in the server's memory, never on disk). The cookie is ``Secure`` when the
request came over https: served over TLS, or through a proxy ``serve`` trusts
(``--forwarded-allow-ips``) that says so. Sign-ins are throttled per client
address (:class:`SignInThrottle`: 429 ``RATE_LIMITED`` with ``Retry-After``); a
form that is not UTF-8 is a bad request (400 ``INVALID_ARGUMENT``). Every form
that changes memory carries the session's own CSRF token (random too) that is
checked before anything is read. Saves go through the same transaction as every
other edit, compare-and-set on the revision the page was rendered from; a refused
save shows its reason inline with the draft kept. No script runs on the page:
the Content-Security-Policy forbids inline and foreign script, and rendered
memory passes :mod:`scriptorium.web.markdown`'s sanitizer.
"""

from __future__ import annotations

import hmac
import html
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from shlex import quote as quote_arg
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool

from scriptorium.access.requests import Proposals, forget_request
from scriptorium.audience import OWNER, OWNER_PRINCIPAL, Viewer, viewer_for
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import InvalidArgument, RateLimited, ScriptoriumError
from scriptorium.schemas.changes import ForgetRequest
from scriptorium.settings import Settings
from scriptorium.web.limits import client_key
from scriptorium.web.sections import Sections
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.paths import CORE_SOURCE

COOKIE = "scriptorium_session"
SECTIONS = ("topics", "timeline", "recent", "core", "proposals", "sources", "settings", "search")
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_ENV = Environment(loader=PackageLoader("scriptorium.web", "templates"), autoescape=select_autoescape(["html"]))
_STATIC = Path(__file__).parent / "static"


SESSION_S = 12 * 3600
"""How long a page session lasts after sign-in."""
MAX_SESSIONS = 64
"""Sessions kept at once (the oldest ends first): signing in again and again cannot fill the memory."""
MAX_THROTTLED = 4096
"""Client addresses whose sign-ins are counted at once (the least recently seen is forgotten first)."""


def _over_https(request: Request) -> bool:
    """Whether the browser reached us over https: TLS here, or a trusted proxy's ``X-Forwarded-Proto``
    (uvicorn's ``proxy_headers`` set the scheme from it, for ``--forwarded-allow-ips`` only)."""
    return request.scope.get("scheme") == "https"


class PageSessions:
    """The signed-in sessions of the page: session ID → (its CSRF token, when it ends)."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._lock = threading.Lock()

    def start(self) -> str:
        sid, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        with self._lock:
            self._sessions[sid] = (csrf, time.monotonic() + SESSION_S)
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return sid

    def csrf(self, sid: str) -> str | None:
        """The CSRF token of a live session, None for an unknown or ended one."""
        with self._lock:
            found = self._sessions.get(sid)
            if found is None:
                return None
            if found[1] < time.monotonic():
                del self._sessions[sid]
                return None
            return found[0]

    def end(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)


class SignInThrottle:
    """Sign-in attempts per client address: a bucket of ``attempts`` that refills evenly over ``window_s``.
    Each attempt takes one before its token is looked at (so attempts sent at once cannot all pass); a
    sign-in that succeeds gives it back. A client with none left is refused until one is back."""

    def __init__(self, attempts: int, window_s: float) -> None:
        self.attempts = attempts
        self.per_s = attempts / window_s
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # client → (left, when)
        self._lock = threading.Lock()

    def _left(self, client: str, now: float) -> float:
        left, when = self._buckets.get(client, (float(self.attempts), now))
        return min(float(self.attempts), left + (now - when) * self.per_s)

    def take(self, client: str) -> float:
        """Take one attempt for ``client``: 0 when it may try now, else the seconds until it may."""
        with self._lock:
            now = time.monotonic()
            left = self._left(client, now)
            if left < 1:
                return (1 - left) / self.per_s
            self._buckets[client] = (left - 1, now)
            self._buckets.move_to_end(client)
            while len(self._buckets) > MAX_THROTTLED:
                self._buckets.popitem(last=False)
            return 0.0

    def give_back(self, client: str) -> None:
        with self._lock:
            now = time.monotonic()
            if client in self._buckets:
                self._buckets[client] = (min(float(self.attempts), self._left(client, now) + 1), now)


class MemoryPage:
    """Routes of the page; ``open_workspace`` is the API's own (one workspace per server)."""

    def __init__(self, settings: Settings, token: str, open_workspace: Callable[[], MemoryWorkspace]) -> None:
        self.settings = settings
        self.token = token
        self.sessions = PageSessions()
        self.throttle = SignInThrottle(settings.signin_attempts, settings.signin_window_s)
        self.open_workspace = open_workspace
        self.sections = Sections(settings)
        self.router = APIRouter()
        self.router.add_api_route("/memory", self.show, methods=["GET"], include_in_schema=False)
        self.router.add_api_route("/memory/login", self.login, methods=["POST"], include_in_schema=False)
        self.router.add_api_route("/memory/logout", self.logout, methods=["POST"], include_in_schema=False)
        self.router.add_api_route("/memory/save", self.save, methods=["POST"], include_in_schema=False)
        self.router.add_api_route("/memory/decide", self.decide, methods=["POST"], include_in_schema=False)
        self.router.add_api_route("/memory/source", self.act_on_source, methods=["POST"], include_in_schema=False)
        self.router.add_api_route("/memory/static/memory.css", self.css, methods=["GET"], include_in_schema=False)

    # -- plumbing -----------------------------------------------------------------

    def signed_in(self, request: Request) -> str | None:
        """The CSRF token of the request's live session; None when it is not signed in."""
        return self.sessions.csrf(request.cookies.get(COOKIE, ""))

    @staticmethod
    def _html(body: str, status: int = 200) -> HTMLResponse:
        headers = {
            "Content-Security-Policy": CSP,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        }
        return HTMLResponse(body, status_code=status, headers=headers)

    def _render(self, csrf: str, status: int = 200, **context: Any) -> HTMLResponse:
        return self._html(_ENV.get_template("memory.html").render(csrf=csrf, **context), status)

    async def css(self) -> Response:
        return Response((_STATIC / "memory.css").read_bytes(), media_type="text/css")

    async def _form(self, request: Request) -> dict[str, str]:
        """The posted form's fields (the first of each); InvalidArgument for one that is not UTF-8."""
        try:
            text = (await request.body()).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidArgument(
                f"the form is not UTF-8 (byte {exc.start})", guidance="Post the form as a browser does."
            ) from exc
        fields = parse_qs(text, keep_blank_values=True)
        return {key: values[0] for key, values in fields.items()}

    def _sign_in_page(self, error: object) -> str:
        """The sign-in form, saying where the owner token is on the machine serving it (the server's own
        ``owner-token`` file: ``scriptorium serve`` never prints the token itself)."""
        path = self.settings.state / "owner-token"
        return _ENV.get_template("login.html").render(
            error=error, token_path=path, token_command=f"cat {quote_arg(str(path))}"
        )

    def _sign_in_refused(self, error: ScriptoriumError, status: int, headers: dict[str, str] | None = None) -> Response:
        """The sign-in page again, with why this attempt was refused (reason, message, guidance)."""
        response = self._html(self._sign_in_page(error=error.to_dict()), status)
        response.headers.update(headers or {})
        return response

    # -- routes ---------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        client = client_key(request.client.host if request.client else None)  # the proxy's word, if trusted
        wait_s = self.throttle.take(client)
        if wait_s:  # refused before the form is read or the token compared
            retry = max(1, math.ceil(wait_s))
            error = RateLimited(
                f"too many sign-ins from this address: try again in {retry} s",
                guidance=f"Copy the owner token from {self.settings.state / 'owner-token'}.",
            )
            return self._sign_in_refused(error, 429, {"Retry-After": str(retry)})
        try:
            form = await self._form(request)
        except InvalidArgument as exc:
            return self._sign_in_refused(exc, 400)
        if not hmac.compare_digest(form.get("token", "").strip(), self.token):
            return self._html(self._sign_in_page(error="That is not the owner token."), 403)
        self.throttle.give_back(client)
        response = RedirectResponse("/memory", status_code=303)
        ended = request.cookies.get(COOKIE)
        if ended:
            self.sessions.end(ended)  # a sign-in never keeps the session it came with
        response.set_cookie(
            COOKIE,
            self.sessions.start(),
            max_age=SESSION_S,
            httponly=True,
            samesite="strict",
            path="/memory",
            secure=_over_https(request),
        )
        return response

    async def logout(self, request: Request) -> Response:
        form = await self._signed_form(request)
        if isinstance(form, Response):
            return form
        self.sessions.end(request.cookies.get(COOKIE, ""))
        response = RedirectResponse("/memory", status_code=303)
        response.delete_cookie(COOKIE, httponly=True, samesite="strict", path="/memory", secure=_over_https(request))
        return response

    async def show(self, request: Request) -> Response:
        csrf = self.signed_in(request)
        if csrf is None:
            return self._html(self._sign_in_page(error=None), 401)
        if self.settings.backend == "none":
            return self._html(
                "<!doctype html><title>Memory</title><p>Memory is disabled (memory.backend=none).</p>", 404
            )
        query = request.query_params
        section = query.get("section", "topics")
        if section not in SECTIONS:
            section = "topics"
        item, view = query.get("item"), query.get("view", "preview")
        asked: dict[str, Any] = {}
        if section == "search":  # as `memory search` asks: the words, whose view (--as), pending-backed too
            seeing_as = query.get("as", "").strip()[:200]
            asked = {
                "query": query.get("q", ""),
                "seeing_as": seeing_as,
                "viewer": viewer_for(seeing_as) if seeing_as else self.viewer(request),
                "include_pending": query.get("pending") == "on",
            }
        context = await run_in_threadpool(self._context, section, item, view, query.get("from"), asked)
        return self._render(csrf, list_mode=query.get("mode") == "list", **context)

    @staticmethod
    def viewer(request: Request) -> Viewer:
        """Whose reads the page answers: its sessions are the owner's (only the owner token signs in), who
        sees every record; a search may ask to see only what one requester would (``as``)."""
        return OWNER

    async def save(self, request: Request) -> Response:
        form = await self._signed_form(request)
        if isinstance(form, Response):
            return form
        path = form.get("path", "")
        section = "core" if path == CORE_SOURCE else "topics"
        content = form.get("content", "").replace("\r\n", "\n")

        def apply() -> None:
            ws = self.open_workspace()
            exists = path in ws.snapshot().topic_shas
            update_memory(
                ws,
                changes=[TopicChange(path, "update" if exists else "create", content)],
                message=f"Edit {path} in the Memory page",
                expected_revision=form.get("expected_revision") or None,
            )

        try:
            await run_in_threadpool(apply)
        except ScriptoriumError as exc:  # shown inline; the draft is kept, nothing was written
            view = "source" if section == "core" else "edit"
            context = await run_in_threadpool(self._context, section, path, view)
            context.update(draft=content, error=exc.to_dict(), draft_revision=form.get("expected_revision"))
            return self._render(form["csrf"], 409 if exc.retryable else 422, list_mode=False, **context)
        view = "source" if section == "core" else "preview"
        return RedirectResponse(f"/memory?section={section}&item={quote(path)}&view={view}", status_code=303)

    async def _signed_form(self, request: Request) -> dict[str, str] | Response:
        """The posted form of a signed-in owner whose CSRF token matches; else the refusal to answer with."""
        csrf = self.signed_in(request)
        if csrf is None:
            return self._html(self._sign_in_page(error=None), 401)
        try:
            form = await self._form(request)
        except InvalidArgument as exc:
            refusal = f"<strong>{exc.reason}</strong>: {html.escape(exc.message)}"
            return self._html(f"<!doctype html><title>Refused</title><p>{refusal}</p>", 400)
        if not hmac.compare_digest(form.get("csrf", ""), csrf):
            return self._html("<!doctype html><title>Refused</title><p>Missing or wrong CSRF token.</p>", 403)
        return form

    async def _act(self, csrf: str, section: str, item: str, apply: Callable[[], None]) -> Response:
        """Run one page action; a refusal is shown inline on ``item``, success goes back to it."""
        try:
            await run_in_threadpool(apply)
        except ScriptoriumError as exc:
            context = await run_in_threadpool(self._context, section, item, "preview")
            context.update(error=exc.to_dict())
            return self._render(csrf, 409 if exc.retryable else 422, list_mode=False, **context)
        return RedirectResponse(f"/memory?section={section}&item={quote(item)}", status_code=303)

    async def decide(self, request: Request) -> Response:
        """Approve or reject one proposal; a refused approval is shown on the proposal, which stays (stale)."""
        form = await self._signed_form(request)
        if isinstance(form, Response):
            return form
        proposal_id, action = form.get("id", ""), form.get("action", "")

        def apply() -> None:
            queue = Proposals(self.open_workspace(), self.settings.state)
            if action == "approve":
                queue.approve(proposal_id, OWNER_PRINCIPAL)
            elif action == "reject":
                queue.reject(proposal_id, OWNER_PRINCIPAL, form.get("why", ""))
            else:
                raise InvalidArgument(f"unknown decision {action!r}")

        return await self._act(form["csrf"], "proposals", proposal_id, apply)

    async def act_on_source(self, request: Request) -> Response:
        """Promote a pending source, or forget it (or its whole conversation) after the confirmation view."""
        form = await self._signed_form(request)
        if isinstance(form, Response):
            return form
        path, action = form.get("path", ""), form.get("action", "")

        def apply() -> None:
            ws = self.open_workspace()
            if action == "promote":
                ws.promote_source(path)
            elif action in ("forget", "forget-session"):
                identity = ws.archive.read(path)
                body = ForgetRequest(
                    session=identity.thread if action == "forget-session" else None,
                    sources=[] if action == "forget-session" else [identity.identity],
                    why=form.get("why", "")[:500],
                    purge_history=form.get("purge") == "on",
                )
                forget_request(ws, body, self.settings.session_store_url)
            else:
                raise InvalidArgument(f"unknown action {action!r}")

        return await self._act(form["csrf"], "sources", path, apply)

    # -- what each section shows ---------------------------------------------------------

    def _context(
        self, section: str, item: str | None, view: str, start: str | None = None, asked: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """``start``: where in ``item``'s period a Timeline page begins (its **Load earlier** link's ``from``);
        ``asked``: what a search asks (the query, the viewer)."""
        ws = self.open_workspace()
        with ws.lock():  # one consistent snapshot, never mid-install
            snap = ws.snapshot()
            context: dict[str, Any] = {"section": section, "item": item, "view": view, "revision": snap.tree}
            context["start"] = start
            context.update(asked or {})
            self.sections.fill(section, ws, snap, item, view, context)
        return context
