"""pi: transcripts under ``~/.pi/agent/sessions``, reached by importing them (``scriptorium ingest``)."""

from __future__ import annotations

from pathlib import Path

from scriptorium.runtimes.base import Requirement, Runtime


def transcripts() -> Path:
    return Path.home() / ".pi" / "agent" / "sessions"


REQUIREMENT = Requirement(
    product="pi",
    command="pi",
    minimum=(0, 73, 0),
    needs="the first the extension setup installs is written for (its package.json's peerDependencies)",
    package="@mariozechner/pi-coding-agent",
)

RUNTIME = Runtime(name="pi", transcripts=transcripts, requirement=REQUIREMENT)
