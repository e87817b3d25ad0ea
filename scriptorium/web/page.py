"""The Memory web page at ``/memory``: Topics, Timeline, Recent, Core and Proposals, server-rendered; a
citation opens a read-only view of its source (promote and forget from there).

The owner signs in with the owner token and gets an HttpOnly, SameSite=Strict
session cookie (an HMAC of the token, so nothing is stored). Every form that
changes memory carries a CSRF token (another HMAC of it) that is checked
before anything is read. Saves go through the same transaction as every other
edit, compare-and-set on the revision the page was rendered from; a refused
save shows its reason inline with the draft kept. No script runs on the page:
the Content-Security-Policy forbids inline and foreign script, and rendered
memory passes :mod:`scriptorium.web.markdown`'s sanitizer.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool

from scriptorium.access.audience import OWNER_PRINCIPAL
from scriptorium.access.requests import Proposals, forget_request
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import InvalidArgument, ScriptoriumError
from scriptorium.schemas.changes import ForgetRequest
from scriptorium.settings import Settings
from scriptorium.web.sections import Sections
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.paths import CORE_SOURCE

COOKIE = "scriptorium_session"
SECTIONS = ("topics", "timeline", "recent", "core", "proposals", "sources", "settings")
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_ENV = Environment(loader=PackageLoader("scriptorium.web", "templates"), autoescape=select_autoescape(["html"]))
_STATIC = Path(__file__).parent / "static"


def _mac(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


class MemoryPage:
    """Routes of the page; ``open_workspace`` is the API's own (one workspace per server)."""

    def __init__(self, settings: Settings, token: str, open_workspace: Callable[[], MemoryWorkspace]) -> None:
        self.settings = settings
        self.token = token
        self.session = _mac(token, "memory-page-session")
        self.csrf = _mac(token, "memory-page-csrf")
        self.open_workspace = open_workspace
        self.sections = Sections(settings)
        self.router = APIRouter()
        self.router.add_api_route("/memory", self.show, methods=["GET"], include_in_schema=False)
        self.router.add_api_route("/memory/login", self.login, methods=["POST"], include_in_schema=False)
        self.router.add_api_route("/memory/save", self.save, methods=["POST"], include_in_schema=False)
        self.router.add_api_route("/memory/decide", self.decide, methods=["POST"], include_in_schema=False)
        self.router.add_api_route("/memory/source", self.act_on_source, methods=["POST"], include_in_schema=False)
        self.router.add_api_route("/memory/static/memory.css", self.css, methods=["GET"], include_in_schema=False)

    # -- plumbing -----------------------------------------------------------------

    def signed_in(self, request: Request) -> bool:
        return hmac.compare_digest(request.cookies.get(COOKIE, ""), self.session)

    @staticmethod
    def _html(body: str, status: int = 200) -> HTMLResponse:
        headers = {
            "Content-Security-Policy": CSP,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        }
        return HTMLResponse(body, status_code=status, headers=headers)

    def _render(self, status: int = 200, **context: Any) -> HTMLResponse:
        return self._html(_ENV.get_template("memory.html").render(csrf=self.csrf, **context), status)

    async def css(self) -> Response:
        return Response((_STATIC / "memory.css").read_bytes(), media_type="text/css")

    async def _form(self, request: Request) -> dict[str, str]:
        fields = parse_qs((await request.body()).decode("utf-8"), keep_blank_values=True)
        return {key: values[0] for key, values in fields.items()}

    # -- routes ---------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        form = await self._form(request)
        if not hmac.compare_digest(form.get("token", "").strip(), self.token):
            return self._html(_ENV.get_template("login.html").render(error="That is not the owner token."), 403)
        response = RedirectResponse("/memory", status_code=303)
        response.set_cookie(COOKIE, self.session, httponly=True, samesite="strict", path="/memory")
        return response

    async def show(self, request: Request) -> Response:
        if not self.signed_in(request):
            return self._html(_ENV.get_template("login.html").render(error=None), 401)
        if self.settings.backend == "none":
            return self._html(
                "<!doctype html><title>Memory</title><p>Memory is disabled (memory.backend=none).</p>", 404
            )
        query = request.query_params
        section = query.get("section", "topics")
        if section not in SECTIONS:
            section = "topics"
        context = await run_in_threadpool(self._context, section, query.get("item"), query.get("view", "preview"))
        return self._render(list_mode=query.get("mode") == "list", **context)

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
            return self._render(409 if exc.retryable else 422, list_mode=False, **context)
        view = "source" if section == "core" else "preview"
        return RedirectResponse(f"/memory?section={section}&item={quote(path)}&view={view}", status_code=303)

    async def _signed_form(self, request: Request) -> dict[str, str] | Response:
        """The posted form of a signed-in owner whose CSRF token matches; else the refusal to answer with."""
        if not self.signed_in(request):
            return self._html(_ENV.get_template("login.html").render(error=None), 401)
        form = await self._form(request)
        if not hmac.compare_digest(form.get("csrf", ""), self.csrf):
            return self._html("<!doctype html><title>Refused</title><p>Missing or wrong CSRF token.</p>", 403)
        return form

    async def _act(self, section: str, item: str, apply: Callable[[], None]) -> Response:
        """Run one page action; a refusal is shown inline on ``item``, success goes back to it."""
        try:
            await run_in_threadpool(apply)
        except ScriptoriumError as exc:
            context = await run_in_threadpool(self._context, section, item, "preview")
            context.update(error=exc.to_dict())
            return self._render(409 if exc.retryable else 422, list_mode=False, **context)
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

        return await self._act("proposals", proposal_id, apply)

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

        return await self._act("sources", path, apply)

    # -- what each section shows ---------------------------------------------------------

    def _context(self, section: str, item: str | None, view: str) -> dict[str, Any]:
        ws = self.open_workspace()
        with ws.lock():  # one consistent snapshot, never mid-install
            snap = ws.snapshot()
            context: dict[str, Any] = {"section": section, "item": item, "view": view, "revision": snap.tree}
            self.sections.fill(section, ws, snap, item, view, context)
        return context
