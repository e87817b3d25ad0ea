"""Derived views: ``core.md``, ``timeline/``, ``recent.md`` and ``relations.json``.

Views are pure functions of the topic records. A transaction re-renders only
the views its changed records touch (the Timeline files of their dates, plus
Recent, Relations and Core); :func:`render_all` renders everything from
scratch, and the two always agree.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from scriptorium.defaults import TIMELINE_SNIPPET_CHARS
from scriptorium.tokencount import count_tokens
from scriptorium.workspace.paths import CORE_SOURCE, CORE_VIEW, RECENT_VIEW, RELATIONS_VIEW
from scriptorium.workspace.topics import ParsedTopic, Record, creation_key, supersedes_links

_REF = re.compile(r"[ \t]*\[\^[^\]\s]+\]")
CORE_HEADER = "<!-- Rendered from topics/core.md by Scriptorium. Edit topics/core.md, not this file. -->"


@dataclass(frozen=True, slots=True)
class CoreRendering:
    """The resident block and what the budget left out."""

    text: str
    budget: int
    included_ids: tuple[str, ...]
    omitted_ids: tuple[str, ...]
    counted: int | None = field(default=None, compare=False)
    """The text's tokens when counted already (a memo's); else :attr:`tokens` counts them when asked."""

    @property
    def tokens(self) -> int:
        """The block's tokens: counted on first ask, so that rendering it (a prompt's core) need not load the
        encoding when everything fits (see :func:`render_core`)."""
        return self.counted if self.counted is not None else count_tokens(self.text)


def plain_text(record: Record) -> str:
    """Record text without footnote references, on one line."""
    return " ".join(_REF.sub("", record.text).split())


def snippet(record: Record) -> str:
    text = plain_text(record)
    if len(text) > TIMELINE_SNIPPET_CHARS:
        text = text[: TIMELINE_SNIPPET_CHARS - 1].rstrip() + "…"
    return text


def link(record: Record) -> str:
    return f"[[{record.topic[:-3]}#^{record.memory_id}]]"


def _order(record: Record) -> tuple[str, str, int]:
    return (record.date or "", record.topic, record.position)


@lru_cache(maxsize=100_000)
def entry(record: Record) -> str:
    """A record's one-line listing in Timeline and Recent: snippet and block link."""
    return f"{snippet(record)} — {link(record)}"


def _entry_lines(records: Iterable[Record]) -> list[str]:
    lines: list[str] = []
    for record in records:
        assert record.date is not None
        if len(record.date) == 10:  # a day file: its title is the date
            lines.append(f"- {entry(record)}")
        else:  # a month's or a year's file: the date leads, a blank line follows
            lines += [f"- {record.date} · {entry(record)}", ""]
    return lines


def topic_timeline_lines(topic: ParsedTopic, path: str) -> dict[str, list[str]]:
    """``topic``'s entry lines in Timeline file ``path``, by date, in the topic's order.

    Cached on the parsed topic: a write pass changes one or two topics, and the day's file
    is re-rendered from every other topic's cached lines instead of from its records.
    """
    cached = topic.timeline_lines.get(path)
    if cached is None:
        by_date: dict[str, list[Record]] = {}
        for record in topic.by_timeline.get(path, ()):
            assert record.date is not None
            by_date.setdefault(record.date, []).append(record)
        cached = topic.timeline_lines[path] = {date: _entry_lines(group) for date, group in by_date.items()}
    return cached


def render_timeline_file(path: str, topics: Iterable[ParsedTopic]) -> bytes:
    """One Timeline file (a day, a month-only or a year-only date): its records, titled by the date.

    Records are listed by (date, topic path, position in the topic), as
    :func:`render_timeline_records` does (a test checks both agree).
    """
    by_date: dict[str, list[list[str]]] = {}
    for topic in sorted(topics, key=lambda t: t.path):
        for date, lines in topic_timeline_lines(topic, path).items():
            by_date.setdefault(date, []).append(lines)
    out = [f"# {path.rsplit('/', 1)[1][:-3]}", ""]
    for date in sorted(by_date):
        for lines in by_date[date]:
            out += lines
    return ("\n".join(out).rstrip("\n") + "\n").encode("utf-8")


