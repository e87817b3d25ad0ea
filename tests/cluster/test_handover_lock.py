"""The workspace lock's hand-overs against a real redis-server: each Lua step in both orders of a race."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scriptorium.workers.lock import RedisPassLock
from scriptorium.workspace import MemoryWorkspace
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
    _holder, waiter, client = locks
    assert waiter.hand_over("e1", '{"x": 1}') is False
    assert client.exists("t:handover:default") == 0


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
    assert waiter.hand_over("e1", "one") and waiter.hand_over("e2", "two")
    assert waiter.check_handover("e1") is True and holder.reclaim() == []
    time.sleep(1.2)  # the dead holder's lease runs out
    assert waiter.check_handover("e1") == "one", "the waiter takes its own event back"
    assert waiter.check_handover("e1") is False
    assert holder.reclaim() == ["two"], "the sweep takes back the rest"
    assert client.exists("t:handover:default") == 0
