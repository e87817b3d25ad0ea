"""What every transcript importer shares: sessions read from files, incremental reads, format detection.

A runtime appends to its transcript while the conversation goes on. An import
after each turn must cost the new lines, not the file, so each file has a
:class:`Cursor` — where the last import stopped (byte offset and line count)
and the file's identity (device, inode and a hash of the bytes just before the
offset). The cursor is kept with the session, in the session store's metadata
under ``import:<path>``, and is written only after the nodes it covers are
stored: a crash in between re-reads those lines, which is harmless because
nodes are stored idempotently by ID.

* A torn last line (no newline yet: the runtime is still writing) is left for
  the next import.
* A file that shrank, was replaced (another inode) or rewritten (the bytes
  before the offset changed) is read again from the start.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from scriptorium.errors import Forbidden
from scriptorium.producers.opening import open_transcript
from scriptorium.recall.places import PROJECT_KEY, REMOTE_KEY, place_of
from scriptorium.redaction import Redactor
from scriptorium.sessions import (
    AUDIENCE_KEY,
    FORGOTTEN_KEY,
    TITLE_FROM_KEY,
    WORKSPACE_KEY,
    Node,
    NodeKind,
    Session,
    SessionStore,
    audience_of,
)
from scriptorium.titles import derived_title

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TAIL_BYTES = 4096
"""How many bytes before the offset identify the file's content (rewrites are caught there)."""
CURSOR_PREFIX = "import:"
DATABASE_NAMES = ("openclaw-agent.sqlite",)
"""Transcript stores that are databases, not files of lines, found in folders by their name
(:mod:`scriptorium.producers.openclaw`)."""


