"""The verbatim writer: the offline default. Deterministic, no model, no inference.

Each user message and assistant reply of the batch becomes one cited record
in the conversation's topic (``topics/conversations/<date>-<title>.md``;
past 200 records a day continues in ``<date>-<title>-2.md`` and so on),
dated by the message, in conversation order. It records every message it is
given, repeats included: the write markers and the "already in the tree"
guard keep a turn from being written twice, and a duplicate delivery that got
past them must show (the organizer merges repeated statements later, keeping
every citation).

Limits, stated plainly: it summarizes nothing and decides nothing; it keeps
what was said, with fenced code replaced by a marker and whitespace folded
into one paragraph per message; it does not route facts to subject topics,
merge related statements, or judge what is worth keeping.
"""

from __future__ import annotations

import re
import unicodedata

from scriptorium.workspace.sources import plain_markdown
from scriptorium.writer_interface import Batch, BatchMessage, Repair, TopicFiles

_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^[ ]{0,3}\1[ \t]*$|\Z)", re.S | re.M)
_WORD = re.compile(r"[\w'-]+")
KEYWORD_WORDS = 4
ROLE_LABEL = {"user": "User", "assistant": "Assistant"}


def flatten(text: str) -> str:
    """One Markdown-safe paragraph: code fences marked, whitespace folded, brackets escaped."""
    return plain_markdown(_FENCE.sub(" [code omitted] ", text))


def keyword(text: str) -> str:
    """A short citation label taken from the statement itself."""
    words = _WORD.findall(text.replace("[code omitted]", ""))
    return " ".join(words[:KEYWORD_WORDS]).lower() or "statement"


def slug(title: str, limit: int = 60) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    cleaned = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return cleaned[:limit].rstrip("-") or "conversation"


PART_RECORDS = 200
"""Records per conversation topic file; a longer conversation day continues in ``…-2.md``, ``…-3.md``.

A batch then re-reads and re-normalizes one bounded file, not the whole day: a long import
costs what it archives, not the square of the conversation's length.
"""
_RECORD_END = re.compile(r"[ \t]\^[A-Za-z0-9_-]+[ \t]*$", re.M)


def topic_base(batch: Batch) -> str:
    first = batch.messages[0].node
    return f"topics/conversations/{first.created_at.date().isoformat()}-{slug(batch.name or batch.title)}"


def topic_path(batch: Batch) -> str:
    """The first part's path (the whole conversation day when it is short)."""
    return topic_base(batch) + ".md"


def current_part(base: str, topics: TopicFiles) -> tuple[str, int]:
    """The last existing part of a conversation day (path and number; 1 when none exists yet)."""
    number = 1
    while topics.exists(f"{base}-{number + 1}.md"):
        number += 1
    return (f"{base}.md" if number == 1 else f"{base}-{number}.md"), number


class VerbatimWriter:
    """Records what was said, cited and dated; the offline default."""

    name = "verbatim"

    def write(self, batch: Batch, topics: TopicFiles, repair: Repair | None = None) -> None:
        base = topic_base(batch)
        title = batch.title.strip() or "Conversation"
        path, number = current_part(base, topics)
        current = topics.read(path) if topics.exists(path) else f"# {title}\n"
        if len(_RECORD_END.findall(current)) >= PART_RECORDS:
            number += 1
            path, current = f"{base}-{number}.md", f"# {title} (part {number})\n"
        lines: list[str] = []
        for message in batch.messages:
            line = self._record(message)
            if line is None:
                continue
            text, citation = line
            lines.append(f"{message.node.created_at.date().isoformat()}: {text} {citation}")
        if lines:
            topics.write(path, current.rstrip("\n") + "\n\n" + "\n\n".join(lines) + "\n")

    def _record(self, message: BatchMessage) -> tuple[str, str] | None:
        body = flatten(message.node.content)
        if not body or body == "\\[code omitted\\]":
            return None
        role = ROLE_LABEL.get(message.node.role, message.node.role.title())
        return f"{role}: {body}", f"[{keyword(message.node.content)}]({message.source_ref})"
