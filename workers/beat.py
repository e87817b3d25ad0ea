"""Only one scheduler may run: ``scriptorium beat`` holds a Redis lease for as long as it lives."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import redis
from redis.exceptions import LockError, RedisError

from scriptorium.errors import LockHeld, RedisUnavailable

LEASE_S = 60.0


@contextmanager
def single_scheduler(client: redis.Redis, key: str) -> Iterator[None]:
    """Hold the scheduler lease (refreshed in the background); LockHeld if another beat has it."""
    lease = client.lock(key, timeout=LEASE_S, blocking=False, thread_local=False)
    try:
        if not lease.acquire():
            raise LockHeld(f"another scheduler holds {key}; only one beat may run")
    except RedisError as exc:
        raise RedisUnavailable(f"cannot reach Redis for the scheduler lease: {exc}") from exc
    stop = threading.Event()

    def refresh() -> None:
        while not stop.wait(LEASE_S / 3):
            try:
                lease.extend(LEASE_S, replace_ttl=True)
            except (LockError, RedisError):
                continue

    thread = threading.Thread(target=refresh, daemon=True, name="scriptorium-beat-lease")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        with suppress(LockError, RedisError):
            lease.release()
