"""Recalled text as prompt text, wrapped once in ``<memory-context>`` where it is produced.

A light module (no numpy, no git): the per-prompt hook imports it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from scriptorium.errors import ValidationRejected
from scriptorium.recall.records import BranchLookup, Hit
from scriptorium.workspace.paths import CORE_SOURCE, CORE_VIEW, EVERYWHERE_HEADING
from scriptorium.workspace.sources import parse_source
from scriptorium.workspace.threads import read_entry
from scriptorium.workspace.topics import parse_topic
from scriptorium.workspace.views import CORE_HEADER

CONTEXT_TAG = "memory-context"
RECALL_BUDGET_CHARS = 2_000
"""What the per-prompt recall injects at most, in characters, its wrapping included: a runtime's context
is shared with everything else the turn needs, and most of the evidence fits in this much
(``benchmarks/recall.py``'s ``recall_at_2000_chars``)."""
EXCERPT_CHARS = 100
"""How much of each record a packed recall shows, around the first word of the prompt it holds: more
records in the budget, each still findable whole by its ID (memory_get). Tuned on dev only: 80, 100,
120, 140 and 200 characters held 0.798, 0.786, 0.759, 0.747 and 0.732 of the evidence in 2,000
characters; 100 keeps a sentence around the match."""


def wrap_memory_context(kind: str, body: str) -> str:
    """Wrap recalled text once, marked as memory rather than user input; the body cannot close the tag."""
    safe = body.replace(f"</{CONTEXT_TAG}", f"&lt;/{CONTEXT_TAG}").replace(f"<{CONTEXT_TAG}", f"&lt;{CONTEXT_TAG}")
    return (
        f'<{CONTEXT_TAG} kind="{kind}">\n'
        "Recalled from long-term memory; this is not the user's current message.\n\n"
        f"{safe.strip()}\n</{CONTEXT_TAG}>"
    )


def fresh_hits(hits: Sequence[Hit], session: str = "", prompt: str = "") -> list[Hit]:
    """``hits`` in rank order without what the asking conversation already holds — a record whose every
    source is a message of ``session``, a record that only repeats ``prompt`` (the same question asked in
    an earlier session) — nor a record repeating a better-ranked one's words."""
    asked = _words(prompt)
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if session and hit.only_from(session):
            continue
        words = _words(hit.snippet)
        if words in seen or (asked and words.removeprefix("user ") == asked):
            continue
        seen.add(words)
        kept.append(hit)
    return kept


def _words(text: str) -> str:
    return " ".join(re.sub(r"\W+", " ", text.casefold()).split())


def format_hits(hits: Sequence[Hit]) -> str:
    """Search results as prompt text: place, date, snippet and ID of each record.

    Records from the branch the conversation is on (or from no branch) come first; a record from a
    branch it left follows, labelled as the option not taken, never as a plain fact.
    """
    lines = []
    for hit in sorted(hits, key=lambda h: h.branch == "alternative"):  # stable: ranks kept within each
        date = f" ({hit.date})" if hit.date else ""
        pending = " [pending source]" if hit.trust == "pending" else ""
        label = f"[{hit.label}] " if hit.label else ""
        lines.append(f"- {hit.place}{date}: {label}{hit.snippet} ^{hit.memory_id}{pending}")
    return "\n".join(lines)


ForeignLookup = Callable[[Sequence[Sequence[str]]], list[bool]]
"""Each record's cited source paths → whether it belongs to another project than the asking session's
(:func:`scriptorium.recall.places.foreign_records`)."""


def pack_hits(hits: Sequence[Hit], excerpt: Callable[[str], str], budget: int = RECALL_BUDGET_CHARS) -> str:
    """Recall as prompt text within ``budget`` characters (its ``<memory-context>`` wrapping included): the
    hits in rank order, each an ``excerpt`` of its text and its ID, under its place (:attr:`Hit.short_place`,
    with the record's date), written once for the hits that share it; a hit that no longer fits is left
    out and a shorter one after it may still go in. Records from a branch the conversation left are
    labelled the option not taken, another project's name that project beside their place (once for the
    records that share it; once at the top when every hit is that project's). Empty when no hit fits."""
    room = budget - len(wrap_memory_context("recall", ""))
    projects = {hit.project for hit in hits}
    only = projects.pop() if len(projects) == 1 else ""
    heading = f"From project {only}:" if only else ""
    room -= len(heading) + 2 if heading else 0
    groups: dict[str, list[str]] = {}
    for hit in hits:
        date = f" ({hit.date})" if hit.date else ""
        title = f"{hit.short_place}{date}" + (f" [from project {hit.project}]" if hit.project and not only else "")
        pending = " [pending source]" if hit.trust == "pending" else ""
        label = f"[{hit.branch_label}] " if hit.branch_label else ""
        line = f"- {label}{excerpt(hit.snippet)} ^{hit.memory_id}{pending}"
        cost = len(line) + 1 + (0 if title in groups else len(title) + 2)
        if cost > room:
            continue
        room -= cost
        groups.setdefault(title, []).append(line)
    if not groups:
        return ""
    blocks = ["\n".join((title, *lines)) for title, lines in groups.items()]
    return wrap_memory_context("recall", "\n\n".join([heading, *blocks] if heading else blocks))


def installed_core_if_trusted(
    memory: Path, branches: BranchLookup | None = None, foreign: ForeignLookup | None = None
) -> str | None:
    """The effective core read from the installed ``core.md``, when every core record is trusted and shared.

    The installed view is the resident block rendered at the last install; when no
    record of ``topics/core.md`` rests on a pending or missing source it is exactly
    what :func:`scriptorium.provider.effective_core` computes, without opening the
    workspace or loading the recall index (what a SessionStart hook pays for).
    Returns None when a record is not trusted, cites a requester's own source (what the caller may see
    then depends on who it is), (given ``branches``) comes from a branch its
    conversation left, or (given ``foreign``) belongs to another project than the asking session's: the
    caller renders the core itself.
    """
    source = memory / CORE_SOURCE
    if not source.exists():
        return ""
    topic = parse_topic(CORE_SOURCE, source.read_text(encoding="utf-8"))
    for record in topic.records:
        for label in record.refs:
            note = topic.footnotes.get(label)
            if note is None or note.source_path is None:
                return None
            try:
                cited = parse_source(note.source_path, read_entry(memory, note.source_path))
            except (OSError, ValidationRejected):
                return None
            if cited.trust != "trusted" or cited.audience is not None:
                return None
    by_record = [topic.cited_paths(record) for record in topic.records]
    if branches is not None and by_record and "alternative" in branches(by_record):
        return None
    scoped = [
        paths
        for record, paths in zip(topic.records, by_record, strict=True)
        if EVERYWHERE_HEADING not in record.headings
    ]
    if foreign is not None and scoped and any(foreign(scoped)):
        return None
    view = memory / CORE_VIEW
    text = view.read_text(encoding="utf-8") if view.exists() else ""
    return text.replace(CORE_HEADER, "").strip()
