"""The per-workspace Redis lock with a watchdog and a fencing token.

* acquire within one second or report LOCK_HELD (retryable);
* the lock has a TTL; a watchdog thread extends it during long passes (the
  redis-py lock object is created with ``thread_local=False`` so that thread
  can extend it);
* every acquire increments a per-workspace counter: the fencing token. At
  install time, under the workspace's kernel file lock, the token is checked
  against the highest token the workspace has recorded and against Redis'
  current counter, then recorded. A worker whose lock expired mid-pass (paused,
  partitioned) therefore never installs over a newer holder. A counter Redis
  lost (a restart without its data) is moved past the recorded token at the
  next acquire, so the workspace stays writable;
* a write that finds the lock held is not a failure of its task: it *hands its
  event over* to the holder (a Redis hash beside the lock, written only while the
  lock exists). The holder runs what was handed over before it lets go, and lets
  go only when nothing is waiting — both checks are one Lua script each, so a
  hand-over is never left behind by a release. A holder can die with work handed
  to it: the waiter checks back one TTL later (a small task of its own, again
  while the lock is held) and takes its event back once the lock has expired;
  the sweep reclaims whatever is left as a last resort.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

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

# KEYS: fence. ARGV: the token the workspace recorded. A counter Redis lost (a restart without its data)
# starts over below what the workspace has seen: it moves past it, so a new holder can install again.
_ADVANCE = """
local current = tonumber(redis.call('get', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if current <= floor then
  redis.call('set', KEYS[1], floor + 1)
  return floor + 1
end
return current
"""
# KEYS: lock, handovers. ARGV: field, payload. Only while somebody holds the lock.
_HAND_OVER = """
if redis.call('exists', KEYS[1]) == 1 then
  redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
  return 1
end
return 0
"""
# KEYS: lock, handovers. ARGV: token. The holder's last look: what waits, else release (atomically).
_TAKE_OR_RELEASE = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return -1
end
local waiting = redis.call('hgetall', KEYS[2])
if #waiting > 0 then
  return waiting
end
redis.call('del', KEYS[1])
return 0
"""
# KEYS: handovers. ARGV: field, payload. Done with it (unless it was handed over again since).
_DONE = """
if redis.call('hget', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('hdel', KEYS[1], ARGV[1])
end
return 0
"""
# KEYS: lock, handovers. ARGV: field. The waiter's follow-up: 0 done, 1 still held, else the payload taken
# back (the holder died before running it and its lock expired).
_CHECK = """
if redis.call('hexists', KEYS[2], ARGV[1]) == 0 then
  return 0
end
if redis.call('exists', KEYS[1]) == 1 then
  return 1
end
local payload = redis.call('hget', KEYS[2], ARGV[1])
redis.call('hdel', KEYS[2], ARGV[1])
return payload
"""
# KEYS: lock, handovers. What a dead holder left: taken only once nobody holds the lock.
_RECLAIM = """
if redis.call('exists', KEYS[1]) == 1 then
  return {}
end
local waiting = redis.call('hgetall', KEYS[2])
redis.call('del', KEYS[2])
return waiting
"""


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


class Rooted(Protocol):
    """What the lock reads of a workspace: where its recorded fence lives (a workspace being moved in has
    only its folder yet)."""

    @property
    def root(self) -> Path: ...


class RedisPassLock:
    """A pass lock for one workspace, shared by every worker through Redis."""

    def __init__(
        self,
        client: redis.Redis,
        workspace: MemoryWorkspace | Rooted,
        name: str,
        prefix: str,
        ttl_s: float,
        acquire_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    ) -> None:
        self.client = client
        self.workspace = workspace
        self.lock_key = f"{prefix}lock:{name}"
        self.fence_key = f"{prefix}fence:{name}"
        self.handover_key = f"{prefix}handover:{name}"
        self.ttl = ttl_s
        self.acquire_timeout = acquire_timeout_s
        self._lease: redis.lock.Lock | None = None
        self._released = False

    @contextmanager
    def hold(self) -> Iterator[PreInstallHook | None]:
        lock = self.client.lock(
            self.lock_key, timeout=self.ttl, blocking=True, blocking_timeout=self.acquire_timeout, thread_local=False
        )
        fence_file = self.workspace.root / ".scriptorium" / FENCE_FILE
        try:
            acquired = lock.acquire()
            token = int(self.client.incr(self.fence_key)) if acquired else 0
            recorded = _recorded(fence_file) if acquired else 0
            if acquired and token <= recorded:  # Redis lost the counter: continue past what was installed
                token = int(self.client.eval(_ADVANCE, 1, self.fence_key, recorded))
                log.warning("lock.fence_advanced", recorded=recorded, token=token)
        except RedisError as exc:
            raise RedisUnavailable(f"cannot reach Redis for the workspace lock: {exc}") from exc
        if not acquired:
            raise LockHeld(f"another worker holds {self.lock_key}; not acquired within {self.acquire_timeout:g} s")
        watchdog = _Watchdog(lock, self.ttl)
        watchdog.start()
        self._lease, self._released = lock, False
        try:
            yield FenceCheck(self.client, self.fence_key, token, self.workspace.root / ".scriptorium", watchdog)
        finally:
            watchdog.stopped.set()
            self._lease = None
            if not self._released:
                try:
                    lock.release()
                except (LockError, RedisError) as exc:  # expired or Redis gone: the TTL frees it anyway
                    log.info("lock.release_failed", error=str(exc))

    # -- hand-overs -------------------------------------------------------------------------

    def hand_over(self, field: str, payload: str) -> bool:
        """Leave ``payload`` (an event) to whoever holds the lock: True when it was held and took it,
        False when the lock is free now (the caller runs the pass itself)."""
        return bool(self.client.eval(_HAND_OVER, 2, self.lock_key, self.handover_key, field, payload))

    def take_handovers(self) -> list[tuple[str, str]]:
        """While holding: what waits for this holder (field, payload); when nothing does, the lock is
        released in the same step and this returns []. Call until it returns []."""
        lease = self._lease
        if lease is None or self._released:
            return []
        token = lease.local.token
        try:
            answer = self.client.eval(_TAKE_OR_RELEASE, 2, self.lock_key, self.handover_key, token)
        except RedisError as exc:  # the release in hold() will try again; waiters are reclaimed by the sweep
            log.warning("lock.handover_check_failed", error=str(exc))
            return []
        if not isinstance(answer, list):  # 0: released; -1: the lease was lost already
            self._released = True
            return []
        return [(_text(answer[i]), _text(answer[i + 1])) for i in range(0, len(answer), 2)]

    def handover_done(self, field: str, payload: str) -> None:
        try:
            self.client.eval(_DONE, 1, self.handover_key, field, payload)
        except RedisError as exc:
            log.warning("lock.handover_done_failed", error=str(exc))

    def check_handover(self, field: str) -> str | bool:
        """After a hand-over: True while the lock is held and the event waits (or runs), False once it is
        done, else the event's payload, taken back because the holder died without running it."""
        answer = self.client.eval(_CHECK, 2, self.lock_key, self.handover_key, field)
        if answer == 0:
            return False
        if answer == 1:
            return True
        return _text(answer)

    def reclaim(self) -> list[str]:
        """Events handed to a holder that died (its lock expired): taken back for the caller to enqueue."""
        answer = self.client.eval(_RECLAIM, 2, self.lock_key, self.handover_key)
        return [_text(answer[i + 1]) for i in range(0, len(answer), 2)]


def _recorded(path: Path) -> int:
    """The token the workspace recorded at its last install; 0 for none (or one that cannot be read: the
    install's own check refuses then, this only decides whether a lost counter is moved on)."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return 0


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
