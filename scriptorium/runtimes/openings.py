"""Which prompt opens a session's context, where no SessionStart hook gives the core: that prompt carries
it, before its recall.

Two routes have no SessionStart hook: ``setup claude-code --server`` (Claude Code runs no HTTP hook for it)
and the stdio setup of Claude Code, whose SessionStart runs only for a compaction (a command starts a
process on every session's critical path; every later hook goes through the MCP server). Their prompts
ask for the core with ``core=first-prompt`` (a query parameter, or an argument of the ``hook`` tool).

A session opens at its first prompt, unless the session store already holds its turns (resumed, or begun
before this state folder kept marks), and again at the first prompt after a ``PreCompact`` on a route
that has no SessionStart for compactions either. Whoever answers — the hook daemon, the MCP server with
no daemon up, ``scriptorium serve`` — reads and writes the same marks, one file per session under
``<state>/hook-openings/`` (named by the session ID's hash): empty once opened, ``compacted`` while its
next prompt must open it again. Each decision reads and writes a mark under an exclusive ``flock`` of the
folder's lock file, so two processes (or two of the daemon's threads) answering prompts of one session open
it once between them, after a compaction too. The session watcher's sweep removes marks untouched for
:data:`MARK_DAYS`; a session older than that that comes back is asked of the store.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

FIRST_PROMPT = "first-prompt"
"""``core=first-prompt``: the hooks of a route with no SessionStart hook, whose opening prompt carries the
core."""
FOLDER = "hook-openings"
COMPACTED = b"compacted"
LOCK = ".lock"
MARK_DAYS = 30
"""Marks untouched this long are removed by the sweep (the store answers for such a session)."""


class Openings:
    """The opening marks of one state folder's sessions."""

    def __init__(self, state: Path) -> None:
        self.folder = state / FOLDER

    def _mark(self, session: str) -> Path:
        import hashlib  # here: the runtime catalogue (every `scriptorium … --help`) imports this module

        return self.folder / hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        descriptor = os.open(self.folder / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)  # releases the lock

    def _write(self, session: str, content: bytes) -> None:
        mark = self._mark(session)
        scratch = mark.with_name(f"{mark.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        scratch.write_bytes(content)
        os.replace(scratch, mark)

    def compacted(self, session: str) -> None:
        """``session``'s context was compacted: its next prompt opens it again."""
        with self._locked():
            self._write(session, COMPACTED)

    def opened(self, session: str) -> None:
        """``session``'s context was opened some other way (a SessionStart answer)."""
        with self._locked():
            self._write(session, b"")

    def opens(self, session: str, stored: Callable[[str], bool]) -> bool:
        """Whether this prompt of ``session`` opens it (``stored``: the store holds turns of a session)."""
        with self._locked():
            try:
                if self._mark(session).read_bytes() != COMPACTED:
                    return False  # opened already, by this process or another
            except FileNotFoundError:
                self._write(session, b"")
                return not stored(session)
            self._write(session, b"")
            return True

    def prune(self, now: float | None = None) -> int:
        """Remove the marks untouched for :data:`MARK_DAYS`; how many went."""
        cutoff = (time.time() if now is None else now) - MARK_DAYS * 86400
        removed = 0
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.folder):
                with contextlib.suppress(FileNotFoundError):
                    if entry.name != LOCK and entry.stat().st_mtime < cutoff:  # the lock file stays: see _locked
                        os.unlink(entry.path)
                        removed += 1
        return removed
