"""The workspace lock's hand-overs against a real redis-server: each Lua step in both orders of a race."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from scriptorium.errors import LockHeld, LockLost, RedisUnavailable
from scriptorium.workers.lock import FenceCheck, RedisPassLock
from scriptorium.workspace import MemoryWorkspace, PreInstall
from tests.cluster.conftest import RedisServer


@pytest.fixture
def locks(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[RedisPassLock, RedisPassLock, redis.Redis]]:
    client = redis.Redis.from_url(redis_server.url)
    ws = MemoryWorkspace.init(tmp_path / "memory")
    holder = RedisPassLock(client, ws, "default", "t:", ttl_s=1.0, acquire_timeout_s=0.2)
    waiter = RedisPassLock(client, ws, "default", "t:", ttl_s=1.0, acquire_timeout_s=0.2)
    yield holder, waiter, client
    ws.close()
    client.close()


def test_nothing_is_handed_over_when_nobody_holds_the_lock(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis],
) -> None:
    holder, waiter, client = locks
    assert waiter.hand_over("e1", '{"x": 1}') is False
    assert client.exists("t:handover:default") == 0
    assert holder.take_handovers() == [], "a lock never held has nothing to take"
    with holder.hold():
        pass
    assert holder.take_handovers() == [], "nor one let go"


def test_a_holder_with_nothing_handed_over_lets_go_as_its_pass_ends(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis],
) -> None:
    """No waiter took part: the lock is released when the pass ends, not left to lapse by its TTL."""
    holder, waiter, client = locks
    with holder.hold():
        assert client.exists("t:lock:default") == 1
    assert client.exists("t:lock:default") == 0
    with waiter.hold():  # at once, well within the TTL
        pass


def test_the_holder_takes_what_waits_and_lets_go_only_when_nothing_does(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis],
) -> None:
    holder, waiter, client = locks
    with holder.hold():
        assert waiter.hand_over("e1", "one") and waiter.hand_over("e2", "two")
        assert waiter.check_handover("e1") is True, "held: the waiter looks again later"
        taken = holder.take_handovers()
        assert sorted(taken) == [("e1", "one"), ("e2", "two")] and client.exists("t:lock:default") == 1
        holder.handover_done("e1", "one")
        assert waiter.hand_over("e3", "three"), "still held: a late waiter is taken too"
        holder.handover_done("e2", "two")
        assert holder.take_handovers() == [("e3", "three")]
        holder.handover_done("e3", "three")
        assert holder.take_handovers() == [] and client.exists("t:lock:default") == 0, "released in the same step"
        assert waiter.hand_over("e4", "four") is False, "after the release the waiter runs its pass itself"
        assert waiter.check_handover("e1") is False, "done"
    assert client.exists("t:handover:default") == 0


def test_a_redelivered_hand_over_is_not_dropped_by_the_first_ones_done(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis],
) -> None:
    holder, waiter, _client = locks
    with holder.hold():
        waiter.hand_over("e1", "first")
        (taken,) = holder.take_handovers()
        waiter.hand_over("e1", "again")  # the same event, handed over again while the first ran
        holder.handover_done(*taken)
        assert holder.take_handovers() == [("e1", "again")]
        holder.handover_done("e1", "again")
        assert holder.take_handovers() == []


def test_work_left_with_a_holder_that_died_is_taken_back_once_its_lock_expires(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis],
) -> None:
    holder, waiter, client = locks
    lease = client.lock("t:lock:default", timeout=1.0)  # a holder that will never extend or release
    assert lease.acquire(blocking=False)
    assert waiter.hand_over("e1", "one") and waiter.hand_over("e2", "two") and waiter.hand_over("e3", "three")
    assert waiter.check_handover("e1") is True and holder.reclaim() == []
    time.sleep(1.2)  # the dead holder's lease runs out
    assert waiter.check_handover("e1") == "one", "the waiter takes its own event back"
    assert waiter.check_handover("e1") is False
    assert sorted(holder.reclaim()) == ["three", "two"], "the sweep takes back the rest, each once"
    assert client.exists("t:handover:default") == 0


def _fence(lease: object) -> FenceCheck:
    assert isinstance(lease, FenceCheck)
    return lease


def test_a_holder_keeps_its_lease_past_its_ttl_and_never_longer_than_one_ttl_ahead(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watchdog extends the lease (TTL 1 s) while the pass runs 2.5 s: nobody else gets the lock, and
    the lease never reaches further than one TTL ahead (a dead holder's lapses within one TTL)."""
    holder, waiter, client = locks
    extends: list[float] = []
    original = redis.lock.Lock.extend

    def counted(self: redis.lock.Lock, *args: Any, **kwargs: Any) -> bool:
        extends.append(time.monotonic())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(redis.lock.Lock, "extend", counted)
    with holder.hold() as lease:
        for _ in range(10):
            time.sleep(0.25)
            assert 0 < client.pttl("t:lock:default") <= 1000
        with pytest.raises(LockHeld), waiter.hold():
            pass
        _fence(lease)(cast(PreInstall, None))  # still the newest: it may install
    assert 5 <= len(extends) <= 12, f"about every third of the TTL over 2.5 s, not a spin: {len(extends)}"


