"""Worlds built once per session and copied per test: building one costs git commits, copying a folder."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

_built: dict[str, Path] = {}


def copied(name: str, build: Callable[[Path], None], factory: pytest.TempPathFactory, into: Path) -> Path:
    """A copy at ``into`` of the world ``build`` makes in a folder (built the first time ``name`` is asked for
    in this session, under ``factory``'s base)."""
    if name not in _built:
        folder = factory.mktemp(f"world-{name}")
        build(folder)
        _built[name] = folder
    shutil.copytree(_built[name], into, symlinks=True)
    return into
