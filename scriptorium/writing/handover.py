"""The lock a write pass holds, and the writes others hand to its holder instead of waiting.

A write that finds the lock held leaves its event with the holder (the cluster's Redis lock,
:class:`scriptorium.workers.lock.RedisPassLock`); the holder runs what waits before it releases, so a slow
pass never makes the waiters wait for the sweep (a write waits one second for the lock, then gives up).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, runtime_checkable

from scriptorium.logs import get_logger
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.workspace import PreInstallHook

log = get_logger(__name__)


class PassLock(Protocol):
    """The lock a whole pass holds. ``hold`` raises LockHeld when it is not acquired in time.

    It may yield a trusted pre-install hook (the cluster's fencing check) that
    every transaction of the pass runs before it installs.
    """

    def hold(self) -> AbstractContextManager[PreInstallHook | None]: ...


@runtime_checkable
class HandoverLock(Protocol):
    """A pass lock that others may leave work with while it is held (the cluster's Redis lock)."""

    def take_handovers(self) -> list[tuple[str, str]]:
        """(field, payload) pairs waiting for this holder; [] once nothing waits — the lock is then released."""
        ...

    def handover_done(self, field: str, payload: str) -> None: ...


class WorkspaceFileLock:
    """The embedded default: the workspace's kernel file lock, one-second budget."""

    def __init__(self, workspace: MemoryWorkspace) -> None:
        self.workspace = workspace

    @contextmanager
    def hold(self) -> Iterator[PreInstallHook | None]:
        with self.workspace.lock():
            yield None


def serve_handovers(lock: PassLock, run: Callable[[str], None] | None) -> None:
    """Before the lock goes: ``run`` each event waiting writes handed over, until nothing waits (a lock
    that takes no hand-overs, or no ``run``: nothing to do)."""
    if run is None or not isinstance(lock, HandoverLock):
        return
    while waiting := lock.take_handovers():
        for field, payload in waiting:
            try:
                run(payload)
            except Exception:  # one bad hand-over must not stop the others or the release
                log.exception("write.handover_failed", field=field)
            finally:
                lock.handover_done(field, payload)
