"""Import aider chat histories (``<project>/.aider.chat.history.md``) into a session store.

aider appends every chat to one markdown file in the root of the project's git repository (``--chat-history-file``,
default ``<git root>/.aider.chat.history.md``: ``aider/args.py`` lines 274-288 at 5dc9490b of
github.com/Aider-AI/aider, Apache-2.0). Everything in it is written by ``InputOutput.append_chat_history``
(``aider/io.py`` 1117-1136: appended, a ``> `` in front of a tool line, two trailing spaces for a line break):

* ``# aider chat started at %Y-%m-%d %H:%M:%S`` (local time, no zone) each time aider starts (io.py 335-336);
* the user's input as ``#### `` lines, one per line of it (``user_input``, io.py 775-789), written once the
  input is complete — slash commands (``/add``, ``/run``, ``/ask …``) and aider's own reflected prompts
  (``# Fix any errors below, if possible.``, ``aider/linter.py`` 111) among them;
* the assistant's reply, whole, once it has streamed (``ai_output``, io.py 793-795, called from
  ``aider/coders/base_coder.py`` 1829): a blank line, the reply, a blank line;
* tool output, warnings, errors and confirmations as ``> `` lines (``tool_output`` / ``_tool_message`` /
  ``confirm_ask``, io.py 900-999); a multi-line ``tool_output`` prefixes only its first line.

aider reads the file back the same way (``split_chat_history_markdown``, ``aider/utils.py`` 148-193). What
each block becomes here:

* each ``# aider chat started at`` line starts a session: ``aider-`` and a hash of the project folder's name
  and the header's time (and, for a header with the same time as the one before, how many did); its time
  is the header's (aider writes no zone: read as UTC), its project (``cwd``) the file's folder;
* consecutive ``#### `` lines → USER; a slash command, ``<blank>`` and a reflected prompt → SYSTEM (a
  command carrying a message, ``/ask …``, is followed by the message as an input of its own:
  ``Coder.run(with_message)``, ``aider/coders/base_coder.py`` 876-880);
* ``> `` lines (and the unprefixed lines right below one, or anything before the session's first user turn)
  → TOOL_RESULT, kept as written (never written to memory);
* any other text → ASSISTANT; a ``#### `` or ``> `` line is the reply's own (a heading, a quote) unless it
  ends with the two spaces aider puts after each input and tool line (io.py 1122-1125).

The file is only appended to, so it is read incrementally (:mod:`scriptorium.producers.importing`): node
IDs are where a block starts, in lines from its session's header (``l<n>``), and the cursor's state
carries the session being read (the cursor itself is kept on the file's first session). A history its
owner trimmed of old chats is read again from its start and adds nothing it had: neither session nor node
IDs depend on what came before the session. A block that goes on past the end of one
import (a tool output still being written) goes on in a node of its own.

Only USER and ASSISTANT nodes are ever written into memory.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scriptorium.producers.importing import EPOCH, ImportedSession, Increment, read_increment
from scriptorium.redaction import Redactor
from scriptorium.sessions import Node, NodeKind, SessionStore

FORMAT = "aider"
PROVIDER = "aider"
FILE_NAME = ".aider.chat.history.md"
_HEADER = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
REFLECTED = ("# Fix any errors below",)
"""Prompts aider writes as the user's after a lint or test run."""


def recognizes(number: int, entry: Mapping[str, Any]) -> bool:
    """Never a JSON line: aider histories are markdown (:func:`recognizes_head`)."""
    return False


def recognizes_head(path: Path, head: list[str]) -> bool:
    """An aider chat history: one of its first lines is a ``# aider chat started at`` header."""
    return any(_HEADER.match(line.rstrip("\r\n")) for line in head)


def project_of(path: Path) -> Path:
    """The project a history belongs to: the folder holding the file (aider writes it in the git root)."""
    return path.resolve().parent


def _session_id(path: Path, started: str, repeat: int) -> str:
    """A session's ID: the project folder's name, the header's time and how many headers just before it had
    that same time (not its line: a history trimmed of its old chats keeps the later ones' IDs)."""
    key = f"{project_of(path).name}\n{started}\n{repeat}"
    return "aider-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _clean(redactor: Redactor | None, line: str) -> str:
    return redactor.text(line) if redactor is not None and redactor.may_hold(line) else line


def _user(text: str) -> tuple[NodeKind, str, dict[str, Any]]:
    """What one user input is: a message, or a command, an empty input, a reflected prompt (SYSTEM)."""
    stripped = text.strip()
    if stripped.startswith("/"):
        return NodeKind.SYSTEM, stripped, {"aider_command": stripped.split()[0]}
    if stripped.startswith(REFLECTED):
        return NodeKind.SYSTEM, stripped, {"aider_reflected": True}
    if stripped in ("", "<blank>"):
        return NodeKind.SYSTEM, stripped, {}
    return NodeKind.USER, stripped, {}


