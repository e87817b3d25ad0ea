"""The one atomic-write helper and the fsync calls around it."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    """libc's ``syncfs``, loaded on the first sync (finding libc may run ``ldconfig``: no import pays for it);
    None where there is none (not Linux: one fsync per file instead)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        syncfs: Callable[[int], int] = libc.syncfs
    except (OSError, AttributeError):
        return None
    return syncfs


def sync_filesystem(anchor: Path, files: Iterable[Path], missing_ok: bool = False) -> None:
    """Make ``files`` (and their new directory entries) durable with one barrier.

    On Linux one ``syncfs`` of the filesystem holding ``anchor`` replaces an fsync
    per file and per folder (a transaction writes a dozen git objects); elsewhere
    each file and folder is fsynced (``missing_ok``: a file or folder removed
    meanwhile is skipped).
    """
    if (syncfs := _syncfs()) is not None:
        fd = os.open(anchor, os.O_RDONLY)
        try:
            if syncfs(fd) == 0:
                return
        finally:
            os.close(fd)
    folders: set[Path] = set()
    for path in files:
        try:
            handle = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            if not missing_ok:
                raise
            continue
        try:
            os.fsync(handle)
        finally:
            os.close(handle)
        folders.add(path.parent)
    for folder in folders:
        try:
            fsync_dir(folder)
        except FileNotFoundError:
            if not missing_ok:
                raise


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (creates, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_synced(path: Path, data: bytes, mode: int = 0o600, sync: bool = True) -> None:
    """Create ``path`` (which must not exist) with ``data`` and fsync it (``sync=False``: the caller makes
    many files durable at once, with :func:`sync_filesystem`)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old or the new bytes.

    Unique temp file in the target directory, fsync, ``os.replace``, fsync the
    directory.
    """
    import tempfile  # here: modules that import this one are on the command line's --help path

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts): the owner test of claim files."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_alive(name: str) -> bool:
    """Whether the process a claim file's name starts with (``<pid>-…`` or ``<pid>.…``) still runs; a name
    without one is nobody's."""
    digits = re.match(r"\d+", name)
    return digits is not None and process_alive(int(digits.group()))
