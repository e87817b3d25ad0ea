"""Topic Markdown: parse a file into blocks, records, citations and block links.

A topic is Obsidian-flavoured Markdown. Headings form sections. A *record* is
a paragraph whose last line ends in one or more block IDs (`` ^id``); its
first line may start with a date (``2026-11-30: ``, ``2026-11: `` or
``2026: ``; no date means undated). A record cites at least one archived
source through a footnote whose definition is ``[label](../sources/...#source-...)``.
The source's identity comes from the link target, never from the label.

Where blocks begin and end is :mod:`scriptorium.workspace.blocks`'s; this
module reads what they say (dates, IDs, citations, links) into a
:class:`ParsedTopic`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date as _date
from functools import lru_cache
from typing import NamedTuple

from scriptorium.cache import BoundedCache
from scriptorium.workspace.blocks import (
    BLOCK_ID,
    Block,
    scan_blocks,
    split_record_line,
)
from scriptorium.workspace.paths import (
    TIMELINE,
    is_conversation_file,
    key_of_link,
    resolve_link,
    source_identity_from_path,
)

_FOOTNOTE_REF = re.compile(r"(?<!\\)\[\^([^\]\s]+)\](?!:)")
_DATE_PREFIX = re.compile(r"^(\d{4}(?:-\d{2}(?:-\d{2})?)?):[ \t]+")
_INLINE_LINK = re.compile(r"(?<![!\\])\[([^\[\]\n]+)\]\(([^()\s]+)\)")
_LINK_ONLY = re.compile(r"^\[([^\[\]\n]+)\]\(([^()\s]+)\)\s*$")
_WIKILINK_BLOCK = re.compile(rf"(?<!\\)\[\[([^\[\]|#\n]*)#\^({BLOCK_ID})(?:\|[^\[\]\n]*)?\]\]")
_MDLINK_BLOCK = re.compile(rf"(?<!\\)\]\(([^()\s#]*)#\^({BLOCK_ID})\)")
_SOURCE_FRAGMENT = "source-"


@lru_cache(maxsize=4096)
def valid_date(text: str) -> bool:
    """True for ``YYYY``, ``YYYY-MM`` and ``YYYY-MM-DD`` naming a real calendar date (remembered: a topic
    holds many records of the same few days)."""
    parts = [int(p) for p in text.split("-")]
    try:
        _date(parts[0], parts[1] if len(parts) > 1 else 1, parts[2] if len(parts) > 2 else 1)
    except ValueError:
        return False
    return parts[0] >= 1


class SourceRef(NamedTuple):
    """A citation target: the archived source and the link that reached it.

    This and the other parsed parts (footnotes, blocks, records) are named tuples, not dataclasses: a
    100,000-record workspace builds half a million of them, and a tuple is built several times faster.
    """

    provider: str
    thread: str
    message: str

    @property
    def identity(self) -> str:
        return f"{self.provider}/{self.thread}/{self.message}"


class Footnote(NamedTuple):
    """One footnote definition; ``source`` is set when it cites an archived source."""

    label: str
    body: str
    link_label: str | None
    target: str | None
    source: SourceRef | None
    source_path: str | None
    fragment_ok: bool


class Record(NamedTuple):
    """A cited paragraph with one or more block IDs (the first is its memory_id)."""

    block_ids: tuple[str, ...]
    date: str | None
    text: str
    refs: tuple[str, ...]
    headings: tuple[str, ...]
    topic: str
    position: int
    links: tuple[str, ...]

    @property
    def memory_id(self) -> str:
        return self.block_ids[0]


_RUNTIME_ID = re.compile(r"^m-[0-9a-z]{12}$")

CreationKey = tuple[int, str, str, int]


def timeline_path(date: str) -> str:
    """The Timeline file a date belongs to: its day's, its month's (month-only dates) or its year's.

    One file per day keeps a write pass's cost bounded by the day it writes into: a month file
    would be rewritten, whole, by every pass of the month.
    """
    year = date[:4]
    if len(date) == 10:
        return f"{TIMELINE}/{year}/{date[:7]}/{date}.md"
    return f"{TIMELINE}/{year}/{date[:7]}.md" if len(date) == 7 else f"{TIMELINE}/{year}/{year}.md"


def creation_key(record: Record) -> CreationKey:
    """Creation order: runtime IDs embed their creation time; older formats sort first."""
    if _RUNTIME_ID.match(record.memory_id):
        return (1, record.memory_id, "", 0)
    return (0, "", record.topic, record.position)


@dataclass(slots=True)
class ParsedTopic:
    """Everything the runtime needs to know about one topic file."""

    path: str
    blocks: list[Block]
    records: list[Record] = field(default_factory=list)
    footnotes: dict[str, Footnote] = field(default_factory=dict)
    duplicate_footnotes: list[str] = field(default_factory=list)
    _by_timeline: dict[str, list[Record]] | None = field(default=None, repr=False, compare=False)
    _edges: list[tuple[str, str, str]] | None = field(default=None, repr=False, compare=False)
    timeline_lines: dict[str, dict[str, list[str]]] = field(default_factory=dict, repr=False, compare=False)
    """Rendered Timeline entries by file and date, filled by the views on first use (a cache)."""
    multi_cited: list[tuple[frozenset[str], str]] | None = field(default=None, repr=False, compare=False)
    """Paragraphs citing two or more sources (their sources, their text), filled on first use (a cache)."""

    @property
    def title(self) -> str | None:
        """The topic's own title: its first top-level heading, if it has one."""
        return next((b.title for b in self.blocks if b.kind == "heading" and b.level == 1 and b.title), None)

    @property
    def by_timeline(self) -> dict[str, list[Record]]:
        """Timeline file → this topic's dated records in it, in order (worked out on first use: only the
        views ask, and recall parses every topic of a workspace without them)."""
        if self._by_timeline is None:
            groups: dict[str, list[Record]] = {}
            for record in self.records:
                if record.date:
                    groups.setdefault(timeline_path(record.date), []).append(record)
            self._by_timeline = groups
        return self._by_timeline

    @property
    def edges(self) -> list[tuple[str, str, str]]:
        """(record, linked record, this topic) for every block link (worked out on first use)."""
        if self._edges is None:
            self._edges = [(record.memory_id, target, self.path) for record in self.records for target in record.links]
        return self._edges

    def block_ids(self) -> set[str]:
        return {bid for rec in self.records for bid in rec.block_ids}

    def cited_paths(self, record: Record) -> list[str]:
        """The archive paths ``record`` cites through this topic's footnotes, in reference order."""
        notes = self.footnotes
        return [path for ref in record.refs if (note := notes.get(ref)) is not None and (path := note.source_path)]


