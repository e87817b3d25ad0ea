"""The writer history: one JSON line per write pass under the workspace's runtime folder
(``.scriptorium/history.jsonl``), read by ``scriptorium memory status``, the Memory page and the tools.

It sits with the workspace, below the layers that use it: the write pass appends to it, and forget and
redaction (``scriptorium.changes``, beside the write pass, not above it) scrub it as they scrub every other
file the workspace keeps.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write

HISTORY_FILE = "history.jsonl"
HISTORY_VERSION = 1
"""The layout of a writer-history line (each line says its own: lines of two releases may share the file)."""
HISTORY_KEEP = 2000
"""History lines kept when the file is compacted (it is compacted at twice this size)."""


class WriterHistory:
    """Append-only JSON lines, one per pass, readable by ``scriptorium memory status``."""

    def __init__(self, runtime_dir: Path) -> None:
        self.path = runtime_dir / HISTORY_FILE

    def append(self, entry: Mapping[str, Any]) -> None:
        line = (json.dumps(versioned(dict(entry), HISTORY_VERSION), sort_keys=True) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if self.path.stat().st_size > HISTORY_KEEP * 2 * 400:
            self._compact()

    def _compact(self) -> None:
        lines = self.path.read_bytes().splitlines(keepends=True)
        if len(lines) > HISTORY_KEEP * 2:
            atomic_write(self.path, b"".join(lines[-HISTORY_KEEP:]))

    def redact(self, replacements: Mapping[str, str]) -> int:
        """Replace every occurrence of each text of ``replacements`` (longest first) by its replacement inside
        the entries' strings; returns how many entries changed. The file is rewritten atomically (a forget or a
        redaction: no excerpt of the text stays)."""
        if not replacements:
            return 0
        needles = sorted(replacements, key=len, reverse=True)
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return 0
        changed = 0
        out = []
        for line in lines:
            scrubbed = line
            for needle in needles:
                encoded = json.dumps(needle)[1:-1]  # as the text appears inside a JSON string
                scrubbed = scrubbed.replace(encoded, json.dumps(replacements[needle])[1:-1])
            changed += scrubbed != line
            out.append(scrubbed)
        if changed:
            atomic_write(self.path, ("\n".join(out) + "\n").encode("utf-8"))
        return changed

    def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        out: list[dict[str, Any]] = []
        for line in lines[-limit:]:
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line after a crash: skip it
            out.append(read_versioned(parsed, HISTORY_VERSION, str(self.path)))
        return out
