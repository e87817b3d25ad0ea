"""The embedded workspace lock: a kernel file lock with a one-second budget.

``flock`` locks belong to an open file description, so the kernel releases
them when the holder dies (no stale lock after a crash), and two threads of
one process exclude each other too. Re-entrant within one thread, so a write
pass can hold the lock across the transactions it runs.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scriptorium.defaults import DEFAULT_LOCK_TIMEOUT_S
from scriptorium.errors import LockHeld


class FileLock:
    """A re-entrant (per thread) exclusive lock on a file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()

    @property
    def held(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    @contextmanager
    def hold(self, timeout: float = DEFAULT_LOCK_TIMEOUT_S) -> Iterator[None]:
        """Hold the lock; raise LockHeld if it is not acquired within ``timeout`` seconds."""
        if self.held:
            self._local.depth += 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + timeout
        delay = 0.002
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockHeld(
                            f"another writer holds the workspace lock ({self.path.name}); "
                            f"not acquired within {timeout:g} s"
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
            self._local.depth = 1
            try:
                yield
            finally:
                self._local.depth = 0
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