def parse_date_prefix(first_line: str) -> tuple[str | None, str]:
    """Return (date, rest) when the line starts with a valid date prefix."""
    match = _DATE_PREFIX.match(first_line)
    if match and valid_date(match.group(1)):
        return match.group(1), first_line[match.end() :]
    return None, first_line


_REF_WITH_SPACE = re.compile(r"[ \t]*" + _FOOTNOTE_REF.pattern)


def without_footnote_refs(text: str) -> str:
    """A record's text without its ``[^label]`` citation markers (and the spaces before them)."""
    return _REF_WITH_SPACE.sub("", text) if "[^" in text else text


def footnote_refs(text: str) -> tuple[str, ...]:
    """Footnote labels referenced in ``text``, in order, without repeats."""
    if "[^" not in text:
        return ()
    return tuple(dict.fromkeys(_FOOTNOTE_REF.findall(text)))


_SUPERSEDES_WIKI = re.compile(
    rf"\b(?:supersedes|replaces)[ \t]+\[\[[^\[\]|#\n]*#\^({BLOCK_ID})(?:\|[^\[\]\n]*)?\]\]", re.I
)
_SUPERSEDES_MD = re.compile(rf"(?<!\\)\[(?:supersedes|replaces)\b[^\[\]\n]*\]\([^()\s#]*#\^({BLOCK_ID})\)", re.I)


def supersedes_links(text: str) -> tuple[str, ...]:
    """Block IDs of the records ``text`` says it supersedes: a block link labelled or preceded by *supersedes*
    (or *replaces*) — ``[supersedes](topic.md#^id)``, ``supersedes [[topic#^id]]``. The newer statement of a
    command renamed, a tool replaced or a decision reversed names the older one so; recall ranks it first and
    shows the older as superseded."""
    if "#^" not in text:
        return ()
    lowered = text.lower()
    if "supersedes" not in lowered and "replaces" not in lowered:
        return ()
    found = [m.group(1) for m in _SUPERSEDES_WIKI.finditer(text)]
    found += [m.group(1) for m in _SUPERSEDES_MD.finditer(text)]
    return tuple(dict.fromkeys(found))


def block_links(text: str) -> tuple[str, ...]:
    """Block IDs that ``text`` links to (``[[topic#^id]]`` or ``[x](topic.md#^id)``)."""
    if "#^" not in text:
        return ()
    found = [m.group(2) for m in _WIKILINK_BLOCK.finditer(text)]
    found += [m.group(2) for m in _MDLINK_BLOCK.finditer(text)]
    return tuple(dict.fromkeys(found))


