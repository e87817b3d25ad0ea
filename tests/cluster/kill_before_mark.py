"""A worker app for one fault: the pool child dies by SIGKILL right after an install, before marking.

``celery -A tests.cluster.kill_before_mark worker`` serves the project's own app
(``scriptorium.workers.app``) with one change made from outside production code: while the
file named by ``SCRIPTORIUM_TEST_KILL_BEFORE_MARK`` exists, the first pass to
mark turns written removes the file and kills its own process instead. That is
the one window where a duplicate can arise; the redelivered task must find the
turns' sources in the installed tree and only mark them.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path

from scriptorium.sessions.postgres import PostgresSessionStore
from scriptorium.sessions.sqlite import SQLiteSessionStore
from scriptorium.workers.app import app

__all__ = ["app"]

FLAG = Path(os.environ["SCRIPTORIUM_TEST_KILL_BEFORE_MARK"])


def _dies_once(original: object) -> object:
    def mark_written(self: object, session_id: str, node_ids: Iterable[str], workspace_id: str, revision: str) -> None:
        try:
            FLAG.unlink()
        except FileNotFoundError:
            return original(self, session_id, node_ids, workspace_id, revision)  # type: ignore[operator,no-any-return]
        os.kill(os.getpid(), signal.SIGKILL)

    return mark_written


for _store in (SQLiteSessionStore, PostgresSessionStore):
    _store.mark_written = _dies_once(_store.mark_written)  # type: ignore[method-assign]
