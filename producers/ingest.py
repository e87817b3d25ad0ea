"""Import transcripts of any supported runtime, incrementally, into a session store.

:func:`import_paths` takes files and folders (the runtimes' own folders
included: ``~/.claude/projects``, ``~/.codex/sessions``, ``~/.pi/agent/sessions``,
``~/.openclaw/agents``; a project's folder, for its SpecStory and aider histories), detects
each file's format, reads what it gained since its cursor, stores the nodes, then moves the
cursor; an OpenClaw agent database holds many sessions, each with a cursor of its own
(:mod:`scriptorium.producers.openclaw`).
Writing memory is the caller's next step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from scriptorium.errors import InvalidArgument
from scriptorium.producers import aider, claude_code, codex, openclaw, pi, specstory
from scriptorium.producers.importing import (
    ImportedSession,
    Importer,
    Increment,
    MarkdownImporter,
    head_increment,
    json_objects,
    load_cursor,
    read_increment,
    save_cursor,
    store_sessions,
    transcript_files,
)
from scriptorium.producers.opening import open_transcript
from scriptorium.redaction import Redactor
from scriptorium.sessions import SessionStore, left_behind
from scriptorium.workspace.sources import AUDIENCE_NAME


@dataclass(slots=True)
class ImportReport:
    """What one import read and stored."""

    files: int = 0
    unrecognized: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    new_nodes: int = 0
    lines_read: int = 0
    bad_lines: int = 0
    restarted: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    formats: Counter[str] = field(default_factory=Counter)
    left: dict[str, str] = field(default_factory=dict)
    """Session → the tip its head was at and left for another branch during this import (write it now)."""
    grown: set[str] = field(default_factory=set)
    """The sessions whose transcript gained lines in this import (the others were read up to their cursor)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "unrecognized": self.unrecognized,
            "sessions": len(self.sessions),
            "session_ids": self.sessions,
            "new_nodes": self.new_nodes,
            "lines_read": self.lines_read,
            "bad_lines": self.bad_lines,
            "restarted": self.restarted,
            "skipped_types": dict(self.skipped),
            "formats": dict(self.formats),
            "branches_left": self.left,
        }


IMPORTERS: tuple[Importer, ...] = (codex, pi, claude_code)
"""One module per transcript format, each with its ``FORMAT`` name, ``recognizes(number, entry)`` (is a file
whose line ``number`` is ``entry`` one of mine?) and ``read(increment, store)``; a file is read by the first
that recognizes one of its first lines."""
MARKDOWN_IMPORTERS: tuple[MarkdownImporter, ...] = (specstory, aider)
"""The formats written as markdown, not JSON lines: each tells its files by their first lines as text
(``recognizes_head(path, lines)``)."""
_BY_FORMAT: dict[str, Importer] = {importer.FORMAT: importer for importer in (*IMPORTERS, *MARKDOWN_IMPORTERS)}
HEAD_LINES = 20


def detect_format(path: Path) -> str | None:
    """Which runtime wrote ``path``, from its first JSON lines, else (a markdown file) its first lines as
    text (None: not a transcript we know)."""
    try:
        with open_transcript(path) as handle:
            head = [handle.readline() for _ in range(HEAD_LINES)]
    except OSError:
        return None
    for number, entry in json_objects(enumerate(head, 1))[0]:
        for importer in IMPORTERS:
            if importer.recognizes(number, entry):
                return importer.FORMAT
    if path.suffix == ".md":
        text = [line.decode("utf-8", errors="replace") for line in head]
        for markdown in MARKDOWN_IMPORTERS:
            if markdown.recognizes_head(path, text):
                return markdown.FORMAT
    return None


def peek_session_id(path: Path, fmt: str) -> str | None:
    """The session a file belongs to, from its first lines (to find its cursor)."""
    return _BY_FORMAT[fmt].read(head_increment(path), None)[1].get("session")