def inline_links(text: str) -> list[re.Match[str]]:
    """Inline ``[label](target)`` links (not images, not escaped)."""
    return list(_INLINE_LINK.finditer(text))


def parse_footnote(topic: str, label: str, body: str) -> Footnote:
    """Interpret a footnote definition body; a citation is exactly one source link."""
    match = _LINK_ONLY.match(body.strip())
    if not match:
        return Footnote(label, body, None, None, None, None, False)
    link_label, target = match.group(1), match.group(2)
    path_part, _, fragment = target.partition("#")
    resolved = resolve_link(topic, path_part) if path_part else None
    if resolved is not None and resolved.count("/") == 3 and is_conversation_file(resolved):
        resolved = key_of_link(resolved, fragment)  # a conversation's file: its message is the fragment's
    identity = source_identity_from_path(resolved) if resolved else None
    if identity is None:
        return Footnote(label, body, link_label, target, None, None, False)
    ref = SourceRef(*identity)
    fragment_ok = fragment == _SOURCE_FRAGMENT + ref.message
    return Footnote(label, body, link_label, target, ref, resolved, fragment_ok)


def record_parts(
    lines: tuple[str, ...], split: tuple[str, tuple[str, ...]] | None = None
) -> tuple[str | None, str, tuple[str, ...]]:
    """(date, text, block_ids) of a record paragraph; text excludes date and IDs (``split``: its last
    line split from its IDs already)."""
    last, ids = split or split_record_line(lines[-1])
    body = list(lines[:-1]) + ([last] if last.strip() else [])
    date, first = parse_date_prefix(body[0]) if body else (None, "")
    if body:
        body[0] = first
    return date, "\n".join(body).strip(), ids


PARSED_SIZE = 7
"""About how many bytes of memory a parsed topic takes per byte of its text (its lines, records and
footnotes, and the text itself where it is a cache's key): 12.7 MB of a heavy user's topics parse to 75 MB.
The parse caches weigh each entry so, so that their bounds are memory, whatever the topics' sizes."""


def parsed_size(text_bytes: int) -> int:
    """The memory a parse of ``text_bytes`` of topic text holds, about (:data:`PARSED_SIZE`)."""
    return PARSED_SIZE * text_bytes


MEMO_BYTES = 32 << 20
"""Memory (:func:`parsed_size`) of the parses :func:`parse_topic` remembers by text (a writer's and the
organizer's reads of the same texts in one pass; sized by memory, not by a count a year's topics outgrow)."""
_memo: BoundedCache[tuple[str, str], ParsedTopic] = BoundedCache(1_000_000, MEMO_BYTES)


def parse_topic(path: str, text: str) -> ParsedTopic:
    """Parse a topic file. Never raises: validation decides what is acceptable.

    Parses are remembered by (path, text) up to :data:`MEMO_BYTES` of memory: a write pass parses the text it
    normalized again to install it, and the organizer then reads the installed topics, the same texts. A
    parsed topic is shared, so callers treat it as read-only (as they must anyway: the workspace caches it
    by blob too).
    """
    key = (path, text)
    parsed = _memo.get(key)
    if parsed is None:
        parsed = _parse_topic(path, text)
        _memo.put(key, parsed, parsed_size(len(text)))
    return parsed


def clear_memo() -> None:
    """Forget the remembered parses (a forget landed: they may hold its text)."""
    _memo.clear()


def _parse_topic(path: str, text: str) -> ParsedTopic:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    splits: dict[int, tuple[str, tuple[str, ...]]] = {}
    definitions: dict[int, tuple[str, str]] = {}
    blocks = scan_blocks(lines, splits, definitions)
    topic = ParsedTopic(path, blocks)
    chain: list[tuple[int, str]] = []
    headings: tuple[str, ...] = ()
    records, footnotes = topic.records, topic.footnotes
    for block in blocks:
        kind = block.kind
        if kind == "record":
            date, body_text, ids = record_parts(block.lines, splits.get(block.start))
            refs = footnote_refs(body_text)
            links = block_links(body_text)
            records.append(Record(ids, date, body_text, refs, headings, path, len(records), links))
        elif kind == "footnote":
            label, first = definitions[block.start]
            if len(block.lines) == 1:
                body = first.strip()
            else:
                body = "\n".join([first, *(ln.strip() for ln in block.lines[1:])]).strip()
            if label in footnotes:
                topic.duplicate_footnotes.append(label)
            footnotes[label] = parse_footnote(path, label, body)
        elif kind == "heading":
            while chain and chain[-1][0] >= block.level:
                chain.pop()
            chain.append((block.level, block.title))
            headings = tuple(title for _, title in chain)
    return topic
