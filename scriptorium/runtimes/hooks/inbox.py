"""The hook inbox: where a runtime's SessionEnd hook leaves its payload without starting Python.

A runtime runs SessionEnd as its process ends and waits for it: a Python process there costs every run
what its interpreter costs to start (about 20 ms), for an event that needs no answer. So the hook setup
writes for it is a shell command that only copies the payload into a file of its own under
``<state>/hook-inbox/`` (:func:`command`; ``cat``, the shell's one process). Whoever runs writes takes it
from there (:func:`drain`), in the order the files were written, as the command would have handed it on:

* the hook daemon, up for a quarter hour after the session's last hook, within :data:`POLL_S` (its write
  queue, after the session's own Stop);
* else the session watcher's sweep (the next ``SessionStart`` starts one; ``scriptorium serve`` runs it),
  before it looks for idle sessions: it hands each payload to a detached hook process, as the command
  hands a writing hook when no daemon is up.

A payload is taken once it reads as a whole JSON object (``cat`` may still be writing a file the drain
lists); one that still does not after :data:`STALE_S` is set aside as ``*.bad`` and logged, never read
again. Nothing here reads a transcript: the payload goes through the same hook code as the command's.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

from scriptorium.locations import make_private
from scriptorium.logs import get_logger

log = get_logger(__name__)

INBOX = "hook-inbox"
POLL_S = 0.5
"""How often the hook daemon looks in the inbox."""
STALE_S = 60.0
"""A file that is not yet a whole JSON object this long after it was written never will be."""
EVENTS = ("SessionEnd",)
"""The events setup hands through the inbox."""


def folder(state: Path) -> Path:
    return state / INBOX


def command(state: Path) -> str:
    """The hook command for an inbox event: the payload, as given, into a file named by the shell's PID
    (``exec``: ``cat`` takes the shell's place, so no other process holds that PID meanwhile). The leading
    no-op names the state the way every hook of ours does (:func:`~scriptorium.runtimes.base.is_our_hook`)."""
    resolved = state.resolve()
    target = shlex.quote(str(folder(resolved)) + "/end-") + '"$$".json'
    return f": scriptorium hook --state {shlex.quote(str(resolved))}; exec cat > {target}"


def prepare(state: Path) -> None:
    """The inbox folder, private like the state it is in (setup makes it; so does the hook daemon as it
    starts, should it be gone)."""
    make_private(state)
    folder(state).mkdir(mode=0o700, exist_ok=True)


def drain(state: Path, now: float | None = None) -> list[bytes]:
    """Take every whole payload waiting in ``state``'s inbox (oldest first), removing its file; another
    drainer running at the same time takes each file at most once between them (a rename claims it)."""
    inbox = folder(state)
    try:
        names = [n for n in os.listdir(inbox) if n.endswith(".json")]
    except FileNotFoundError:
        return []
    now = time.time() if now is None else now
    found: list[tuple[float, str, bytes]] = []
    for name in names:
        path = inbox / name
        try:
            info = path.stat()
            raw = path.read_bytes()
        except FileNotFoundError:
            continue  # another drainer took it
        if not _whole(raw):
            if now - info.st_mtime > STALE_S:
                _set_aside(path)
            continue
        claimed = inbox / f".{name}.{os.getpid()}"
        try:
            path.rename(claimed)
        except FileNotFoundError:
            continue
        claimed.unlink(missing_ok=True)
        found.append((info.st_mtime, name, raw))
    return [raw for _, _, raw in sorted(found)]


def _whole(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False


def _set_aside(path: Path) -> None:
    try:
        path.rename(path.with_suffix(".bad"))
    except OSError:
        return
    log.warning("hook.inbox_payload_unreadable", file=path.name)