def _moved_on(sessions: list[ImportedSession], session_id: str, before: str, after: str | None) -> bool:
    """Whether ``after`` reaches ``before`` through the nodes this import added (the usual new turn), so
    the whole graph need not be read to tell that the head did not leave its branch."""
    parents = {n.id: n.parent_id for s in sessions if s.id == session_id for n in s.nodes}
    step, seen = after, set()
    while step is not None and step in parents and step not in seen:
        seen.add(step)
        step = parents[step]
        if step == before:
            return True
    return False


@dataclass(frozen=True, slots=True)
class _Storing:
    """What :func:`import_paths` does with each increment read: parse, store, report, move the cursor."""

    store: SessionStore
    report: ImportReport
    audience: str | None
    workspace: str | None
    own_only: bool

    def __call__(self, path: Path, increment: Increment, read: Callable[..., Any]) -> None:
        store, report = self.store, self.report
        if increment.restarted:
            report.restarted.append(str(path))
        sessions, state = read(increment, store)
        report.lines_read += len(increment.lines)
        heads = {s.id: (known.head if (known := store.get_session(s.id)) else None) for s in sessions}
        report.new_nodes += store_sessions(store, sessions, self.audience, self.workspace, own_only=self.own_only)
        for session_id, before in heads.items():
            after = store.get_session(session_id)
            if after is None or before is None or after.head in (None, before):
                continue  # the usual import: the head moved on along its branch, or not at all
            if _moved_on(sessions, session_id, before, after.head):
                continue  # the new head descends from the old one through what this import added
            if (left := left_behind(store.node_parents(session_id), before, after.head)) is not None:
                report.left[session_id] = left
        for session in sessions:
            report.bad_lines += session.bad_lines
            report.skipped += session.skipped
            if session.id not in report.sessions:
                report.sessions.append(session.id)
            if increment.lines:
                report.grown.add(session.id)
        if state.get("session"):
            save_cursor(store, str(state["session"]), path, replace(increment.cursor, state=state))


def import_paths(
    store: SessionStore,
    paths: Iterable[Path],
    audience: str | None = None,
    workspace: str | None = None,
    *,
    redactor: Redactor | None,
    own_only: bool = False,
) -> ImportReport:
    """Import every transcript below ``paths``: only what each file gained since the last import.

    Sessions first met here belong to ``audience`` (a requester's name; None: shared) and are written into
    ``workspace`` (the workspace the importing hooks publish for; None: ``default``). ``own_only``: a
    session already stored for another audience (or shared) is refused (FORBIDDEN), not appended to: a
    requester's hook route names the session in the transcript it sends. ``redactor``: what takes the
    secrets out of every line before it is read (None: stored verbatim, ``SCRIPTORIUM_REDACT=off``).
    """
    if audience is not None and not AUDIENCE_NAME.match(audience):
        raise InvalidArgument(f"bad audience {audience!r}: a requester's name (letters, digits, '.', '_', '@', '-')")
    report = ImportReport()
    store_read = _Storing(store, report, audience, workspace, own_only)
    for path in transcript_files(p.expanduser() for p in paths):
        if openclaw.is_database(path):
            report.files += 1
            report.formats[openclaw.FORMAT] += 1
            with openclaw.connect(path) as connection:
                for session_id, end in openclaw.session_ends(connection).items():
                    cursor = load_cursor(store, session_id, path)
                    if cursor is not None and cursor.offset == end:
                        continue  # nothing new in this session
                    increment = openclaw.read_increment(connection, path, session_id, cursor)
                    store_read(path, replace(increment, redactor=redactor), openclaw.read)
            continue
        fmt = detect_format(path)
        if fmt is None:
            report.unrecognized.append(str(path))
            continue
        report.files += 1
        report.formats[fmt] += 1
        cursor = load_cursor(store, peek_session_id(path, fmt), path)
        store_read(path, replace(read_increment(path, cursor), redactor=redactor), _BY_FORMAT[fmt].read)
    return report
