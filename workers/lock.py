"""The per-workspace Redis lock with a watchdog and a fencing token.

* acquire within one second or report LOCK_HELD (retryable);
* the lock has a TTL; a watchdog thread extends it during long passes (the
  redis-py lock object is created with ``thread_local=False`` so that thread
  can extend it);
* every acquire increments a per-workspace counter: the fencing token. At
  install time, under the workspace's kernel file lock, the token is checked
  against the highest token the workspace has recorded and against Redis'
  current counter, then recorded. A worker whose lock expired mid-pass (paused,
  partitioned) therefore never installs over a newer holder.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis
import structlog
from redis.exceptions import LockError, RedisError

from scriptorium.defaults import DEFAULT_LOCK_TIMEOUT_S
from scriptorium.errors import LockHeld, LockLost, RedisUnavailable
from scriptorium.fsutil import atomic_write
from scriptorium.workspace import MemoryWorkspace, PreInstall
from scriptorium.workspace.workspace import PreInstallHook

log = structlog.get_logger(__name__)
FENCE_FILE = "fence"


class _Watchdog(threading.Thread):
    def __init__(self, lock: redis.lock.Lock, ttl: float) -> None:
        super().__init__(daemon=True, name="scriptorium-lock-watchdog")
        self.lock = lock
        self.ttl = ttl
        self.stopped = threading.Event()
        self.lost = False

    def run(self) -> None:
        while not self.stopped.wait(self.ttl / 3):
            try:
                self.lock.extend(self.ttl, replace_ttl=True)
            except (LockError, RedisError) as exc:
                self.lost = True
                log.warning("lock.extend_failed", error=str(exc))
                return


class FenceCheck:
    """The pre-install hook of one lease: refuse to install unless this lease is the newest."""

    def __init__(self, client: redis.Redis, fence_key: str, token: int, runtime: Path, watchdog: _Watchdog) -> None:
        self.client = client
        self.fence_key = fence_key
        self.token = token
        self.path = runtime / FENCE_FILE
        self.watchdog = watchdog

    def __call__(self, info: PreInstall) -> None:
        recorded = int(self.path.read_text()) if self.path.exists() else 0
        if recorded > self.token:
            raise LockLost(f"fencing token {self.token} is older than the installed {recorded}")
        try:
            current = int(self.client.get(self.fence_key) or 0)
        except RedisError as exc:
            raise RedisUnavailable(f"cannot check the fencing token: {exc}") from exc
        if current != self.token or self.watchdog.lost:
            raise LockLost(f"the workspace lock moved on (token {self.token}, newest {current})")
        atomic_write(self.path, str(self.token).encode())


class RedisPassLock:
    """A pass lock for one workspace, shared by every worker through Redis."""

    def __init__(
        self,
        client: redis.Redis,
        workspace: MemoryWorkspace,
        name: str,
        prefix: str,
        ttl_s: float,
        acquire_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        self.client = client
        self.workspace = workspace
        self.lock_key = f"{prefix}lock:{name}"
        self.fence_key = f"{prefix}fence:{name}"
        self.ttl = ttl_s
        self.acquire_timeout = acquire_timeout_s

    @contextmanager
    def hold(self) -> Iterator[PreInstallHook | None]:
        lock = self.client.lock(
            self.lock_key, timeout=self.ttl, blocking=True, blocking_timeout=self.acquire_timeout, thread_local=False
        )
        try:
            acquired = lock.acquire()
            token = int(self.client.incr(self.fence_key)) if acquired else 0
        except RedisError as exc:
            raise RedisUnavailable(f"cannot reach Redis for the workspace lock: {exc}") from exc
        if not acquired:
            raise LockHeld(f"another worker holds {self.lock_key}; not acquired within {self.acquire_timeout:g} s")
        watchdog = _Watchdog(lock, self.ttl)
        watchdog.start()
        try:
            yield FenceCheck(self.client, self.fence_key, token, self.workspace.root / ".scriptorium", watchdog)
        finally:
            watchdog.stopped.set()
            try:
                lock.release()
            except (LockError, RedisError) as exc:  # expired or Redis gone: the TTL frees it anyway
                log.info("lock.release_failed", error=str(exc))
