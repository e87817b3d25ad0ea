"""The verbatim writer: the offline default. Deterministic, no model, no inference.

Each user message and assistant reply of the batch becomes one cited record
in the conversation's topic (``topics/conversations/<yyyy-mm>/<date>-<title>.md``;
past 200 records a day continues in ``<date>-<title>-2.md`` and so on),
dated by the message, in conversation order. It records every message it is
given, repeats included: the write markers and the "already in the tree"
guard keep a turn from being written twice, and a duplicate delivery that got
past them must show (the organizer merges repeated statements later, keeping
every citation).

One thing it routes: in a coding agent's session (one that ran in a folder), a sentence
of the user's (never the agent's) that states a standing instruction or preference —
opening with always, never, from now on, remember that, I prefer, don't … ever, …
(:func:`standing_instructions`) — becomes a record of ``topics/core.md`` as well, under
``# Standing instructions``, citing the same message: the resident block of every later
session of that project opens with it (a record of another project's session is left out
of a session's opening: :func:`scriptorium.recall.places.foreign_records`). One the user says
is for all their projects ("in every repo", "everywhere") goes under ``## All projects``
there, and opens every session. One that says the opposite of an earlier one ("always X",
then "never X") names it as superseded: the newest holds, and the older leaves the resident
block (:func:`scriptorium.workspace.views.render_core`). Two rules that differ otherwise
("run the linter before committing", "run the tests before committing") both stand: which
differences are conflicts, words alone cannot tell.

Limits, stated plainly: it summarizes nothing else and decides nothing; it keeps
what was said, with fenced code replaced by a marker and whitespace folded
into one paragraph per message; it does not route facts to subject topics,
merge related statements, or judge what is worth keeping.
"""

from __future__ import annotations

import re
import unicodedata

from scriptorium.workspace.paths import CORE_SOURCE, EVERYWHERE_HEADING, conversation_topic_base
from scriptorium.workspace.sources import plain_markdown
from scriptorium.workspace.topics import parse_topic
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
    return conversation_topic_base(first.created_at.date().isoformat(), slug(batch.name or batch.title))


def topic_path(batch: Batch) -> str:
    """The first part's path (the whole conversation day when it is short)."""
    return topic_base(batch) + ".md"


def current_part(base: str, topics: TopicFiles) -> tuple[str, int]:
    """The last existing part of a conversation day (path and number; 1 when none exists yet)."""
    number = 1
    while topics.exists(f"{base}-{number + 1}.md"):
        number += 1
    return (f"{base}.md" if number == 1 else f"{base}-{number}.md"), number


STANDING_HEADING = "Standing instructions"
"""The section of ``topics/core.md`` standing instructions go into (:mod:`scriptorium.changes.remember`'s too)."""
_LEAD = r"^(?:(?:and|also|ok(?:ay)?|so|yes|yeah|please|but|then)\b[, ]*)*"
"""Words a user opens a sentence with before the rule itself ("also, from now on, …", "and please never …")."""
_STANDING = re.compile(
    _LEAD + r"(?:always|never|from now on|going forward|remember (?:that|to)|"
    r"(?:i|we)(?:'d| would)? (?:always )?prefer)\b",
    re.I,
)
_STANDING_DONT = re.compile(
    _LEAD + r"(?:don'?t|do not)\b.*\b(?:ever|again|any ?more|unless|in (?:this|the|our) "
    r"(?:repo|repository|project|codebase))\b",
    re.I,
)
"""A "don't" is a standing rule only when it says so (ever, again, anymore, unless, in this repo) or is about
how the agent treats the user (:data:`_STANDING_WITHIN`): most are about the task at hand ("dont overwrite,
error")."""
_STANDING_WITHIN = re.compile(
    r"\b(?:should|must|shall|ought to|has to|have to)(?: not)? (?:always|never)\b"
    r"|\b(?:should|must)\b.*\b(?:in all cases|at all times|without exception)\b"
    r"|(?:^|[,;] )(?:don'?t|do not) (?:just )?(?:ask|tell|make|show|give|remind|bother|interrupt) me\b"
    r"|\bto (?:always|never)\b|\b(?:from now on|going forward|from here on)\b|,[ ]*always[.!]?$",
    re.I,
)
"""A rule said within the sentence: an obligation that holds every time ("tests.md should always use…", "red
tests must come first in all cases", "update the rule to always create…", "…, and from now on never ask"), a
"don't" about how the agent treats the user ("do it, dont just tell me what to do"), or one closed with ",
always"."""
_NOT_STANDING = re.compile(_LEAD + r"(?:never ?mind|don'?t (?:worry|bother)|do not (?:worry|bother))\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!])\s+|\n+")
_BULLET = re.compile(r"^(?:[-*+]|\d{1,3}[.)])\s+")
"""A list item's marker: a user's rules often come as a list ("- always use …")."""
STANDING_CHARS = (12, 240)
"""A standing instruction is one sentence of this many characters: a rule, not a paragraph."""
_HEADING = re.compile(r"^#{1,6} ", re.M)
_FOOTNOTE_DEF = re.compile(r"^\[\^[^\]\n]+\]:", re.M)


