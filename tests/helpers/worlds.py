"""Worlds built once per session and copied per test: building one costs git commits, copying a folder."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

_built: dict[str, Path] = {}


def _copy(name: str, build: Callable[[Path], None], folder: Callable[[], Path], into: Path) -> Path:
    if name not in _built:
        made = folder()
        build(made)
        _built[name] = made
    shutil.copytree(_built[name], into, symlinks=True)
    return into


def copied(name: str, build: Callable[[Path], None], factory: pytest.TempPathFactory, into: Path) -> Path:
    """A copy at ``into`` of the world ``build`` makes in a folder (built the first time ``name`` is asked for
    in this session, under ``factory``'s base)."""
    return _copy(name, build, lambda: factory.mktemp(f"world-{name}"), into)


def _process_folder(name: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"scriptorium-world-{name}-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def copied_to(name: str, build: Callable[[Path], None], into: Path) -> Path:
    """:func:`copied` for a caller with no pytest fixture at hand (a Hypothesis state machine makes its world
    in ``__init__``, once per example): the world is built the first time ``name`` is asked for in this
    process, in a temporary folder removed when the process exits."""
    return _copy(name, build, lambda: _process_folder(name), into)
