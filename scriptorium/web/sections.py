"""What each section of the Memory page shows: the rows of its tree, and the topic, period, proposal or source
chosen in it (:class:`scriptorium.web.page.MemoryPage` serves them)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from scriptorium.access.requests import Proposals
from scriptorium.audience import OWNER_PRINCIPAL
from scriptorium.errors import ScriptoriumError
from scriptorium.provider import effective_core_rendering, injected_text
from scriptorium.recall.branches import shared_view
from scriptorium.recall.index import RecallIndex
from scriptorium.settings import Settings
from scriptorium.web.indexes import Calendar, Citations, DateCounts, cited_by, records_on
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
    under: dict[str, int] = {}  # topics below each folder, counted in one pass
    for path in paths:
        parts = path.split("/")[1:]
        for depth in range(len(parts) - 1):
            folder = "/".join(parts[: depth + 1])
            under[folder] = under.get(folder, 0) + 1
    for path in paths:
        parts = path.split("/")[1:]
        for depth in range(len(parts) - 1):
            folder = "/".join(parts[: depth + 1])
            if folder not in seen:
                seen.add(folder)
                rows.append(TreeRow(parts[depth], depth, count=under[folder], folder=True, expanded=True))
        href = f"/memory?section=topics&item={quote(path)}"
        label = titles.get(path) or parts[-1].removesuffix(".md")
        rows.append(TreeRow(label, len(parts) - 1, href, selected=path == selected, hint=path))
    return rows


TIMELINE_PAGE_RECORDS = 300
"""Records one Timeline page renders at most: whole days while they fit, a larger day in parts. What lies
beyond is a click away (**Load earlier**, and every period's own link), so a page costs what it shows."""

_PERIOD = re.compile(r"[0-9]{4}(?:-[0-9]{2}(?:-[0-9]{2})?)?")
_CURSOR = re.compile(r"([0-9]{4}(?:-[0-9]{2}(?:-[0-9]{2})?)?)(?:@([0-9]{1,9}))?")


def _timeline_href(period: str, start: str = "") -> str:
    return f"/memory?section=timeline&item={period}" + (f"&from={quote(start)}" if start else "")


def _shown_order(date: str) -> str:
    """Sorts dates as the Timeline shows them, newest first: a year's or a month's own records (dated only
    so far) above the months or days in it."""
    return date if len(date) == 10 else date + "~"


def _default_period(calendar: Calendar) -> str:
    """The newest year's newest month with records; the year itself when only its own records are dated."""
    if not calendar.years:
        return ""
    year = calendar.years[0]
    return calendar.months[year][0] if calendar.months[year] else year


def _in_period(date: str, period: str) -> bool:
    """Whether ``date``'s records show with ``period``: the period's own dates, and the year's and month's
    own records above it."""
    return date == period or date.startswith(period + "-") or period.startswith(date + "-")


def _timeline_rows(calendar: Calendar, period: str) -> list[TreeRow]:
    """Years and their months, and the days of the period's month (not every day of all time)."""
    rows: list[TreeRow] = []
    under = calendar.under
    for year in calendar.years:
        months = calendar.months[year]
        rows.append(TreeRow(year, 0, _timeline_href(year), under[year], year == period, expanded=bool(months)))
        for month in months:
            days = calendar.days.get(month, []) if month == period[:7] else []
            rows.append(TreeRow(month, 1, _timeline_href(month), under[month], month == period, expanded=bool(days)))
            rows += [TreeRow(day, 2, _timeline_href(day), under[day], day == period) for day in days]
    return rows


@dataclass(frozen=True, slots=True)
class TimelineGroup:
    """A year, month or day of the Timeline: its own records' HTML (when this page shows them) and its
    children; one this page does not show is closed, with a link to its own page."""

    label: str
    count: int
    html: str
    children: list[TimelineGroup]
    open: bool
    href: str = ""
    part: str = ""
    """Which of the date's own records are shown, when not all of them are (``301–600 of 900``)."""


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
        self.dates = DateCounts()
        self.citations = Citations()

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
                html=render_memory_markdown(
                    source,
                    *self.branch_marks(snap, item),
                    superseded=RecallIndex.open(ws.root).superseded_in(item),
                ),
                views=[("preview", "Preview"), ("edit", "Edit")],
            )

    def branch_marks(self, snap: Snapshot, topic: str) -> tuple[frozenset[str], dict[str, str]]:
        """The topic's records from branches their conversations left, and where each was said: its sessions'
        projects and git branches, and where those sessions came from."""
        parsed = snap.topics.get(topic)
        if parsed is None or not parsed.records:
            return frozenset(), {}
        cited = [parsed.cited_paths(record) for record in parsed.records]
        view = shared_view(self.settings.session_store_url)
        pairs = zip(parsed.records, view(cited), strict=True)
        alternatives = frozenset(record.memory_id for record, status in pairs if status == "alternative")
        origins: dict[str, str] = {}
        for record, paths in zip(parsed.records, cited, strict=True):
            where = view.where(paths)
            words = [
                *(f"project {name}" for name in where["projects"]),
                *(f"branch {name}" for name in where["git_branches"]),
                *(
                    f"{'spawned by' if 'spawned_by' in o else 'continued from'} "
                    f"{o.get('spawned_by') or o.get('continued_from')}"
                    for o in view.origins(paths)
                ),
            ]
            if words:
                origins[record.memory_id] = "; ".join(words)
        return alternatives, origins

    def timeline(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        """One period (a year, a month or a day; by default the newest month): its records from the
        snapshot's index of Timeline files, at most :data:`TIMELINE_PAGE_RECORDS` of them from ``from``
        on, then a link to the rest and to the period before. Nothing outside the period is read."""
        self.dates.refresh(snap)
        counts, calendar = self.dates.counts, self.dates.calendar()
        under = calendar.under
        period = item if item and _PERIOD.fullmatch(item) else _default_period(calendar)
        dates = sorted((d for d in counts if _in_period(d, period)), key=_shown_order, reverse=True)
        cursor = _CURSOR.fullmatch(str(ctx.get("start") or ""))
        first = 0
        skip = int(cursor.group(2) or 0) if cursor else 0
        if cursor:  # from that date on (the first one after it when it has gone meanwhile)
            start = _shown_order(cursor.group(1))
            first = next((i for i, d in enumerate(dates) if _shown_order(d) <= start), len(dates))
            if first < len(dates) and dates[first] != cursor.group(1):
                skip = 0
        shown: dict[str, tuple[str, str]] = {}  # date → (HTML, part)
        budget, rest = TIMELINE_PAGE_RECORDS, ""
        for date in dates[first:]:
            count = counts[date] - skip
            if count <= 0:
                skip = 0
                continue
            if shown and count > budget:  # whole dates while they fit
                rest = date
                break
            take = min(count, budget)
            records = records_on(snap, date)[skip : skip + take]
            part = f"{skip + 1}–{skip + take} of {counts[date]}" if take < counts[date] else ""
            shown[date] = (render_memory_markdown(records_markdown(snap, records)), part)
            budget -= take
            if take < count:  # a date larger than a page: the rest of it next
                rest = f"{date}@{skip + take}"
                break
            skip = 0

        def group(label: str, children: list[TimelineGroup], listed: bool) -> TimelineGroup:
            html, part = shown.get(label, ("", ""))
            return TimelineGroup(label, under[label], html, children, listed, _timeline_href(label), part)

        # The period's year and month open, with what this page shows; every other one a link.
        groups: list[TimelineGroup] = []
        for year in calendar.years:
            if year != period[:4] and not any(d[:4] == year for d in shown):
                groups.append(group(year, [], False))
                continue
            months: list[TimelineGroup] = []
            for month in calendar.months[year]:
                if month != period[:7] and not any(d[:7] == month for d in shown if len(d) >= 7):
                    months.append(group(month, [], False))
                    continue
                days = [group(day, [], day in shown) for day in calendar.days.get(month, [])]
                months.append(group(month, days, True))
            groups.append(group(year, months, True))
        # Load earlier: the rest of this period, else the period of the same kind before it.
        earlier: tuple[str, str] | None = None
        if rest:
            earlier = (_timeline_href(period, rest), f"Load earlier in {period}")
        elif before := [p for p in under if len(p) == len(period) and p < period]:
            earlier = (_timeline_href(max(before)), f"Load earlier: {max(before)} ({under[max(before)]:,} records)")
        ctx["rows"] = _timeline_rows(calendar, period)
        ctx.update(
            title="Timeline",
            kind="Timeline",
            period=period,
            count=under.get(period, 0),
            groups=groups,
            earlier=earlier,
        )

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
        self.citations.refresh(snap)  # the topics citing it, not every record of memory
        citing = [
            (
                record.memory_id,
                record.topic,
                f"/memory?section=topics&item={quote(record.topic)}#block-{record.memory_id}",
            )
            for record in cited_by(snap, path, self.citations.citing(path))
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
        rendering = effective_core_rendering(ws, RecallIndex.open(ws.root), branches)
        effective = injected_text(rendering) if self.settings.core_inject else ""
        source = ws.read_topic(CORE_SOURCE) if CORE_SOURCE in snap.topic_shas else ""
        ctx.update(
            title="Core memory",
            kind="Core",
            path=CORE_SOURCE,
            mtime=_mtime(ws.root / CORE_SOURCE) if source else "",
            source=source,
            views=[("preview", "Prompt preview"), ("source", "Source records")],
            inject=self.settings.core_inject,
            tokens=rendering.tokens if self.settings.core_inject else 0,  # as `memory core` counts it
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