def standing_instructions(text: str) -> list[str]:
    """The sentences (or list items) of a user's message that state a standing instruction or preference, in
    their words: one that opens with always, never, from now on, remember that/to, I prefer, … or with a
    "don't" that says it stands (ever, again, in this repo), or says within it that something should always
    or never be so; not a question, not "never mind" or "don't worry"."""
    found = []
    for sentence in _SENTENCE_END.split(_FENCE.sub(" ", text)):
        said = _BULLET.sub("", " ".join(sentence.split()))
        low, high = STANDING_CHARS
        if not low <= len(said) <= high or said.endswith("?") or _NOT_STANDING.match(said):
            continue
        if _STANDING.match(said) or _STANDING_DONT.match(said) or _STANDING_WITHIN.search(said):
            found.append(said)
    return found


_EVERYWHERE = re.compile(
    r"\b(?:in|for|across|on) (?:all|every|any|each) (?:of )?(?:my |our |the )?"
    r"(?:projects?|repos?|repositories|codebases?)\b|\beverywhere\b|\bglobally\b",
    re.I,
)
"""A standing instruction the user says holds in all their projects, not only the one it was said in."""


def user_wide(rule: str) -> bool:
    """Whether the user says ``rule`` holds in every project (:data:`_EVERYWHERE`)."""
    return bool(_EVERYWHERE.search(rule))


_RULE_WORD = re.compile(r"[a-z0-9]+")
_NEGATIONS = frozenset({"never", "dont", "not", "no"})
_FILLER = frozenset(
    {"always", "please", "from", "now", "on", "going", "forward", "do", "ever", "again", "anymore", "any", "more"}
)


def _stance(rule: str) -> tuple[bool, frozenset[str]]:
    """A rule as (whether it forbids, what it is about): its words without the ones that only say how firmly
    or whether ("always", "never", "don't", "from now on")."""
    words = _RULE_WORD.findall(rule.lower().replace("n't", "nt").replace("'", ""))
    return bool(_NEGATIONS.intersection(words)), frozenset(words) - _NEGATIONS - _FILLER


def contradicted(older: str, newer: str) -> bool:
    """Whether ``newer`` says the opposite of ``older`` about the same thing ("Always push to main", then
    "Never push to main"): one forbids what the other asks, in the same words otherwise."""
    (forbids, about), (then_forbids, then_about) = _stance(newer), _stance(older)
    return forbids != then_forbids and len(about) >= 2 and about == then_about


def with_standing(core: str | None, lines: list[str], section: str | None = None) -> str:
    """``topics/core.md`` with ``lines`` (records) at the end of its standing-instructions section (made when
    missing), before the next heading or the footnote definitions; with ``section``, at the end of that
    sub-section (``## section``, made at the end of the standing-instructions section when missing)."""
    if section is not None:
        return _in_section(with_standing(core, [], None) if core is None else core, lines, section)
    added = "\n\n".join(lines)
    if not lines:
        return core if core is not None else f"# {STANDING_HEADING}\n"
    if core is None:
        return f"# {STANDING_HEADING}\n\n{added}\n"
    heading = re.search(rf"^#{{1,6}} {re.escape(STANDING_HEADING)}[ \t]*$", core, re.M)
    if heading is None:
        definitions = _FOOTNOTE_DEF.search(core)
        at = definitions.start() if definitions else len(core)
        return f"{core[:at].rstrip()}\n\n# {STANDING_HEADING}\n\n{added}\n\n{core[at:].lstrip()}".rstrip() + "\n"
    ends = [m.start() for m in (_HEADING.search(core, heading.end()), _FOOTNOTE_DEF.search(core, heading.end())) if m]
    at = min(ends, default=len(core))
    return f"{core[:at].rstrip()}\n\n{added}\n\n{core[at:].lstrip()}".rstrip() + "\n"


