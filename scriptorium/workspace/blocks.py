"""Topic Markdown as blocks: the file's lines grouped into headings, records, paragraphs, footnotes and
the rest, every line's bytes kept (normalization changes only what it must).

A *record* is a paragraph whose last line ends in one or more block IDs (`` ^id``). This module
only finds where blocks begin and end; :mod:`scriptorium.workspace.topics` reads what they say.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

BlockKind = Literal["heading", "record", "paragraph", "footnote", "blank", "break", "comment", "frontmatter", "code"]

BLOCK_ID = r"[A-Za-z0-9_-]+"
_TRAILING_IDS = re.compile(rf"((?:(?:^|[ \t])\^{BLOCK_ID})+)[ \t]*$")
_ONE_ID = re.compile(rf"\^({BLOCK_ID})")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
_FOOTNOTE_DEF = re.compile(r"^\[\^([^\]\s]+)\]:[ \t]?(.*)$")
_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})")
_BREAK = re.compile(r"^[ ]{0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")


class Block(NamedTuple):
    """A run of lines with one meaning; ``lines`` are the exact source lines."""

    kind: BlockKind
    lines: tuple[str, ...]
    start: int
    level: int = 0
    title: str = ""


_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def split_record_line(line: str) -> tuple[str, tuple[str, ...]]:
    """Split trailing ``^id`` tokens off a paragraph's last line.

    The same as matching ``_TRAILING_IDS`` (a test checks both on generated lines),
    scanning back from the end instead: every line of every topic goes through here.
    """
    pos = len(line.rstrip(" \t"))
    start = -1
    ids: list[str] = []
    while True:
        caret = line.rfind("^", 0, pos)
        ident = line[caret + 1 : pos]
        if caret < 0 or not ident or not _ID_CHARS.issuperset(ident):
            break
        ids.append(ident)
        if caret == 0:
            start = 0
            break
        if line[caret - 1] not in " \t":
            ids.pop()
            break
        start = pos = caret - 1
    if not ids:
        return line, ()
    return line[:start].rstrip(), tuple(reversed(ids))


def _split_record_line_by_pattern(line: str) -> tuple[str, tuple[str, ...]]:
    """The reference definition :func:`split_record_line` must agree with."""
    match = _TRAILING_IDS.search(line)
    if not match:
        return line, ()
    ids = tuple(_ONE_ID.findall(match.group(1)))
    return line[: match.start()].rstrip(), ids


def scan_blocks(
    lines: list[str],
    splits: dict[int, tuple[str, tuple[str, ...]]],
    definitions: dict[int, tuple[str, str]] | None = None,
) -> list[Block]:
    """The file's blocks; ``splits`` receives each record's last line split from its IDs, and
    ``definitions`` each footnote's label and first-line body, by first line."""
    blocks: list[Block] = []
    i = 0
    n = len(lines)
    if n and lines[0].strip() == "---":
        end = next((j for j in range(1, n) if lines[j].strip() in ("---", "...")), None)
        if end is not None:
            blocks.append(Block("frontmatter", tuple(lines[: end + 1]), 0))
            i = end + 1
    while i < n:
        line = lines[i]
        if line and line[0] not in _MAY_OPEN_BLOCK and not line[0].isspace():
            i = _paragraph(lines, i, n, blocks, splits)  # most lines: prose, a record's date, a word
            continue
        if not line.strip():
            blocks.append(Block("blank", (line,), i))
            i += 1
            continue
        if definition := _FOOTNOTE_DEF.match(line):  # before the others: a topic ends in many
            if definitions is not None:
                definitions[i] = (definition.group(1), definition.group(2))
            j = i + 1
            while j < n and (lines[j].startswith("  ") or lines[j].startswith("\t")) and lines[j].strip():
                j += 1
            blocks.append(Block("footnote", tuple(lines[i:j]), i))
            i = j
            continue
        heading = _HEADING.match(line)
        if heading:
            blocks.append(Block("heading", (line,), i, len(heading.group(1)), heading.group(2)))
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            marker = fence.group(1)
            j = i + 1
            while j < n and not lines[j].lstrip().startswith(marker):
                j += 1
            j = min(j + 1, n)
            blocks.append(Block("code", tuple(lines[i:j]), i))
            i = j
            continue
        if line.lstrip().startswith("<!--"):
            j = i
            while j < n and "-->" not in lines[j]:
                j += 1
            j = min(j + 1, n)
            blocks.append(Block("comment", tuple(lines[i:j]), i))
            i = j
            continue
        if _BREAK.match(line):
            blocks.append(Block("break", (line,), i))
            i += 1
            continue
        i = _paragraph(lines, i, n, blocks, splits)
    return blocks


_MAY_OPEN_BLOCK = frozenset("#`~[<*-_")
"""First characters of every line that can open something other than a paragraph (with whitespace)."""
_MAY_END_PARAGRAPH = frozenset("#`~[")
"""First characters of every line that can end a paragraph (with whitespace): a heading, a fence, a footnote."""


def _paragraph(
    lines: list[str], i: int, n: int, blocks: list[Block], splits: dict[int, tuple[str, tuple[str, ...]]]
) -> int:
    """Add the paragraph (or record) starting at line ``i``; returns the line after it."""
    j = i + 1
    while j < n:
        nxt = lines[j]
        if nxt and nxt[0] not in _MAY_END_PARAGRAPH and not nxt[0].isspace():
            j += 1  # plain prose goes on: no pattern can match it
            continue
        if not nxt.strip() or _HEADING.match(nxt) or _FENCE.match(nxt) or _FOOTNOTE_DEF.match(nxt):
            break
        j += 1
    para = tuple(lines[i:j])
    split = split_record_line(para[-1])
    if split[1]:
        splits[i] = split
    blocks.append(Block("record" if split[1] else "paragraph", para, i))
    return j
