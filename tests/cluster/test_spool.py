"""Publishing and hooks while Redis is down, then back: every event arrives once, none waits for the sweep."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from scriptorium.errors import RedisUnavailable
from scriptorium.producers.publisher import Publisher
from scriptorium.schemas.events import TurnEnded
from tests.checks import records_citing
from tests.cluster.conftest import Cluster, RedisServer, wait_for
from tests.runtimes.test_hooks import claude_transcript, common, hook


def stream_event_ids(cluster: Cluster) -> Counter[str]:
    from scriptorium.schemas.events import IngestEnded

    ids: Counter[str] = Counter()
    for _id, fields in cluster.redis.xrange("scriptorium:ingest_ended"):
        result = IngestEnded.model_validate_json(fields[b"payload"])
        if result.event_id:
            ids[result.event_id] += 1
    return ids


def test_events_published_while_redis_is_down_are_spooled_and_replayed_once(
    cluster: Cluster, redis_server: RedisServer, tmp_path: Path
) -> None:
    sessions = [cluster.session(f"sp{i}", 2) for i in range(3)]
    spool = tmp_path / "spool"
    redis_server.stop()
    publisher = Publisher(cluster.server.url, spool=spool)
    started = time.perf_counter()
    ids = [publisher.publish(TurnEnded(workspace="default", session_id=f"sp{i}")) for i in range(3)]
    assert time.perf_counter() - started < 3 * 2.5, "each publish gives up within its retry policy"
    assert len(publisher.spooled()) == 3
    with pytest.raises(RedisUnavailable):
        Publisher(cluster.server.url).publish(TurnEnded(workspace="default", session_id="sp0"))
    redis_server.start()
    cluster.start_worker("w1")
    assert publisher.replay() == 3 and publisher.spooled() == []
    publisher.close()
    cluster.results(3, timeout=60)
    assert all(stream_event_ids(cluster)[event_id] == 1 for event_id in ids), "each event arrives once"
    cited = records_citing(cluster.memory())
    assert all(cited[f"test/sp{i}/{node}"] == 1 for i, turns in enumerate(sessions) for node in turns)


def test_a_hook_with_redis_down_exits_at_once_and_its_event_goes_out_with_the_next(
    cluster: Cluster, redis_server: RedisServer, tmp_path: Path
) -> None:
    env = {"SCRIPTORIUM_BROKER_URL": cluster.server.url, "SCRIPTORIUM_SESSIONS_URL": cluster.sessions_url}
    hook_state = tmp_path / "hook-state"
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 2)
    redis_server.stop()
    started = time.perf_counter()
    out = hook(hook_state, common("Stop", transcript=transcript), **env)
    assert (out.returncode, out.stdout) == (0, "") and time.perf_counter() - started < 10
    assert len(list((hook_state / "spool").glob("*.json"))) == 1, "the event waits on the runtime's side"
    redis_server.start()
    cluster.start_worker("w1")
    claude_transcript(transcript, 4, start=2)
    out = hook(hook_state, common("SessionEnd", transcript=transcript, reason="exit"), **env)
    assert (out.returncode, out.stdout) == (0, "")
    assert list((hook_state / "spool").glob("*.json")) == [], "replayed after the next event went out"
    wait_for(
        lambda: all(records_citing(cluster.memory()).get(f"claude-code/cc-hooks/e{n}") == 1 for n in range(4)),
        60,
        "every turn written once",
    )
    results = cluster.results(2, timeout=60, session="cc-hooks")
    assert all(r.ok for r in results) and set(stream_event_ids(cluster).values()) == {1}
