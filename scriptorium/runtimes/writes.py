"""Writing hooks off the runtime's critical path, in a resident process (the hook daemon, ``scriptorium serve``).

``Stop``, ``SubagentStop``, ``PreCompact`` and ``SessionEnd`` import the transcript and run a write pass: up
to seconds. A resident process answers them at once and runs them here, one at a time in the order they
came, each inside :func:`scriptorium.runtimes.hooks.writing_turn` (so the hook daemon, ``serve`` and
detached processes of the same state folder never write at once). A payload whose turn lock cannot be
taken is left to the session watcher, which imports what grew and writes what went idle.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path

import structlog

from scriptorium.runtimes.hooks import writing_turn

log = structlog.get_logger(__name__)


class WriteQueue:
    """One thread running queued writing payloads in turn for the state folder ``state``."""

    def __init__(self, state: Path, name: str = "hook-writes") -> None:
        self.state = state
        self._jobs: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self._running = threading.Lock()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def put(self, job: Callable[[], object]) -> None:
        """Run ``job`` after those queued before it (``job`` never raises: ``run_hook`` catches its own)."""
        self._jobs.put(job)

    def idle(self) -> bool:
        """Nothing queued nor running: a resident process may end."""
        if self._jobs.unfinished_tasks or not self._running.acquire(blocking=False):
            return False
        self._running.release()
        return True

    def close(self, timeout: float = 30.0) -> None:
        """Finish what is queued (up to ``timeout`` seconds), then stop the thread."""
        self._jobs.put(None)
        self._thread.join(timeout)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                with self._running, writing_turn(self.state):
                    job()
            except OSError as exc:  # the turn's lock could not be taken: the watcher writes this session later
                log.warning("hook.write_not_run", error=str(exc))
            finally:
                self._jobs.task_done()
