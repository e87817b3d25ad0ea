"""What each section of the Memory page shows: the rows of its tree, and the topic, period, proposal or source
chosen in it (:class:`scriptorium.web.page.MemoryPage` serves them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from scriptorium.access.audience import OWNER_PRINCIPAL
from scriptorium.access.requests import Proposals
from scriptorium.errors import ScriptoriumError
from scriptorium.provider import effective_core
from scriptorium.recall.branches import shared_view
from scriptorium.recall.index import RecallIndex
from scriptorium.settings import Settings
from scriptorium.tokencount import count_tokens
from scriptorium.web.markdown import render_memory_markdown
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.paths import CORE_SOURCE, source_identity_from_path
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.topics import Record

Section = Callable[[MemoryWorkspace, Snapshot, "str | None", str, dict[str, Any]], None]


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


class Sections:
    """The page's sections over one configuration: each fills the template's context for what it shows."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def fill(
        self, section: str, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]
    ) -> None:
        """Fill ``ctx`` for ``section`` (one of :data:`scriptorium.web.page.SECTIONS`) on snapshot ``snap``."""
        shows: dict[str, Section] = {
            "topics": self.topics,
            "timeline": self.timeline,
            "recent": self.recent,
            "core": self.core,
            "proposals": self.proposals,
            "sources": self.sources,
            "settings": self.settings_rows,
        }
        shows[section](ws, snap, item, view, ctx)

    def topics(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
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
                html=render_memory_markdown(source, *self.branch_marks(snap, item)),
                views=[("preview", "Preview"), ("edit", "Edit")],
            )

    def branch_marks(self, snap: Snapshot, topic: str) -> tuple[frozenset[str], dict[str, str]]:
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

    def timeline(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
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

    def recent(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        limit = self.settings.recent_limit
        records = snap.newest(limit)
        ctx.update(
            title="Recent memory",
            kind="Recent",
            recent_label=f"{len(records)} / {limit} records",
            html=render_memory_markdown(records_markdown(snap, records)) if records else "",
        )

    def proposals(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
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

    def sources(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
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

    def settings_rows(
        self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]
    ) -> None:
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

    def core(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
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
