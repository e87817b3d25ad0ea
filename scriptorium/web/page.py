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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.concurrency import run_in_threadpool

from schemas.changes import ForgetRequest
from scriptorium.audience import OWNER_PRINCIPAL
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import InvalidArgument, ScriptoriumError
from scriptorium.provider import effective_core
from scriptorium.recall.branches import shared_view
from scriptorium.recall.index import RecallIndex
from scriptorium.requests import Proposals, forget_request
from scriptorium.settings import Settings
from scriptorium.tokens import count_tokens
from scriptorium.web.markdown import render_memory_markdown
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.paths import CORE_SOURCE, source_identity_from_path
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.topics import Record

COOKIE = "scriptorium_session"
SECTIONS = ("topics", "timeline", "recent", "core", "proposals", "sources", "settings")
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_ENV = Environment(loader=PackageLoader("scriptorium.web", "templates"), autoescape=select_autoescape(["html"]))
_STATIC = Path(__file__).parent / "static"


def _mac(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class TreeRow:
    """One sidebar row: a folder (chevron, badge) or an item, indented by depth."""

    label: str
    depth: int
    href: str = ""
    count: int = 0
    selected: bool = False
    folder: bool = False
    state: str = ""
    """A proposal's state (its row's label)."""
    hint: str = ""
    """Shown on hover (a topic row's path)."""
    expanded: bool = False
    """A row whose children are listed below it (its chevron points down)."""


def _topic_rows(paths: list[str], selected: str | None, titles: dict[str, str] | None = None) -> list[TreeRow]:
    """The topic tree: folders, then each topic by its own title (its path on hover), slug when untitled."""
    titles = titles or {}
    rows: list[TreeRow] = []
    seen: set[str] = set()
    for path in paths:
        parts = path.split("/")[1:]
        for depth in range(len(parts) - 1):
            folder = "/".join(parts[: depth + 1])
            if folder not in seen:
                seen.add(folder)
                count = sum(1 for p in paths if p.startswith(f"topics/{folder}/"))
                rows.append(TreeRow(parts[depth], depth, count=count, folder=True, expanded=True))
        href = f"/memory?section=topics&item={quote(path)}"
        label = titles.get(path) or parts[-1].removesuffix(".md")
        rows.append(TreeRow(label, len(parts) - 1, href, selected=path == selected, hint=path))
    return rows


def _timeline_rows(snap: Snapshot, selected: str | None) -> list[TreeRow]:
    dates: dict[str, int] = {}
    for topic in snap.topics.values():
        for record in topic.records:
            if record.date:
                dates[record.date] = dates.get(record.date, 0) + 1
    rows: list[TreeRow] = []
    for year in sorted({d[:4] for d in dates}, reverse=True):
        in_year = {d: n for d, n in dates.items() if d[:4] == year}
        months = sorted({d[:7] for d in in_year if len(d) >= 7}, reverse=True)
        href = f"/memory?section=timeline&item={year}"
        rows.append(TreeRow(year, 0, href, sum(in_year.values()), year == selected, expanded=bool(months)))
        for month in months:
            in_month = {d: n for d, n in in_year.items() if d[:7] == month}
            has_days = any(len(d) == 10 for d in in_month)
            href = f"/memory?section=timeline&item={month}"
            rows.append(TreeRow(month, 1, href, sum(in_month.values()), month == selected, expanded=has_days))
            for day in sorted((d for d in in_month if len(d) == 10), reverse=True):
                rows.append(TreeRow(day, 2, f"/memory?section=timeline&item={day}", in_month[day], day == selected))
    return rows


@dataclass(frozen=True, slots=True)
class TimelineGroup:
    """A year, month or day of the Timeline: its own records' HTML and its children."""

    label: str
    count: int
    html: str
    children: list[TimelineGroup]
    open: bool


def records_markdown(snap: Snapshot, records: list[Record]) -> str:
    """Records as one document: place and date, the text, and the footnotes they cite."""
    parts: list[str] = []
    notes: dict[str, str] = {}
    for record in records:
        place = " › ".join((record.topic.removeprefix("topics/").removesuffix(".md"), *record.headings))
        parts.append(f"**{place}** · {record.date or 'undated'}\n\n{record.text}")
        footnotes = snap.topics[record.topic].footnotes
        for ref in record.refs:
            if ref in footnotes:
                notes.setdefault(ref, footnotes[ref].body)
    defs = [f"[^{label}]: {body}" for label, body in notes.items()]
    return "\n\n".join(parts + defs) + "\n"


class MemoryPage:
    """Routes of the page; ``open_workspace`` is the API's own (one workspace per server)."""

    def __init__(self, settings: Settings, token: str, open_workspace: Callable[[], MemoryWorkspace]) -> None:
        self.settings = settings
        self.token = token
        self.session = _mac(token, "memory-page-session")
        self.csrf = _mac(token, "memory-page-csrf")
        self.open_workspace = open_workspace
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
            getattr(self, f"_{section}")(ws, snap, item, view, context)
        return context

    def _topics(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        paths = sorted(p for p in snap.topic_shas if p != CORE_SOURCE)
        titles = {p: title for p in paths if (title := snap.topics[p].title)}
        ctx["rows"] = _topic_rows(paths, item, titles)
        ctx["empty"] = not paths
        if item and item in paths:
            source = ws.read_topic(item)
            ctx.update(
                title=titles.get(item) or item.rsplit("/", 1)[-1].removesuffix(".md"),
                kind="Topic",
                path=item,
                mtime=_mtime(ws.root / item),
                source=source,
                html=render_memory_markdown(source, *self._branch_marks(snap, item)),
                views=[("preview", "Preview"), ("edit", "Edit")],
            )

    def _branch_marks(self, snap: Snapshot, topic: str) -> tuple[frozenset[str], dict[str, str]]:
        """The topic's records from branches their conversations left, and where their sessions came from."""
        parsed = snap.topics.get(topic)
        if parsed is None or not parsed.records:
            return frozenset(), {}
        cited = [parsed.cited_paths(record) for record in parsed.records]
        view = shared_view(self.settings.session_store_url)
        pairs = zip(parsed.records, view(cited), strict=True)
        alternatives = frozenset(record.memory_id for record, status in pairs if status == "alternative")
        origins: dict[str, str] = {}
        for record, paths in zip(parsed.records, cited, strict=True):
            words = [
                f"{'spawned by' if 'spawned_by' in o else 'continued from'} "
                f"{o.get('spawned_by') or o.get('continued_from')}"
                for o in view.origins(paths)
            ]
            if words:
                origins[record.memory_id] = "; ".join(words)
        return alternatives, origins

    def _timeline(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        ctx["rows"] = _timeline_rows(snap, item)
        by_date: dict[str, list[Record]] = {}
        for topic in snap.topics.values():
            for record in topic.records:
                if record.date:  # record dates only: never a file's rebuild time
                    by_date.setdefault(record.date, []).append(record)

        newest = max(by_date, default="")

        def group(label: str, children: list[TimelineGroup]) -> TimelineGroup:
            own = by_date.get(label, [])
            count = len(own) + sum(c.count for c in children)
            # The chosen period and the periods above it are open; with none chosen, the newest period.
            chosen = item if item is not None else newest
            opened = chosen == label or chosen.startswith(label + "-")
            html = render_memory_markdown(records_markdown(snap, own)) if own else ""
            return TimelineGroup(label, count, html, children, opened)

        years = sorted({d[:4] for d in by_date}, reverse=True)

        def months(year: str) -> list[TimelineGroup]:
            keys = sorted({d[:7] for d in by_date if d[:4] == year and len(d) >= 7}, reverse=True)
            return [group(month, days(month)) for month in keys]

        def days(month: str) -> list[TimelineGroup]:
            keys = sorted({d for d in by_date if d[:7] == month and len(d) == 10}, reverse=True)
            return [group(day, []) for day in keys]

        ctx["groups"] = [group(year, months(year)) for year in years]
        ctx.update(title="Timeline", kind="Timeline", count=sum(len(v) for v in by_date.values()))

    def _recent(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        limit = self.settings.recent_limit
        records = snap.newest(limit)
        ctx.update(
            title="Recent memory",
            kind="Recent",
            recent_label=f"{len(records)} / {limit} records",
            html=render_memory_markdown(records_markdown(snap, records)) if records else "",
        )

    def _proposals(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        found = Proposals(ws, self.settings.state).listed(OWNER_PRINCIPAL)
        found.sort(key=lambda p: (p["state"] not in ("held", "stale"), p["created"]))  # open ones first
        ctx["rows"] = [
            TreeRow(
                f"{p['requester'] or 'token ' + str(p['token_id'])} · {p['request'].get('message', 'Update memory')}",
                0,
                f"/memory?section=proposals&item={quote(p['id'])}",
                selected=p["id"] == item,
                state=p["state"],
            )
            for p in found
        ]
        ctx["empty"] = not found
        chosen = next((p for p in found if p["id"] == item), None)
        if chosen is None:
            waiting = sum(p["state"] in ("held", "stale") for p in found)
            ctx.update(title="Proposals", kind="Proposals", proposals_open=waiting)
            return
        ctx.update(
            title=chosen["request"].get("message", "Update memory"),
            kind="Proposal",
            path=chosen["id"],
            proposal=chosen,
            diff_lines=[_diff_class(line) for line in chosen["dry_run"].get("diff", "").splitlines()],
        )

    def _sources(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        """One archived source, read-only: its text through the same sanitizer as topics, where it came
        from, the records citing it; promote and forget from here (forget after a confirmation)."""
        ctx["rows"] = []
        path = item or ""
        if source_identity_from_path(path) is None or not ws.archive.exists(path):
            ctx.update(title="No such source", kind="Source", missing=True)
            return
        message = ws.archive.read(path)
        citing = [
            (
                record.memory_id,
                record.topic,
                f"/memory?section=topics&item={quote(record.topic)}#block-{record.memory_id}",
            )
            for topic in snap.topics.values()
            for record in topic.records
            if path in topic.cited_paths(record)
        ]
        branches = shared_view(self.settings.session_store_url)
        origin = message.origin
        ctx.update(
            title=message.identity,
            kind="Source",
            path=path,
            source_message=message,
            source_html=render_memory_markdown(message.text, source_view=None) if message.text else "",
            cited_by=citing,
            branch=branches([[path]])[0],
            origin_text=f"{origin[0].replace('_', ' ')} {origin[1]}" if origin else "",
            views=[("preview", "Source"), ("forget", "Forget…")] if message.forgotten is None else [],
        )
        if view in ("forget", "forget-session") and message.forgotten is None:
            from scriptorium.changes.forget import Selection, forget

            selection = Selection(session=message.thread) if view == "forget-session" else Selection(sources=(path,))
            ctx["forget_preview"] = forget(ws, selection, dry_run=True)
            ctx["forget_action"] = view

    def _settings(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        s = self.settings
        try:
            writer: str = s.writer_backend()
        except ScriptoriumError as exc:  # a broken writer.json is shown, not a server error
            writer = str(exc)
        ctx.update(
            title="Memory settings",
            kind="Settings",
            settings_rows=[
                ("memory.backend", s.backend, "SCRIPTORIUM_BACKEND"),
                ("memory.recent.limit", str(s.recent_limit), "SCRIPTORIUM_RECENT_LIMIT"),
                ("memory.core.inject", "on" if s.core_inject else "off", "SCRIPTORIUM_CORE_INJECT"),
                ("memory.core.budget", f"{s.core_budget:,} tokens", "SCRIPTORIUM_CORE_BUDGET"),
                ("memory.search.backend", s.search_mode, "SCRIPTORIUM_SEARCH_MODE"),
                ("memory.writer.backend", writer, "SCRIPTORIUM_WRITER"),
            ],
        )

    def _core(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        branches = shared_view(self.settings.session_store_url)
        effective = effective_core(ws, RecallIndex.open(ws.root), branches) if self.settings.core_inject else ""
        source = ws.read_topic(CORE_SOURCE) if CORE_SOURCE in snap.topic_shas else ""
        ctx.update(
            title="Core memory",
            kind="Core",
            path=CORE_SOURCE,
            mtime=_mtime(ws.root / CORE_SOURCE) if source else "",
            source=source,
            views=[("preview", "Prompt preview"), ("source", "Source records")],
            inject=self.settings.core_inject,
            tokens=count_tokens(effective) if effective else 0,
            budget=ws.config.core_budget,
            html=render_memory_markdown(effective) if effective else "",
        )


def _diff_class(line: str) -> tuple[str, str]:
    """(CSS class, text) of one line of a unified diff."""
    if line.startswith(("+++", "---")):
        return "file", line
    if line.startswith("@@"):
        return "hunk", line
    return {"+": "add", "-": "del"}.get(line[:1], "same"), line


def _mtime(path: Path) -> str:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
    except FileNotFoundError:
        return ""
