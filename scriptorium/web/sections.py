"""What each section of the Memory page shows: the rows of its tree, and the topic, period, proposal or source
chosen in it (:class:`scriptorium.web.page.MemoryPage` serves them)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from scriptorium.access.requests import Proposals
from scriptorium.audience import OWNER, OWNER_PRINCIPAL, Viewer
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


_DAY_STEM = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})-(.+)")


def _slug_label(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def session_mark(path: str) -> str:
    """What tells a topic from another of the same title, from its file name: the day it begins with and the
    rest, a session's ID cut to its last 8 characters (``…/2026-11-30-session-0199…-8a1c44f2e93b.md`` →
    ``2026-11-30 · session …44f2e93b``: UUIDv7s of one minute share their first 8)."""
    stem = _slug_label(path)
    match = _DAY_STEM.fullmatch(stem)
    day, rest = (match.group(1), match.group(2)) if match else ("", stem)
    if rest.startswith("session-"):
        session = rest.removeprefix("session-")
        rest = "session " + (session if len(session) <= 9 else "…" + session[-8:])
    return " · ".join(part for part in (day, rest) if part)


def distinct_titles(titles: Mapping[str, str]) -> dict[str, str]:
    """Path → the label to show: its title, with :func:`session_mark` added where several topics share that
    title (two sessions opened with the same first prompt), and the path itself if even that is shared."""
    shared = Counter(titles.values())
    marked = {path: f"{title} · {session_mark(path)}" for path, title in titles.items() if shared[title] > 1}
    still = Counter(marked.values())
    labels = {path: title for path, title in titles.items() if shared[title] == 1}
    for path, label in marked.items():
        labels[path] = label if still[label] == 1 else f"{titles[path]} · {path.removeprefix('topics/')}"
    return labels


def _topic_rows(paths: list[str], selected: str | None, titles: dict[str, str] | None = None) -> list[TreeRow]:
    """The topic tree: folders, then each topic by its own title in full (its path on hover), slug when
    untitled; topics of one title told apart by :func:`distinct_titles`."""
    titles = distinct_titles({path: (titles or {}).get(path) or _slug_label(path) for path in paths})
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
        label = titles[path]
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


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!<>|~])")


def said_stamp(time: str, date: str | None, day: str | None = None) -> str:
    """What a record opens with: when it was said (UTC), the hour alone within ``day`` when it was said that
    day, else the date and hour; its own date when no cited source tells the time."""
    if not time:
        return date or "undated"
    return time[11:16] if day is not None and time[:10] == day else time[:16].replace("T", " ")


def records_markdown(
    snap: Snapshot, records: list[Record], said: Callable[[Record], str] | None = None, day: str | None = None
) -> str:
    """Records as one document, in the order given: each run of records of one topic (and section) under
    one heading naming it once, linked to it; each record opening with when it was said
    (:func:`said_stamp`, linked to the record in its topic), then its text; the footnotes cited at the end."""
    parts: list[str] = []
    notes: dict[str, str] = {}
    titles = distinct_titles({r.topic: snap.topics[r.topic].title or _slug_label(r.topic) for r in records})
    group: tuple[str, tuple[str, ...]] | None = None
    for record in records:
        parsed = snap.topics[record.topic]
        headings = record.headings
        if headings and headings[0] == parsed.title:
            headings = headings[1:]  # the title is the topic's name, said once already
        href = f"/memory?section=topics&item={quote(record.topic, safe='/')}"
        if (record.topic, headings) != group:
            group = (record.topic, headings)
            label = _MARKDOWN_SPECIAL.sub(r"\\\1", " › ".join((titles[record.topic], *headings)))
            parts.append(f"### [{label}]({href})")
        time = said(record) if said else ""
        hint = f' "said {time}"' if time else ""
        parts.append(f"[{said_stamp(time, record.date, day)}]({href}#block-{record.memory_id}{hint}) {record.text}")
        footnotes = parsed.footnotes
        for ref in record.refs:
            if ref in footnotes:
                notes.setdefault(ref, footnotes[ref].body)
    defs = [f"[^{label}]: {body}" for label, body in notes.items()]
    return "\n\n".join(parts + defs) + "\n"


SOURCE_TIMES = 100_000
"""Archived sources whose time the page remembers at once (then it starts again): a page reads each cited
source's time once, not at every view."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One result of the page's search: where the record is, when, its snippet, and its labels."""

    memory_id: str
    topic: str
    place: str
    date: str
    snippet: str
    href: str
    labels: tuple[str, ...]


SEARCH_LIMIT = 20
"""Results the page's search shows (``memory search`` shows 10 by default; a page has room for more)."""
SEARCH_MAX_CHARS = 2000
"""The longest query the page searches, as the REST search allows."""


