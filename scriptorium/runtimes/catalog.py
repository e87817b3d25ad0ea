"""The runtimes Scriptorium reaches: adding one is a module beside this one, listed here, and its importer."""

from __future__ import annotations

import os
from pathlib import Path

from scriptorium.errors import InvalidArgument
from scriptorium.runtimes import claude_code, codex, openclaw, pi
from scriptorium.runtimes.base import Runtime

RUNTIMES: tuple[Runtime, ...] = (claude_code.RUNTIME, codex.RUNTIME, pi.RUNTIME, openclaw.RUNTIME)


def runtime(name: str) -> Runtime:
    """The runtime called ``name``; ``InvalidArgument`` for one not listed."""
    for known in RUNTIMES:
        if known.name == name:
            return known
    raise InvalidArgument(f"unknown runtime {name!r}; expected one of {', '.join(r.name for r in RUNTIMES)}")


def wired() -> list[str]:
    """The runtimes whose settings files ``scriptorium setup`` can wire."""
    return [r.name for r in RUNTIMES if r.settings_files is not None]


def transcript_folders() -> list[Path]:
    """Where the runtimes keep their transcripts (``$CLAUDE_CONFIG_DIR``, ``$CODEX_HOME`` honoured)."""
    return [r.transcripts() for r in RUNTIMES]


def transcript_roots(configured: str = "") -> list[Path]:
    """Where ``POST /api/hooks`` may read transcripts from: the ``os.pathsep``-separated folders
    configured (``SCRIPTORIUM_HOOK_TRANSCRIPT_ROOTS``), else the runtimes' own."""
    if configured:
        return [Path(p) for p in configured.split(os.pathsep) if p]
    return transcript_folders()
