"""The forget epoch: how every long-running process learns that a forget landed and drops what it holds.

A server, an MCP server, a hook daemon and a worker keep parsed topics, rendered view entries, token
counts and the recall index in memory, copies of the text a forget removes. A forget (and a history
purge) writes a new epoch file (``.scriptorium/cache/forget-epoch``); each workspace handle compares it
on every snapshot (one ``stat``) and, when it moved, drops its own caches and the process-wide ones
(:func:`drop_process_caches`), so no process serves or keeps building on the forgotten text.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from scriptorium.fsutil import atomic_write
from scriptorium.workspace.paths import RUNTIME_DIR

FORGET_EPOCH = "forget-epoch"
Signature = tuple[int, int, int] | None

_clearers: list[Callable[[], None]] = []
_lock = threading.Lock()


def epoch_file(root: Path) -> Path:
    return Path(root) / RUNTIME_DIR / "cache" / FORGET_EPOCH


def bump(root: Path) -> None:
    """A forget landed in the workspace at ``root``: every process drops its caches (and this one now)."""
    from scriptorium.workspace import snapshot_cache

    path = epoch_file(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    snapshot_cache.remove(root)  # its topic paths can name what was forgotten
    atomic_write(path, uuid.uuid4().hex.encode())
    drop_process_caches()


def read(root: Path) -> str:
    try:
        return epoch_file(root).read_text()
    except FileNotFoundError:
        return ""


def signature(root: Path) -> Signature:
    """Cheap to compare: the epoch file's inode, size and change time (each bump writes a new file)."""
    try:
        st = os.stat(epoch_file(root))
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def on_forget(clear: Callable[[], None]) -> Callable[[], None]:
    """Register a process-wide cache to drop when a forget lands (a decorator)."""
    with _lock:
        _clearers.append(clear)
    return clear


def drop_process_caches() -> None:
    """Drop every process-wide cache that can hold a workspace's text."""
    from scriptorium.tokencount import count_tokens
    from scriptorium.workspace import topics, views

    topics.clear_memo()
    views.entry.cache_clear()
    count_tokens.cache_clear()
    with _lock:
        clearers = list(_clearers)
    for clear in clearers:
        clear()