class Sections:
    """The page's sections over one configuration: each fills the template's context for what it shows."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.dates = DateCounts()
        self.citations = Citations()
        self._times: dict[str, str] = {}

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
            "search": self.search,
        }
        shows[section](ws, snap, item, view, ctx)

    def said(self, ws: MemoryWorkspace, snap: Snapshot) -> Callable[[Record], str]:
        """When a record was said: the earliest time of the sources it cites (ISO, UTC; "" when none
        tells), each source read once."""

        def at(record: Record) -> str:
            paths = snap.topics[record.topic].cited_paths(record)
            return min((time for path in paths if (time := self._source_time(ws, path))), default="")

        return at

    def _source_time(self, ws: MemoryWorkspace, path: str) -> str:
        known = self._times.get(path)
        if known is None:
            try:
                said = datetime.fromisoformat(ws.archive.read(path).time)
                known = (said if said.tzinfo else said.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
            except (ScriptoriumError, OSError, ValueError):
                known = ""
            if len(self._times) >= SOURCE_TIMES:
                self._times.clear()
            self._times[path] = known
        return known

    def search(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        """The records ``ctx["query"]`` finds for ``ctx["viewer"]``: the recall index's search, as ``memory
        search`` runs it (the configured mode, the viewer's audience, pending-backed records only when asked),
        at most :data:`SEARCH_LIMIT`; an empty or overlong query is said inline."""
        query = str(ctx.get("query") or "").strip()
        viewer: Viewer = ctx.get("viewer") or OWNER
        ctx.update(title="Search", kind="Search", hits=[], searched=False)
        if not query:
            ctx["search_note"] = "Type the words to look for in the search box."
            return
        if len(query) > SEARCH_MAX_CHARS:
            ctx["search_note"] = (
                f"That query is {len(query):,} characters long; the search takes at most {SEARCH_MAX_CHARS:,}."
            )
            return
        try:
            hits = RecallIndex.open(ws.root).search(
                query,
                SEARCH_LIMIT,
                include_pending=bool(ctx.get("include_pending")),
                mode=self.settings.search_mode,
                branches=shared_view(self.settings.session_store_url),
                viewer=viewer,
            )
        except ScriptoriumError as exc:  # an unavailable embedding backend, say: shown, not a server error
            ctx["error"] = exc.to_dict()
            return
        own = {hit.topic: (t.title if (t := snap.topics.get(hit.topic)) else None) for hit in hits}
        titles = distinct_titles({topic: title or _slug_label(topic) for topic, title in own.items()})
        found = []
        for hit in hits:
            headings = hit.headings[1:] if hit.headings and hit.headings[0] == own[hit.topic] else hit.headings
            labels = [
                *(["pending source"] if hit.trust == "pending" else []),
                *(["option not taken"] if hit.branch == "alternative" else []),
                *([f"superseded by ^{hit.superseded_by}"] if hit.superseded_by else []),
                *([f"audience: {hit.audience.replace(',', ', ')}"] if hit.audience else []),
            ]
            found.append(
                SearchHit(
                    hit.memory_id,
                    hit.topic,
                    " › ".join((titles[hit.topic], *headings)),
                    hit.date or "undated",
                    hit.snippet,
                    f"/memory?section=topics&item={quote(hit.topic, safe='/')}#block-{quote(hit.memory_id)}",
                    tuple(labels),
                )
            )
        ctx.update(hits=found, searched=True, query=query, viewer_label=viewer.label)

    def topics(self, ws: MemoryWorkspace, snap: Snapshot, item: str | None, view: str, ctx: dict[str, Any]) -> None:
        paths = sorted(p for p in snap.topic_shas if p != CORE_SOURCE)
        titles = {p: title for p in paths if (title := snap.topics[p].title)}
        ctx["rows"] = _topic_rows(paths, item, titles)
        ctx["empty"] = not paths
        if item and item in paths:
            source = ws.read_topic(item)
            html = render_memory_markdown(
                source, *self.branch_marks(snap, item), superseded=RecallIndex.open(ws.root).superseded_in(item)
            )
            ctx.update(
                title=next((row.label for row in ctx["rows"] if row.hint == item), _slug_label(item)),
                kind="Topic",
                path=item,
                mtime=_mtime(ws.root / item),
                source=source,
                html=_without_title(html) if item in titles else html,
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
        said = self.said(ws, snap)
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
            ordered = records_on(snap, date)
            times = [said(record) for record in ordered]  # the day in the order it was said
            order = sorted(range(len(ordered)), key=lambda i: (times[i] or "~", i))[skip : skip + take]
            records = [ordered[i] for i in order]
            part = f"{skip + 1}–{skip + take} of {counts[date]}" if take < counts[date] else ""
            shown[date] = (render_memory_markdown(records_markdown(snap, records, said, date)), part)
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
            html=render_memory_markdown(records_markdown(snap, records, self.said(ws, snap))) if records else "",
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


_TITLE = re.compile(r"\s*<h1>.*?</h1>\s*", re.S)


def _without_title(html: str) -> str:
    """A topic's HTML without its leading title heading: the page's header shows the title already."""
    found = _TITLE.match(html)
    return html[found.end() :] if found else html


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
