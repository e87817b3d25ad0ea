"""The fencing token against a real redis-server, in the cases where it alone decides.

A holder paused past its lock's TTL may find, when it wakes, that the revision it read is still the
installed one (the newer holder changed nothing): the revision check lets it through, only the fence
refuses it. And after Redis lost its counter (a restart without persistence), the token recorded in the
workspace keeps a stale holder out, while a new holder can still write.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

from scriptorium.errors import LockLost
from scriptorium.workers.lock import FENCE_FILE, FenceCheck, RedisPassLock
from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange
from tests.cluster.conftest import RedisServer
from tests.conftest import State

TTL = 1.0


@pytest.fixture
def world(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[MemoryWorkspace, redis.Redis]]:
    client = redis.Redis.from_url(redis_server.url)
    ws = MemoryWorkspace.init(tmp_path / "memory")
    with ws.lock():
        paths = ws.archive_sources([SourceMessage("test", "t1", "m1", "user", "2026-11-01T00:00:00Z", "tea")])
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    yield ws, client
    ws.close()
    client.close()


def lock(ws: MemoryWorkspace, client: redis.Redis) -> RedisPassLock:
    return RedisPassLock(client, MemoryWorkspace(ws.root), "default", "t:", ttl_s=TTL, acquire_timeout_s=0.5)


@contextmanager
def paused_holder(ws: MemoryWorkspace, client: redis.Redis) -> Iterator[FenceCheck]:
    """A holder paused past its lock's TTL: its lease is no longer extended, and has expired."""
    with lock(ws, client).hold() as stale:
        assert stale is not None
        stale.watchdog.stopped.set()
        time.sleep(TTL + 0.5)
        yield stale


def change(name: str) -> list[TopicChange]:
    return [TopicChange(f"topics/{name}.md", "create", f"# {name}\n\nFact [k](test/t1/m1).\n")]


def test_a_paused_holder_whose_revision_still_matches_is_refused_by_the_fence_alone(
    world: tuple[MemoryWorkspace, redis.Redis],
) -> None:
    ws, client = world
    baseline = ws.revision
    with paused_holder(ws, client) as stale:
        with lock(ws, client).hold() as newer:  # a newer holder: it looks, and changes nothing
            assert newer is not None and newer.token > stale.token
        assert ws.revision == baseline, "the revision the paused holder read is still the installed one"
        before = State(ws)
        with pytest.raises(LockLost, match="moved on"):
            ws.apply_changes(change("stale"), message="stale", pre_install=stale)
        before.assert_unchanged(ws)


def test_after_redis_lost_its_counter_a_stale_holder_stays_out_and_a_new_one_writes(
    world: tuple[MemoryWorkspace, redis.Redis],
) -> None:
    ws, client = world
    with paused_holder(ws, client) as stale:
        with lock(ws, client).hold() as newer:
            assert newer is not None
            ws.apply_changes(change("newer"), message="newer", pre_install=newer)
        recorded = int((ws.root / ".scriptorium" / FENCE_FILE).read_text())
        assert recorded == newer.token
        client.flushall()  # Redis restarted without its data: the counter starts over
        client.set("t:fence:default", stale.token)  # another worker's increment reached the stale token
        before = State(ws)
        with pytest.raises(LockLost, match="older than the installed"):  # only the recorded token tells
            ws.apply_changes(change("stale"), message="stale", pre_install=stale)
        before.assert_unchanged(ws)
    client.flushall()
    with lock(ws, client).hold() as fresh:  # a new holder after the loss: its token starts past the recorded
        assert fresh is not None and fresh.token > recorded
        ws.apply_changes(change("fresh"), message="fresh", pre_install=fresh)
    assert "topics/fresh.md" in ws.snapshot().topics


