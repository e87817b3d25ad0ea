"""A worker app that counts its staging sweeps: ``celery -A tests.cluster.counting_sweeps worker``.

It serves the project's own app (``scriptorium.workers.app``) with one change made from outside production
code: every sweep of orphaned staging folders — the periodic one, the sweep task's, and the one each
workspace open does in a new pool child — appends how many folders it removed to the file named by
``SCRIPTORIUM_TEST_SWEEP_COUNTS`` (one line per sweep; O_APPEND writes of a line never interleave). A test
reads what the sweeps did there instead of from the workers' log text, which only the periodic sweep writes.
"""

from __future__ import annotations

import os
from pathlib import Path

import scriptorium.workers.handling as handling
import scriptorium.workspace.workspace as workspace
from scriptorium.workers.app import app
from scriptorium.workspace.staging import StagingSweep, sweep_orphans

__all__ = ["app"]


def _counted(tmpdir: Path | None = None) -> StagingSweep:
    found = sweep_orphans(tmpdir)
    fd = os.open(os.environ["SCRIPTORIUM_TEST_SWEEP_COUNTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{found.removed}\n".encode())
    finally:
        os.close(fd)
    return found


handling.sweep_orphans = _counted  # type: ignore[attr-defined]
workspace.sweep_orphans = _counted  # type: ignore[attr-defined]