def test_a_holder_whose_lease_lapsed_refuses_to_install_even_when_nobody_took_the_lock(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis],
) -> None:
    """The lease vanished under the holder (a Redis that lost it, a pause past its TTL) but no one acquired
    since, so the fencing counter still names this holder: the watchdog's failed extend alone refuses."""
    holder, _waiter, client = locks
    with holder.hold() as lease:
        client.delete("t:lock:default")
        time.sleep(0.5)  # past a watchdog period (TTL / 3)
        with pytest.raises(LockLost):
            _fence(lease)(cast(PreInstall, None))


def test_a_fencing_counter_behind_the_holders_token_refuses_to_install(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis],
) -> None:
    """Redis lost the counter's last increments (restarted from an older snapshot): a counter behind this
    holder's token means the lock's history is not what the holder saw, and it does not install. A fresh
    workspace's first holder takes token 1 and records nothing until it installs."""
    holder, _waiter, client = locks
    with holder.hold() as lease:
        fence = _fence(lease)
        assert fence.token == 1 and int(client.get("t:fence:default") or 0) == 1, "nothing advanced the counter"
        fence(cast(PreInstall, None))
        fence(cast(PreInstall, None))  # a second install under the same lease (a hand-over it ran): its own token
        client.set("t:fence:default", 0)
        with pytest.raises(LockLost):
            fence(cast(PreInstall, None))


def test_a_holder_that_loses_redis_mid_pass_lets_go_without_raising(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis], redis_server: RedisServer
) -> None:
    """Redis goes away while the lock is held: looking for hand-overs answers none, marking one done and
    letting go raise nothing (the lease lapses by its TTL; waiters are reclaimed by the sweep)."""
    holder, waiter, _client = locks
    with holder.hold():
        assert waiter.hand_over("e1", "one")
        (taken,) = holder.take_handovers()
        redis_server.stop()
        assert holder.take_handovers() == []
        holder.handover_done(*taken)
    redis_server.start()


def test_a_lock_asked_for_while_redis_is_gone_is_refused_as_redis_unavailable(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis], redis_server: RedisServer
) -> None:
    """Not a raw connection error: the caller is told Redis cannot be reached (retryable), and holds nothing."""
    holder, _waiter, _client = locks
    redis_server.stop()
    try:
        with pytest.raises(RedisUnavailable, match="cannot reach Redis for the workspace lock"), holder.hold():
            pytest.fail("held without Redis")
    finally:
        redis_server.start()


def test_two_deliveries_of_one_event_are_both_handed_over_and_each_gets_its_result(
    locks: tuple[RedisPassLock, RedisPassLock, redis.Redis],
) -> None:
    """A broker that delivers one event twice makes two tasks; both find the lock held. Each is left to the
    holder under its own task ID, so the holder runs and answers both (under the event's ID the second
    would overwrite the first, and the first task's result would never be published)."""
    from scriptorium.schemas.events import SessionIdle
    from scriptorium.workers.handling import _hand_over

    holder, waiter, _client = locks
    runtime = cast(Any, type("Runtime", (), {"lock": lambda self, workspace: waiter})())
    event = SessionIdle(workspace="default", session_id="s1")
    with holder.hold():
        assert _hand_over(runtime, event, "task-1") and _hand_over(runtime, event, "task-2")
        taken = holder.take_handovers()
        assert sorted(json.loads(payload)["task_id"] for _field, payload in taken) == ["task-1", "task-2"]
        for field, payload in taken:
            holder.handover_done(field, payload)
