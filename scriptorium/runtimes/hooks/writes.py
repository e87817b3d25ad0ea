"""Writing hooks off the runtime's critical path, in a resident process (the hook daemon, ``scriptorium serve``).

``Stop``, ``SubagentStop``, ``PreCompact`` and ``SessionEnd`` import the transcript and run a write pass: up
to seconds. A resident process answers them at once and runs them here, one at a time in the order they
came, each inside :func:`scriptorium.runtimes.hooks.command.writing_turn` (so the hook daemon, ``serve`` and
detached processes of the same state folder never write at once). A payload whose turn lock cannot be
taken is left to the session watcher, which imports what grew and writes what went idle.

The queue waits for the runtimes to go quiet first: a write starts once no writing hook has come for
``SCRIPTORIUM_HOOK_WRITE_SETTLE_S`` (a ``claude -p`` posts ``Stop`` and ``SessionEnd`` and exits within
that), so its CPU never competes with the runtime finishing its turn on a small machine. A steady stream of
hooks still writes: no payload waits more than :data:`MAX_SETTLE_S`. Closing runs what is queued at once.

Once the queue has run what was queued (not after each write of a burst), ``after`` runs in the same thread:
the resident processes bring their recall index and its disk cache up to the writes there
(:meth:`~scriptorium.recall.index.RecallIndex.refresh_after_writes`), so the next prompt's search does not
(at a heavy user's year, about 200 ms of re-reading and saving off the prompt's path), and a resident process
killed after a write leaves a current cache to the next one.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path

from scriptorium.logs import get_logger
from scriptorium.runtimes.hooks.command import writing_turn

log = get_logger(__name__)

MAX_SETTLE_S = 30.0
"""The longest a queued write waits for the runtimes to go quiet (seconds from its arrival)."""


class WriteQueue:
    """One thread running queued writing payloads in turn for the state folder ``state``, each once
    ``settle_s`` seconds passed without a new one (module docs)."""

    def __init__(
        self,
        state: Path,
        name: str = "hook-writes",
        settle_s: float = 0.0,
        after: Callable[[], object] | None = None,
    ) -> None:
        self.state = state
        self.settle_s = settle_s
        self.after = after
        """Run once the queue has run what was queued (module docs); it never raises."""
        self._jobs: queue.Queue[tuple[float, Callable[[], object]] | None] = queue.Queue()
        self._running = threading.Lock()
        self._last_put = time.monotonic()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def put(self, job: Callable[[], object]) -> None:
        """Run ``job`` after those queued before it (``job`` never raises: ``run_hook`` catches its own)."""
        self._last_put = now = time.monotonic()
        self._jobs.put((now, job))

    def idle(self) -> bool:
        """Nothing queued nor running: a resident process may end."""
        if self._jobs.unfinished_tasks or not self._running.acquire(blocking=False):
            return False
        self._running.release()
        return True

    def close(self, timeout: float = 30.0) -> None:
        """Finish what is queued (up to ``timeout`` seconds, without waiting to settle), then stop the thread."""
        self._closing.set()
        self._jobs.put(None)
        self._thread.join(timeout)

    def _settle(self, arrived: float) -> None:
        """Wait until no payload came for ``settle_s`` (at most :data:`MAX_SETTLE_S` after ``arrived``)."""
        while not self._closing.is_set():
            due = min(self._last_put + self.settle_s, arrived + MAX_SETTLE_S)
            if (left := due - time.monotonic()) <= 0:
                return
            self._closing.wait(left)

    def _work(self) -> None:
        while True:
            item = self._jobs.get()
            try:
                if item is None:
                    return
                arrived, job = item
                self._settle(arrived)
                with self._running:
                    with writing_turn(self.state):
                        job()
                    if self.after is not None and self._jobs.empty():
                        self.after()
            except OSError as exc:  # the turn's lock could not be taken: the watcher writes this session later
                log.warning("hook.write_not_run", error=str(exc))
            finally:
                self._jobs.task_done()