class _Reader:
    """Turns history lines into sessions, carrying its state between increments."""

    def __init__(self, path: Path, state: dict[str, Any]) -> None:
        self.path = path
        self.first: str | None = state.get("session")
        self.current: str | None = state.get("current")
        self.header = int(state.get("header") or 0)
        """The line the current session's header is on (node IDs count from it)."""
        self.started: str | None = state.get("started")
        self.repeat = int(state.get("repeat") or 0)
        self.time = _time(state.get("time"))
        self.last: str | None = state.get("last")
        self.seen_user = bool(state.get("seen_user"))
        self.marked = bool(state.get("marked"))
        self.block: str | None = None  # a block never goes on across increments: a new node starts
        self.blank = False
        self.lines: list[str] = []
        self.start = 0
        self.sessions: dict[str, ImportedSession] = {}
        self.before_header = 0

    def state(self) -> dict[str, Any]:
        if self.first is None:
            return {}
        return {
            "session": self.first,
            "current": self.current,
            "header": self.header,
            "started": self.started,
            "repeat": self.repeat,
            "time": self.time.isoformat(),
            "last": self.last,
            "seen_user": self.seen_user,
            "marked": self.marked,
        }

    def session(self) -> ImportedSession:
        assert self.current is not None
        found = self.sessions.get(self.current)
        if found is None:
            found = self.sessions[self.current] = ImportedSession(self.current, None, PROVIDER)
            found.metadata["cwd"] = str(project_of(self.path))
            found.updated_at = self.time
        return found

    def line(self, number: int, text: str) -> None:
        if (header := _HEADER.match(text)) is not None:
            self.close()
            self.repeat = self.repeat + 1 if header.group(1) == self.started else 0
            self.started, self.header = header.group(1), number
            self.current = _session_id(self.path, self.started, self.repeat)
            self.first = self.first or self.current
            self.time = datetime.fromisoformat(header.group(1).replace(" ", "T")).replace(tzinfo=UTC)
            self.last, self.seen_user, self.blank = None, False, False
            self.session().metadata["aider_started"] = header.group(1)
            return
        if self.current is None:
            self.before_header += 1
            return
        # aider ends every input and tool line it writes with two spaces (a markdown line break); a reply's own
        # "#### " heading or "> " quote has none, and stays in the reply (in a file whose lines lost their
        # trailing spaces, an editor's doing, the prefix alone tells).
        prefixed = text.startswith(("#### ", "> ")) or text.rstrip() in ("####", ">")
        self.marked = self.marked or (prefixed and text.endswith("  "))
        own = text.endswith("  ") or not self.marked
        if own and (text.startswith("#### ") or text.rstrip() == "####"):
            self.open("user", number, joined=self.block == "user" and not self.blank)
            self.lines.append(text[5:].rstrip())
            self.seen_user = True
        elif own and (text.startswith("> ") or text.rstrip() == ">"):
            self.open("tool", number, joined=self.block == "tool" and not self.blank)
            self.lines.append(text[2:].rstrip())
        elif not text.strip():
            if self.block is not None:
                self.lines.append("")
            self.blank = True
            return
        elif self.block == "assistant" or (self.block == "tool" and (not self.blank or not self.seen_user)):
            self.lines.append(text.rstrip())  # the reply goes on, or an output printed as several lines
        else:
            self.open("tool" if not self.seen_user else "assistant", number, joined=False)
            self.lines.append(text.rstrip())
        self.blank = False

    def open(self, block: str, number: int, *, joined: bool) -> None:
        if joined:
            return
        self.close()
        self.block, self.start, self.lines = block, number, []

    def close(self) -> None:
        """Make the open block a node."""
        if self.block is None or self.current is None:
            self.block, self.lines = None, []
            return
        text = "\n".join(self.lines).strip("\n")
        meta: dict[str, Any] = {}
        if self.block == "user":
            kind, text, meta = _user(text)
            role = "user"
        elif self.block == "tool":
            kind, role = NodeKind.TOOL_RESULT, "user"
        else:
            kind, role, text = NodeKind.ASSISTANT, "assistant", text.strip()
        node_id = f"l{self.start - self.header}"
        session = self.session()
        session.nodes.append(Node(node_id, session.id, self.last, role, kind, text, self.time, meta))
        session.head, self.last = node_id, node_id
        self.block, self.lines = None, []


def _time(value: object) -> datetime:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return EPOCH
    return EPOCH


def read(increment: Increment, store: SessionStore | None) -> tuple[list[ImportedSession], dict[str, Any]]:
    """:func:`parse_increment` (nothing is looked up in ``store``)."""
    return parse_increment(increment)


def parse_increment(increment: Increment) -> tuple[list[ImportedSession], dict[str, Any]]:
    """The sessions in the lines a history gained (the one going on first), and the state to continue from."""
    path = increment.path if increment.path is not None else Path(FILE_NAME)
    reader = _Reader(path, dict(increment.start_state))
    for number, raw in increment.lines:
        reader.line(number, _clean(increment.redactor, raw.decode("utf-8", errors="replace")))
    reader.close()
    sessions = [session for session in reader.sessions.values() if session.nodes]  # a header alone: no session
    if sessions and reader.before_header:
        sessions[0].skipped["before_header"] += reader.before_header
    return sessions, reader.state()


def parse_file(path: Path, redactor: Redactor | None = None) -> list[ImportedSession]:
    """Every session of a whole history file (its secrets replaced when ``redactor`` is given)."""
    return parse_increment(replace(read_increment(path, None), redactor=redactor))[0]