def _in_section(core: str, lines: list[str], section: str) -> str:
    """``core`` with ``lines`` at the end of ``## section`` of its standing-instructions section."""
    added = "\n\n".join(lines)
    standing = re.search(rf"^# {re.escape(STANDING_HEADING)}[ \t]*$", core, re.M)
    if standing is None:
        definitions = _FOOTNOTE_DEF.search(core)
        at = definitions.start() if definitions else len(core)
        made = f"# {STANDING_HEADING}\n\n## {section}\n\n{added}"
        return f"{core[:at].rstrip()}\n\n{made}\n\n{core[at:].lstrip()}".strip() + "\n"
    after = [m for m in (_TITLE.search(core, standing.end()), _FOOTNOTE_DEF.search(core, standing.end())) if m]
    ends_at = min((m.start() for m in after), default=len(core))  # the standing-instructions section's end
    heading = re.search(rf"^## {re.escape(section)}[ \t]*$", core[standing.end() : ends_at], re.M)
    if heading is None:  # made at the end of the standing-instructions section (before the next title)
        at = ends_at
        return f"{core[:at].rstrip()}\n\n## {section}\n\n{added}\n\n{core[at:].lstrip()}".rstrip() + "\n"
    start = standing.end() + heading.end()
    ends = [m.start() for m in (_HEADING.search(core, start), _FOOTNOTE_DEF.search(core, start)) if m]
    at = min(ends, default=len(core))
    return f"{core[:at].rstrip()}\n\n{added}\n\n{core[at:].lstrip()}".rstrip() + "\n"


_TITLE = re.compile(r"^# ", re.M)


def _superseding(core: str | None, rule: str) -> str:
    """`` ([supersedes](topics/core.md#^id))`` for each standing instruction of ``core`` that ``rule`` says the
    opposite of (:func:`contradicted`), else ""."""
    if core is None:
        return ""
    ids = [
        record.memory_id
        for record in parse_topic(CORE_SOURCE, core).records
        if STANDING_HEADING in record.headings and contradicted(_REF_TAIL.sub("", record.text), rule)
    ]
    return "".join(f" ([supersedes]({CORE_SOURCE}#^{memory_id}))" for memory_id in ids)


_REF_TAIL = re.compile(r"\s*\[\^[^\]]*\]|\s*\[[^\]]*\]\([^)]*\)|\s*\^m-[0-9a-z]+")
"""A record's citations (footnote references, links) and block ID: what its words as a rule leave out."""


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
        standing: list[str] = []
        everywhere: list[str] = []
        core = topics.read(CORE_SOURCE) if topics.exists(CORE_SOURCE) else None
        for message in batch.messages:
            line = self._record(message)
            if line is None:
                continue
            text, citation = line
            day = message.node.created_at.date().isoformat()
            lines.append(f"{day}: {text} {citation}")
            if batch.folder and message.node.role == "user":  # the user's own words to an agent at work
                for said in standing_instructions(message.node.content):
                    rule = plain_markdown(said)
                    if rule in (core or "") or any(rule in known for known in (*standing, *everywhere)):
                        continue
                    kept = f"{day}: {rule} [{keyword(said)}]({message.source_ref}){_superseding(core, rule)}"
                    (everywhere if user_wide(rule) else standing).append(kept)
        if lines:
            topics.write(path, current.rstrip("\n") + "\n\n" + "\n\n".join(lines) + "\n")
        if standing:  # a session's standing instructions open every later session of its project
            core = with_standing(core, standing)
        if everywhere:  # and those the user says are for all projects, every session
            core = with_standing(core, everywhere, EVERYWHERE_HEADING)
        if standing or everywhere:
            assert core is not None
            topics.write(CORE_SOURCE, core)

    def _record(self, message: BatchMessage) -> tuple[str, str] | None:
        body = flatten(message.node.content)
        if not body or body == "\\[code omitted\\]":
            return None
        role = ROLE_LABEL.get(message.node.role, message.node.role.title())
        return f"{role}: {body}", f"[{keyword(message.node.content)}]({message.source_ref})"
