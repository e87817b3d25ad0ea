"""Which transcript files an import may read, and reading only those.

A local import (``scriptorium ingest``, the command hooks) reads the files it is given. An import for a
caller of the HTTP hook route reads only what :func:`confined` checked: files under the caller's folders,
reached without a symbolic link, regular, with a single link (a hard link can make any file the server may
read look as if it were under the folders). The check is by path, and the file is opened later — by then
it could be another. So the import runs :func:`pinned` to the files as checked and the caller's folders,
and every open of a transcript (:func:`open_transcript`) opens without following a link and compares the
open file with the one checked (device, inode, still one link, and the path the kernel opened): a file or
folder swapped in between is refused, FORBIDDEN. Another file a transcript names (a pi fork's parent
session file) is checked the same way when it is opened.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import BinaryIO

from scriptorium.errors import Forbidden

Pins = Mapping[str, tuple[int, int]]
"""A checked transcript's absolute path → its (device, inode)."""

_PINNED: ContextVar[tuple[Pins, tuple[Path, ...]] | None] = ContextVar("scriptorium_pinned", default=None)


def confined(paths: Sequence[Path], roots: Sequence[Path]) -> Pins:
    """Refuse (FORBIDDEN) a transcript a caller of the HTTP route may not make the server read; the files
    checked, to :func:`pinned` the import to (a path that does not exist is left out: nothing reads it)."""
    pins: dict[str, tuple[int, int]] = {}
    for path in paths:
        absolute = Path(os.path.abspath(path))
        if not any(absolute.is_relative_to(root) for root in roots):
            shown = ", ".join(map(str, roots)) or "none: this token imports no transcripts"
            raise Forbidden(f"transcript outside the runtimes' folders ({shown}): {path}")
        if os.path.realpath(absolute) != str(absolute):
            raise Forbidden(f"transcript reached through a symbolic link: {path}")
        try:
            info = absolute.lstat()
        except FileNotFoundError:
            continue  # a session that never wrote one (the import skips it)
        _check_regular(info, path)
        pins[str(absolute)] = (info.st_dev, info.st_ino)
    return pins


def _check_regular(info: os.stat_result, path: Path) -> None:
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        raise Forbidden(f"transcript is not a regular file with one link: {path}")


@contextmanager
def pinned(pins: Pins, roots: Sequence[Path]) -> Iterator[None]:
    """Within: :func:`open_transcript` opens only these files as they were checked, or another that
    :func:`confined` to ``roots`` accepts when it is opened."""
    token = _PINNED.set((dict(pins), tuple(roots)))
    try:
        yield
    finally:
        _PINNED.reset(token)


def confinement_active() -> bool:
    """Whether this import runs :func:`pinned` (for a caller of the HTTP hook route)."""
    return _PINNED.get() is not None


def open_transcript(path: Path) -> BinaryIO:
    """``path`` opened for reading; within :func:`pinned`, only the very file checked (FORBIDDEN else)."""
    confinement = _PINNED.get()
    if confinement is None:
        return path.open("rb")
    pins, roots = confinement
    absolute = os.path.abspath(path)
    expected = pins.get(absolute) or confined([path], roots).get(absolute)
    if expected is None:
        raise FileNotFoundError(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:  # ELOOP: the last component became a symbolic link
        raise Forbidden(f"transcript changed since it was checked: {path}") from exc
    try:
        info = os.fstat(fd)
        _check_regular(info, path)
        if (info.st_dev, info.st_ino) != expected or _opened(fd) not in (None, absolute):
            raise Forbidden(f"transcript changed since it was checked: {path}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _opened(fd: int) -> str | None:
    """The path the kernel opened ``fd`` at (None where /proc does not say)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