def test_a_counter_that_starts_over_at_the_recorded_token_is_moved_past_it(
    world: tuple[MemoryWorkspace, redis.Redis],
) -> None:
    """Redis lost its counter and the next increment lands exactly on the recorded token: that token is the
    installed holder's, so the new holder's must be past it (equal tokens would let a stale holder of the
    same number through)."""
    ws, client = world
    with lock(ws, client).hold() as first:
        assert first is not None
        ws.apply_changes(change("first"), message="first", pre_install=first)
    recorded = int((ws.root / ".scriptorium" / FENCE_FILE).read_text())
    client.flushall()
    client.set("t:fence:default", recorded - 1)  # the next increment gives the recorded token itself
    with lock(ws, client).hold() as fresh:
        assert fresh is not None and fresh.token == recorded + 1
        ws.apply_changes(change("fresh"), message="fresh", pre_install=fresh)
    assert int((ws.root / ".scriptorium" / FENCE_FILE).read_text()) == recorded + 1


def test_a_counter_ahead_of_the_recorded_token_is_taken_as_it_is_and_warns_of_nothing(
    world: tuple[MemoryWorkspace, redis.Redis],
) -> None:
    """The usual case: the counter is past what the workspace recorded, so the lock neither moves it nor logs
    that Redis lost it (an operator reads that warning as a Redis restart)."""
    from structlog.testing import capture_logs

    ws, client = world
    with lock(ws, client).hold() as first:
        assert first is not None
        ws.apply_changes(change("first"), message="first", pre_install=first)
    with capture_logs() as logs, lock(ws, client).hold() as second:
        assert second is not None and second.token == first.token + 1
    assert "lock.fence_advanced" not in [entry["event"] for entry in logs], logs
    assert int(client.get("t:fence:default") or 0) == second.token


def test_a_token_past_the_small_integers_installs(world: tuple[MemoryWorkspace, redis.Redis]) -> None:
    """Tokens are compared by value: a long-lived workspace's counter is far past the integers Python keeps
    once (a check by identity would refuse every install from the 257th pass on)."""
    ws, client = world
    client.set("t:fence:default", 1000)
    with lock(ws, client).hold() as holder:
        assert holder is not None and holder.token == 1001
        ws.apply_changes(change("late"), message="late", pre_install=holder)
    assert int((ws.root / ".scriptorium" / FENCE_FILE).read_text()) == 1001
    assert "topics/late.md" in ws.snapshot().topics


def test_a_waiter_that_does_not_acquire_leaves_the_fence_alone(world: tuple[MemoryWorkspace, redis.Redis]) -> None:
    """A worker that finds the lock held takes no token and does not take the counter for a lost one."""
    from structlog.testing import capture_logs

    from scriptorium.errors import LockHeld

    ws, client = world
    with lock(ws, client).hold() as holder:
        assert holder is not None
        counter = int(client.get("t:fence:default") or 0)
        with capture_logs() as logs, pytest.raises(LockHeld), lock(ws, client).hold():
            pass
        assert "lock.fence_advanced" not in [entry["event"] for entry in logs], logs
        assert int(client.get("t:fence:default") or 0) == counter


def test_an_install_whose_fence_cannot_be_read_is_refused_as_redis_unavailable(
    world: tuple[MemoryWorkspace, redis.Redis], redis_server: RedisServer
) -> None:
    """Redis gone between acquire and install: the fence cannot be checked, so nothing is installed, and the
    caller learns it is Redis (retryable), not a lost lock."""
    from scriptorium.errors import RedisUnavailable

    ws, client = world
    with lock(ws, client).hold() as holder:
        assert holder is not None
        holder.watchdog.stopped.set()
        redis_server.stop()
        before = State(ws)
        with pytest.raises(RedisUnavailable, match="fencing token"):
            ws.apply_changes(change("unchecked"), message="unchecked", pre_install=holder)
        before.assert_unchanged(ws)
    assert not (ws.root / ".scriptorium" / FENCE_FILE).exists()


def test_a_counter_redis_lost_mid_pass_refuses_the_first_holders_install(
    world: tuple[MemoryWorkspace, redis.Redis],
) -> None:
    """Redis restarted without its data while the very first holder (token 1) ran: no counter is no
    evidence that this holder is the newest, so it installs nothing (even before its watchdog notices)."""
    ws, client = world
    with lock(ws, client).hold() as holder:
        assert holder is not None and holder.token == 1
        holder.watchdog.stopped.set()  # only the fence decides
        client.flushall()
        before = State(ws)
        with pytest.raises(LockLost, match="moved on"):
            ws.apply_changes(change("orphan"), message="orphan", pre_install=holder)
        before.assert_unchanged(ws)
