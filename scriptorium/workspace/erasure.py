"""What a forgotten source leaves in one blob, found by identity: the rules a history purge applies.

A forget removes every record citing a forgotten source, whatever else it cites
(:mod:`scriptorium.changes.forget`). The same must hold in every earlier commit, where the text may have
any form a writer gave it (brackets escaped, whitespace folded, lines joined, backslashes doubled), so
the purge does not look for the text: it parses each blob as the transaction does.

* **A topic** (:meth:`Eraser.topic`) loses every record any of whose citations names a forgotten source
  (a record merged from several conversations goes whole: its prose may carry the forgotten words) and
  the footnote definitions of forgotten sources. A topic left without a record, that had one citing a
  forgotten source, goes entirely: its path and first heading are a conversation's title
  (``topics/conversations/<yyyy-mm>/<date>-<title>.md``).
* **A view** (:meth:`Eraser.view`) loses each entry of a removed record: a Timeline or Recent line
  linking to it, a Core paragraph ending in its ID, a Relations edge naming it.
* **Anything** then has each remaining occurrence of a removed topic's name (a link target in another
  record) and of a forgotten text or line (:meth:`Eraser.text`) replaced by ``[forgotten]``.

The removed records and topics are worked out first, from every commit (:meth:`Eraser.survey`), since a
view of one commit names records written in earlier ones.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import re2

from scriptorium.workspace.paths import (
    CORE_VIEW,
    RECENT_VIEW,
    RELATIONS_VIEW,
    TIMELINE,
    TOPICS,
    conversation_file,
    source_identity_from_path,
)
from scriptorium.workspace.topics import parse_topic

REDACTED = b"[forgotten]"
_VIEW_LINK = re.compile(rb"#\^([A-Za-z0-9_-]+)\]\]")
_CORE_ID = re.compile(rb"[ \t]\^([A-Za-z0-9_-]+)[ \t]*$")
_NOTE_LABEL = re.compile(r"^\[\^([^\]\s]+)\]:")
_HEAD = 32
"""Bytes of each looked-for string a first pass over a blob looks for (all at once)."""


def _any_of(found: Iterable[bytes]) -> Any:
    """One RE2 pattern matching wherever one of ``found`` (cut to its first bytes) occurs, in a single linear
    pass over a blob; None when there is nothing to look for. A blob it does not match holds none of them,
    so the exact rules, one string at a time, run only on the few blobs it does."""
    heads = sorted({item[:_HEAD] for item in found if item})
    if not heads:
        return None
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1  # bytes as bytes: a head may end inside a character
    options.log_errors = False
    options.max_mem = 64 << 20
    return re2.compile(b"|".join(re2.escape(head) for head in heads), options)


class Eraser:
    """The removal rules for one forget: its archive paths and the texts they held."""

    def __init__(
        self, paths: Iterable[str], needles: Iterable[bytes] = (), parts: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        """``parts``: each forgotten source's conversation file (its first part) → its later parts (layout 4), in
        any of which a citation may link the source's anchor."""
        self.forgotten = frozenset(paths)
        named = {
            form
            for key in sorted(self.forgotten)
            for form in (key, *_conversation_links(key, parts or {}))
            for form in (form, quote(form, safe="/#"))
        }
        self.links = sorted(form.split("/", 1)[1].encode("utf-8") for form in named)
        """How a blob names a forgotten source (its archive path below ``sources/``, as link targets end: the
        message's own file, or its conversation's file and anchor), as written and URL-quoted."""
        self._threads = sorted({link[: link.rfind(b"/") + 1] or link for link in self.links})
        """The conversations' folders of those links: a blob naming none of them names no link (most do not)."""
        self.needles = sorted(set(needles), key=len, reverse=True)
        self.removed_ids: set[str] = set()
        """Every record (by each of its block IDs) removed from some commit's topic."""
        self.removed_topics: set[str] = set()
        """Every topic path removed from some commit."""
        self._names: list[bytes] = []
        self._texts: Any = None
        """After the survey: where a removed topic's name or a forgotten text may occur (None: look one by one)."""
        self._ids: Any = None
        """After the survey: where a removed record's ID may occur."""

    def cites(self, data: bytes) -> bool:
        return any(thread in data for thread in self._threads) and any(link in data for link in self.links)

    def survey(self, path: str, data: bytes) -> None:
        """Learn what ``path``'s blob loses (its removed records, and itself when nothing stays)."""
        if self.cites(data):
            self._topic(path, data, learn=True)

    def finish_survey(self) -> None:
        """After every blob is surveyed: the removed topics' names, as other records' links name them."""
        names = {path.rsplit("/", 1)[-1].removesuffix(".md").encode("utf-8") for path in self.removed_topics}
        self._names = sorted(names, key=len, reverse=True)
        self._texts = _any_of([*self._names, *self.needles])
        self._ids = _any_of(i.encode("utf-8") for i in self.removed_ids)

    def topic(self, path: str, data: bytes) -> bytes | None:
        """``path``'s blob without what cites forgotten sources; None when the topic goes entirely."""
        if self.cites(data):
            kept = self._topic(path, data, learn=False)
            if kept is None:
                return None
            data = kept
        return self.text(data)

    def view(self, path: str, data: bytes) -> bytes:
        """A view's blob without the entries of removed records."""
        if self.removed_ids and (self._ids is None or self._ids.search(data) is not None):
            if path == RELATIONS_VIEW:
                data = self._relations(data)
            elif path == CORE_VIEW:
                data = self._core(data)
            elif path == RECENT_VIEW or path.startswith(f"{TIMELINE}/"):
                data = self._listing(data)
        return self.text(data)

    def text(self, data: bytes) -> bytes:
        """Each remaining removed topic name and forgotten text replaced."""
        if self._texts is not None and self._texts.search(data) is None:
            return data
        for needle in (*self._names, *self.needles):
            if needle in data:
                data = data.replace(needle, REDACTED)
        return data

    def blob(self, path: str, data: bytes) -> bytes | None:
        if path.startswith(f"{TOPICS}/"):
            return self.topic(path, data)
        return self.view(path, data)

    # -- the rules ---------------------------------------------------------------

    def _topic(self, path: str, data: bytes, *, learn: bool) -> bytes | None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self._lines_without_links(data)
        parsed = parse_topic(path, text)
        labels = {label for label, note in parsed.footnotes.items() if note.source_path in self.forgotten}
        lines = text.split("\n")
        drop: set[int] = set()
        removed = kept = 0
        records = iter(parsed.records)
        for block in parsed.blocks:
            span = range(block.start, block.start + len(block.lines))
            if block.kind == "record":
                record = next(records)
                if labels.intersection(record.refs):  # it cites a forgotten source: it goes whole
                    drop.update(span)
                    removed += 1
                    if learn:
                        self.removed_ids.update(record.block_ids)
                    continue
                kept += 1
            elif block.kind == "footnote":
                match = _NOTE_LABEL.match(block.lines[0])
                if match and match.group(1) in labels:
                    drop.update(span)
            elif any(link.decode("utf-8") in line for line in block.lines for link in self.links):
                drop.update(span)  # a paragraph that is no record but names a forgotten source
        if removed and not kept:
            if learn:
                self.removed_topics.add(path)
            return None
        out: list[str] = []
        for n, line in enumerate(lines):
            if n in drop:
                continue
            if line == "" and out and out[-1] == "" and (n - 1 in drop or n + 1 in drop):
                continue  # the blank line that separated a removed block
            out.append(line)
        return "\n".join(out).encode("utf-8")

    def _lines_without_links(self, data: bytes) -> bytes:
        return b"".join(line for line in data.splitlines(keepends=True) if not self.cites(line))

    def _listing(self, data: bytes) -> bytes:
        lines = data.split(b"\n")
        out: list[bytes] = []
        skip_blank = False
        for line in lines:
            if skip_blank and line == b"":
                skip_blank = False
                continue
            skip_blank = False
            found = _VIEW_LINK.findall(line)
            if found and any(m.decode() in self.removed_ids for m in found):
                skip_blank = bool(out) and out[-1] == b""  # a month's file: each entry has its blank line
                continue
            out.append(line)
        return b"\n".join(out)

    def _core(self, data: bytes) -> bytes:
        pieces = data.split(b"\n\n")
        kept = [p for p in pieces if not self._core_entry_removed(p)]
        if len(kept) == len(pieces):
            return data
        body = b"\n\n".join(kept)
        return body if body.endswith(b"\n") else body + b"\n"

    def _core_entry_removed(self, piece: bytes) -> bool:
        match = _CORE_ID.search(piece.rstrip(b"\n"))
        return match is not None and match.group(1).decode() in self.removed_ids

    def _relations(self, data: bytes) -> bytes:
        try:
            payload = json.loads(data)
            edges = payload["edges"]
        except (ValueError, KeyError, TypeError):
            return data
        kept = [e for e in edges if not ({e.get("from"), e.get("to")} & self.removed_ids)]
        if len(kept) == len(edges):
            return data
        return (json.dumps({**payload, "edges": kept}, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def _conversation_links(key: str, parts: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """How a citation of layouts 3 and 4 names source ``key``: a part of its conversation file (the first, or
    one of ``parts``) and the message's anchor (no other message of the conversation has it)."""
    identity = source_identity_from_path(key)
    if identity is None or key.count("/") != 4:
        return ()
    conversation = conversation_file(key)
    return tuple(f"{part}#source-{identity[2]}" for part in dict.fromkeys([conversation, *parts.get(conversation, ())]))
