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
from dataclasses import dataclass
from functools import lru_cache

from scriptorium.defaults import TIMELINE_SNIPPET_CHARS
from scriptorium.tokens import count_tokens
from scriptorium.workspace.paths import CORE_SOURCE, CORE_VIEW, RECENT_VIEW, RELATIONS_VIEW
from scriptorium.workspace.topics import ParsedTopic, Record, creation_key

_REF = re.compile(r"[ \t]*\[\^[^\]\s]+\]")
CORE_HEADER = "<!-- Rendered from topics/core.md by Scriptorium. Edit topics/core.md, not this file. -->"


@dataclass(frozen=True, slots=True)
class CoreRendering:
    """The resident block and what the budget left out."""

    text: str
    tokens: int
    budget: int
    included_ids: tuple[str, ...]
    omitted_ids: tuple[str, ...]


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


def render_timeline_file(path: str, records: Sequence[Record]) -> bytes:
    """One Timeline file: a year (year-only dates) or a month, days as sections."""
    title = path.rsplit("/", 1)[1][:-3]
    lines = [f"# {title}", ""]
    current_day: str | None = None
    for record in sorted(records, key=_order):
        assert record.date is not None
        if len(record.date) == 10 and record.date != current_day:
            current_day = record.date
            lines += [f"## {current_day}", ""]
        prefix = "" if len(record.date) == 10 else f"{record.date} · "
        lines.append(f"- {prefix}{entry(record)}")
        if len(record.date) < 10:
            lines.append("")
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
    edges = sorted({edge for topic in topics for edge in topic.edges})
    payload = {"edges": [{"from": a, "to": b, "topic": t} for a, b, t in edges]}
    return (json.dumps(payload, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def render_core(core: ParsedTopic | None, budget: int, exclude: frozenset[str] = frozenset()) -> CoreRendering:
    """Render ``topics/core.md`` into the resident block, clipped at record/heading boundaries.

    Records in ``exclude`` (e.g. backed by pending sources) are left out before the budget applies.
    """
    pieces: list[tuple[str, str | None]] = []
    if core is not None:
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
    used = count_tokens(CORE_HEADER + "\n")
    omitted: list[str] = []
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
        tokens=count_tokens(body),
        budget=budget,
        included_ids=tuple(r for _, r in chosen if r),
        omitted_ids=tuple(omitted),
    )


def timeline_groups(topics: Iterable[ParsedTopic]) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = {}
    for topic in topics:
        for key, records in topic.by_timeline.items():
            groups.setdefault(key, []).extend(records)
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