@dataclass(slots=True)
class ImportedSession:
    """One session read from transcript files."""

    id: str
    title: str | None
    provider: str
    nodes: list[Node] = field(default_factory=list)
    head: str | None = None
    updated_at: datetime = EPOCH
    bad_lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    """Lines of types the importer does not turn into nodes, by type (never fatal)."""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the last import of one file stopped, and what the file was then."""

    device: int
    inode: int
    offset: int
    lines: int
    tail_sha: str
    state: dict[str, Any]
    """The importer's own state at the offset (the session, the last node, …)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: object) -> Cursor | None:
        if not isinstance(value, Mapping):
            return None
        try:
            return cls(
                int(value["device"]),
                int(value["inode"]),
                int(value["offset"]),
                int(value["lines"]),
                str(value["tail_sha"]),
                dict(value.get("state") or {}),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class Increment:
    """The complete lines a file gained since its cursor."""

    lines: list[tuple[int, bytes]]
    """(1-based line number, line without its newline)."""
    start_state: dict[str, Any]
    """The importer state to continue from (empty when reading from the start)."""
    restarted: bool
    """True when the file was read from the start although a cursor existed (rewritten or replaced)."""
    cursor: Cursor
    """The cursor after these lines (the torn last line, if any, is not included)."""
    path: Path | None = None
    """The file read (a format may take identity from its name: a Codex rollout continuing another)."""
    redactor: Redactor | None = None
    """What takes secrets out of every string of every line before an importer sees it (None: redaction off)."""


def _tail_sha(handle: Any, offset: int) -> str:
    start = max(0, offset - TAIL_BYTES)
    handle.seek(start)
    return hashlib.sha256(handle.read(offset - start)).hexdigest()


def read_increment(path: Path, cursor: Cursor | None) -> Increment:
    """The lines ``path`` gained since ``cursor`` (all of them without one, or when the file changed)."""
    with open_transcript(path) as handle:
        info = os.fstat(handle.fileno())
        start, first_line, state, restarted = 0, 0, {}, False
        if cursor is not None:
            same_file = (info.st_dev, info.st_ino) == (cursor.device, cursor.inode) and info.st_size >= cursor.offset
            if same_file and _tail_sha(handle, cursor.offset) == cursor.tail_sha:
                start, first_line, state = cursor.offset, cursor.lines, dict(cursor.state)
            else:
                restarted = True
        handle.seek(start)
        data = handle.read()
    complete = data.rfind(b"\n") + 1  # a last line without its newline is still being written
    lines = [(first_line + n + 1, line.rstrip(b"\r")) for n, line in enumerate(data[:complete].split(b"\n")[:-1])]
    end = start + complete
    with open_transcript(path) as handle:
        tail = _tail_sha(handle, end)
    cursor_after = Cursor(info.st_dev, info.st_ino, end, first_line + len(lines), tail, {})
    return Increment(lines, state, restarted, cursor_after, path)


def head_increment(path: Path, limit: int = 65_536) -> Increment:
    """The complete lines among a file's first ``limit`` bytes, as if read without a cursor."""
    with open_transcript(path) as handle:
        data = handle.read(limit)
    complete = data.rfind(b"\n") + 1
    lines = [(n + 1, line.rstrip(b"\r")) for n, line in enumerate(data[:complete].split(b"\n")[:-1])]
    return Increment(lines, {}, False, Cursor(0, 0, complete, len(lines), "", {}), path)


def json_objects(
    lines: Iterable[tuple[int, bytes]], redactor: Redactor | None = None
) -> tuple[list[tuple[int, dict[str, Any]]], int]:
    """The JSON objects among ``lines`` with their line numbers, and how many lines were not objects; with
    ``redactor``, every string in them (keys too) has its secrets replaced: nothing an importer reads, keeps
    in its state or stores has them (:mod:`scriptorium.redaction`)."""
    found: list[tuple[int, dict[str, Any]]] = []
    bad = 0
    for number, raw in lines:
        if not raw.strip():
            continue
        text = raw.decode("utf-8", errors="replace")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(value, dict):
            found.append((number, value if redactor is None else _redacted(redactor, text, value)))
        else:
            bad += 1
    return found, bad


def _redacted(redactor: Redactor, line: str, value: dict[str, Any]) -> dict[str, Any]:
    """``value`` (the object ``line`` decodes to) redacted. A line with no escape holds each of its strings as
    it is, so one look at the line tells whether any could hold a secret; a line with escapes (``\\u0054``,
    ``\\n``, ``\\"``) is looked at only as decoded, since an escape can hide a secret from the raw text."""
    if "\\" not in line and not redactor.may_hold(line):
        return value
    redacted: dict[str, Any] = redactor.value(value)
    return redacted


def parse_time(value: Any, fallback: datetime) -> datetime:
    """An ISO-8601 string or epoch milliseconds as an aware datetime, else ``fallback``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            return fallback
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return fallback
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return fallback


class Importer(Protocol):
    """One transcript format's adapter: a module of :mod:`scriptorium.producers` (listed in ``ingest.IMPORTERS``)."""

    FORMAT: str
    """The format's name in reports (``formats``) and cursors: the runtime's own name."""

    def recognizes(self, number: int, entry: Mapping[str, Any]) -> bool:
        """Whether a file whose line ``number`` (from 1) is ``entry`` is in this format."""
        ...

    def read(self, increment: Increment, store: SessionStore | None) -> tuple[list[ImportedSession], dict[str, Any]]:
        """The session nodes in the lines a file gained, and the state to continue from (``store`` to look up
        what earlier imports stored; None when only peeking at a file's head)."""
        ...


class MarkdownImporter(Importer, Protocol):
    """A format written as markdown (:mod:`scriptorium.producers.specstory`, :mod:`scriptorium.producers.aider`):
    its files are told by their first lines as text, not as JSON."""

    def recognizes_head(self, path: Path, head: list[str]) -> bool:
        """Whether ``path``, whose first lines are ``head``, is in this format."""
        ...


def transcript_files(paths: Iterable[Path]) -> list[Path]:
    """Every ``*.jsonl`` file, OpenClaw agent database (:data:`DATABASE_NAMES`) and project transcript
    (:func:`is_project_transcript`: SpecStory's and aider's markdown) named or found below the named folders
    (the runtimes' own folders, a project's folder, included).

    Claude Code's subagent files (``agent-*.jsonl``) come after the main sessions they belong to.
    """
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            patterns = ("*.jsonl", *DATABASE_NAMES, AIDER_HISTORY)
            found.extend(sorted(p for pattern in patterns for p in path.rglob(pattern)))
            found.extend(sorted(_specstory_files(path)))
        else:
            found.append(path)
    return sorted(dict.fromkeys(found), key=lambda p: (p.name.startswith("agent-"), str(p)))


AIDER_HISTORY = ".aider.chat.history.md"
"""The name aider gives its chat history, in the project's root (:mod:`scriptorium.producers.aider`)."""
SPECSTORY_HISTORY = (".specstory", "history")
"""Where SpecStory keeps a project's sessions, one markdown file each (:mod:`scriptorium.producers.specstory`)."""


def is_project_transcript(path: Path) -> bool:
    """Whether ``path`` is a transcript kept in a project's folder rather than a runtime's: aider's chat history,
    or a markdown file below ``.specstory/history``."""
    if path.name == AIDER_HISTORY:
        return True
    parts = path.parts
    return path.suffix == ".md" and any(parts[n : n + 2] == SPECSTORY_HISTORY for n in range(len(parts) - 2))


def _specstory_files(folder: Path) -> list[Path]:
    """The SpecStory history files in ``folder`` (a project, a folder of projects, ``.specstory`` or its
    ``history`` itself)."""
    if folder.name == SPECSTORY_HISTORY[1] and folder.parent.name == SPECSTORY_HISTORY[0]:
        return list(folder.rglob("*.md"))
    homes = [folder] if folder.name == SPECSTORY_HISTORY[0] else list(folder.rglob(SPECSTORY_HISTORY[0]))
    return [p for home in homes if home.is_dir() for p in (home / SPECSTORY_HISTORY[1]).rglob("*.md")]


def cursor_key(path: Path) -> str:
    return CURSOR_PREFIX + str(path.resolve())


def load_cursor(store: SessionStore, session_id: str | None, path: Path) -> Cursor | None:
    if session_id is None:
        return None
    session = store.get_session(session_id)
    raw = session.metadata.get(cursor_key(path)) if session else None
    try:
        return Cursor.from_json(json.loads(raw)) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return None


def store_sessions(
    store: SessionStore,
    sessions: Iterable[ImportedSession],
    audience: str | None = None,
    workspace: str | None = None,
    *,
    own_only: bool = False,
) -> int:
    """Write imported sessions into ``store`` (idempotent). Returns the number of new nodes.

    A session created here belongs to ``audience`` (None: shared) and is written into ``workspace`` (None:
    ``default``); one already stored keeps its own. ``own_only``: one already stored for another audience
    is refused (FORBIDDEN) before anything is written.
    """
    sessions = list(sessions)
    if own_only:
        for session in sessions:
            known = store.get_session(session.id)
            if known is not None and audience_of(known) != audience:
                raise Forbidden(f"session {session.id} belongs to another requester")
    added = 0
    for session in sessions:
        metadata: dict[str, Any] = {"provider": session.provider, **session.metadata}
        known = store.get_session(session.id)
        if known is None or FORGOTTEN_KEY not in known.metadata:  # a forgotten session's title is gone for good
            metadata.update(_title(session, known))
        if isinstance(metadata.get("cwd"), str) and (known is None or PROJECT_KEY not in known.metadata):
            metadata[PROJECT_KEY] = place_of(metadata["cwd"], metadata.get(REMOTE_KEY)).project
        if known is None:
            if audience:
                metadata[AUDIENCE_KEY] = audience
            if workspace:
                metadata[WORKSPACE_KEY] = workspace
        first = min((node.created_at for node in session.nodes), default=EPOCH)
        store.create_session(session.id, metadata, created_at=first)
        added += store.add_nodes(session.nodes)
        if session.head is not None:
            current = store.get_session(session.id)
            if current is None or current.head != session.head:
                store.set_head(session.id, session.head, updated_at=session.updated_at)
    return added


def _title(session: ImportedSession, known: Session | None) -> dict[str, str]:
    """The title metadata an import sets: the runtime's own title, else (once) one taken from the session's
    first user message (:func:`scriptorium.titles.derived_title`), with the message it came from."""
    if session.title:
        derived_before = known is not None and known.metadata.get(TITLE_FROM_KEY)
        return {"title": session.title, **({TITLE_FROM_KEY: ""} if derived_before else {})}
    if known is not None and (TITLE_FROM_KEY in known.metadata or known.metadata.get("title") or known.head):
        return {}  # titled, or stored before titles were derived: a later message is not its first
    for node in session.nodes:
        if node.kind is NodeKind.USER and (title := derived_title(node.content, session.id)):
            return {"title": title, TITLE_FROM_KEY: node.id}
    return {}


def save_cursor(store: SessionStore, session_id: str, path: Path, cursor: Cursor) -> None:
    """Record where the import of ``path`` stopped (after its nodes are stored).

    Kept as a JSON string, so that the store's metadata merge replaces it whole.
    """
    store.create_session(session_id, {cursor_key(path): json.dumps(cursor.to_json(), sort_keys=True)})


ALIASES_KEPT = 512
"""Left-out entries remembered across imports (a new entry's parent is almost always a recent one)."""


def resolve_parents(
    entries: list[tuple[str, str | None, bool]], aliases: dict[str, str | None]
) -> dict[str, str | None]:
    """The parent node of each kept entry, re-parented through the entries that are left out.

    ``entries`` are (id, parent id, kept) in file order. A left-out entry's nearest kept
    ancestor is recorded in ``aliases`` (updated in place, newest last), so that an entry of a
    later import whose parent was left out finds its node. A parent found neither in this
    increment nor in ``aliases`` is a node an earlier import stored.
    """
    parent_of = {entry_id: parent for entry_id, parent, _kept in entries}
    kept = {entry_id for entry_id, _parent, keep in entries if keep}

    def ancestor(parent: str | None) -> str | None:
        seen: set[str] = set()
        while parent is not None and parent not in kept:
            if parent in seen:
                return None
            seen.add(parent)
            if parent in parent_of:
                parent = parent_of[parent]
            elif parent in aliases:
                return aliases[parent]
            else:
                return parent
        return parent

    for entry_id, parent, keep in entries:
        if not keep:
            aliases.pop(entry_id, None)
            aliases[entry_id] = ancestor(parent)
    while len(aliases) > ALIASES_KEPT:
        del aliases[next(iter(aliases))]
    return {entry_id: ancestor(parent) for entry_id, parent, keep in entries if keep}