def render_timeline_records(path: str, records: Sequence[Record]) -> bytes:
    """The reference rendering of one Timeline file from its records, sorted afresh."""
    lines = [f"# {path.rsplit('/', 1)[1][:-3]}", "", *_entry_lines(sorted(records, key=_order))]
    return ("\n".join(lines).rstrip("\n") + "\n").encode("utf-8")


def newest(records: Iterable[Record], limit: int) -> list[Record]:
    """The ``limit`` most recently created records, newest first."""
    return heapq.nlargest(limit, records, key=creation_key)


def render_recent(newest_first: Sequence[Record]) -> bytes:
    lines = ["# Recent", ""]
    for record in newest_first:
        lines.append(f"- {record.date or 'undated'} · {entry(record)}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def render_relations(topics: Iterable[ParsedTopic]) -> bytes:
    return render_edges(sorted({edge for topic in topics for edge in topic.edges}))


def render_edges(edges: Iterable[tuple[str, str, str]]) -> bytes:
    """The relations view of block links (record, linked record, topic), given sorted and once each."""
    payload = {"edges": [{"from": a, "to": b, "topic": t} for a, b, t in edges]}
    return (json.dumps(payload, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def render_core(core: ParsedTopic | None, budget: int, exclude: frozenset[str] = frozenset()) -> CoreRendering:
    """Render ``topics/core.md`` into the resident block, clipped at record/heading boundaries.

    Records in ``exclude`` (e.g. backed by pending sources) are left out before the budget applies, and so is
    a record another record of the core says it supersedes (:func:`~scriptorium.workspace.topics.
    supersedes_links`): of two standing instructions that contradict each other, the newer holds.
    """
    pieces: list[tuple[str, str | None]] = []
    if core is not None:
        exclude = exclude | {old for record in core.records for old in supersedes_links(record.text)}
        records = iter(core.records)
        for block in core.blocks:
            if block.kind == "heading":
                pieces.append(("#" * block.level + " " + block.title, None))
            elif block.kind == "record":
                record = next(records)
                if record.memory_id in exclude:
                    continue
                date = f"{record.date}: " if record.date else ""
                text = _REF.sub("", record.text).rstrip()
                pieces.append((f"{date}{text} ^{record.memory_id}", record.memory_id))
    chosen: list[tuple[str, str | None]] = []
    omitted: list[str] = []
    if _utf8_bytes(CORE_HEADER + "\n") + sum(_utf8_bytes("\n\n" + text) for text, _ in pieces) <= budget:
        chosen = pieces  # a token covers a byte or more: within the budget in bytes, within it in tokens
    else:
        used = count_tokens(CORE_HEADER + "\n")
        for index, (text, rid) in enumerate(pieces):
            cost = count_tokens("\n\n" + text)
            if used + cost > budget:
                omitted = [r for _, r in pieces[index:] if r]
                break
            chosen.append((text, rid))
            used += cost
    # Headings whose section kept no record are dropped: they only cost tokens.
    kept: list[str] = []
    for index, (text, rid) in enumerate(chosen):
        if rid is None and not any(r for _, r in chosen[index + 1 :]):
            continue
        kept.append(text)
    body = "\n\n".join([CORE_HEADER, *kept]) + "\n"
    return CoreRendering(
        text=body,
        budget=budget,
        included_ids=tuple(r for _, r in chosen if r),
        omitted_ids=tuple(omitted),
    )


def _utf8_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def timeline_groups(topics: Iterable[ParsedTopic]) -> dict[str, list[ParsedTopic]]:
    """Timeline file → the topics with records in it."""
    groups: dict[str, list[ParsedTopic]] = {}
    for topic in topics:
        for key in topic.by_timeline:
            groups.setdefault(key, []).append(topic)
    return groups


def render_all(topics: Iterable[ParsedTopic], recent_limit: int, core_budget: int) -> dict[str, bytes]:
    """Every derived view from scratch: path → bytes."""
    topic_list = list(topics)
    records = [record for topic in topic_list for record in topic.records]
    core = next((t for t in topic_list if t.path == CORE_SOURCE), None)
    views = {
        CORE_VIEW: render_core(core, core_budget).text.encode("utf-8"),
        RECENT_VIEW: render_recent(newest(records, recent_limit)),
        RELATIONS_VIEW: render_relations(topic_list),
    }
    for path, group in timeline_groups(topic_list).items():
        views[path] = render_timeline_file(path, group)
    return views
