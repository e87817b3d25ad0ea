"""pi: transcripts under ``~/.pi/agent/sessions``, reached by importing them (``scriptorium ingest``)."""

from __future__ import annotations

from pathlib import Path

from scriptorium.runtimes.base import Runtime


def transcripts() -> Path:
    return Path.home() / ".pi" / "agent" / "sessions"


RUNTIME = Runtime(name="pi", transcripts=transcripts)
