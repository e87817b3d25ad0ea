"""Publishing and hooks while Redis is down, then back: every event arrives once, none waits for the sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from scriptorium.errors import RedisUnavailable
from scriptorium.producers.publisher import BUDGET_S, Publisher
from scriptorium.runtimes.hooks.watcher import every_interval
from scriptorium.schemas.events import TurnEnded
from scriptorium.settings import Settings
from tests.checks import records_citing
from tests.cluster.conftest import ROOT, Cluster, RedisServer, wait_for
from tests.helpers.hooks import common, hook
from tests.helpers.transcripts import claude_transcript


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


def session_transcript(folder: Path, session: str, turns: int) -> Path:
    """A Claude Code transcript of ``turns`` turns for ``session`` (the hook tests' format)."""
    made = claude_transcript(folder / "made.jsonl", turns)
    path = folder / f"{session}.jsonl"
    path.write_text(made.read_text().replace("cc-hooks", session))
    made.unlink()
    return path


def test_a_redis_that_accepts_but_never_answers_costs_a_hook_its_budget_and_loses_nothing(
    cluster: Cluster, redis_server: RedisServer, tmp_path: Path
) -> None:
    """SIGSTOP keeps Redis's socket open and silent (as a partition can): publishers and hooks give up within
    their budget and spool; once it answers again, a resident process replays the spool with no new event,
    and every turn is written once."""
    env = {"SCRIPTORIUM_BROKER_URL": cluster.server.url, "SCRIPTORIUM_SESSIONS_URL": cluster.sessions_url}
    hook_state = tmp_path / "hook-state"
    sessions = [f"cc-{n}" for n in range(3)]
    assert redis_server.proc is not None
    os.kill(redis_server.proc.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        for session in sessions:
            transcript = session_transcript(tmp_path, session, 2)
            payload = {**common("SessionEnd", transcript=transcript, reason="exit"), "session_id": session}
            started = time.perf_counter()
            out = hook(hook_state, payload, **env)
            took = time.perf_counter() - started
            assert (out.returncode, out.stdout) == (0, "") and took < 2 * BUDGET_S + 3, (took, out.stderr[-500:])
        started = time.perf_counter()
        publisher = Publisher(cluster.server.url, spool=hook_state / "spool")
        publisher.publish(TurnEnded(workspace="default", session_id="cc-0"))
        assert time.perf_counter() - started < 2 * BUDGET_S + 1, "a publisher gives up within its budget"
        publisher.close()
        assert len(list((hook_state / "spool").glob("*.json"))) == 4, "every event waits on the runtime's side"
        time.sleep(max(0.0, 20 - (time.monotonic() - stopped)))  # an outage of 20 s, as in the fault campaign
    finally:
        os.kill(redis_server.proc.pid, signal.SIGCONT)
    cluster.start_worker("w1")
    stop = threading.Event()
    settings = Settings(
        state=hook_state, broker_url=cluster.server.url, sessions_url=cluster.sessions_url, sweep_interval_s=1
    )
    every_interval(settings, stop)  # what the hook daemon and `scriptorium serve` run

    def all_written() -> bool:
        cited = records_citing(cluster.memory())
        return all(cited.get(f"claude-code/{session}/e{m}") == 1 for session in sessions for m in range(2))

    try:
        wait_for(all_written, 60, "every turn written once, with no new event")
        wait_for(lambda: not list((hook_state / "spool").glob("*.json")), 30, "the spool emptied")
    finally:
        stop.set()
    assert set(stream_event_ids(cluster).values()) == {1}, "each event ran once"


REPLAY = "import pathlib, sys\nfrom scriptorium.producers.publisher import Publisher\n" + (
    "print(Publisher(sys.argv[1], spool=pathlib.Path(sys.argv[2])).replay())"
)


def test_concurrent_replayers_deliver_each_spooled_event_once_and_all_succeed(
    cluster: Cluster, redis_server: RedisServer, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    redis_server.stop()
    publisher = Publisher(cluster.server.url, spool=spool, budget_s=0.4)
    ids = [publisher.publish(TurnEnded(workspace="default", session_id=f"none-{n}")) for n in range(40)]
    publisher.close()
    assert len(list(spool.glob("*.json"))) == 40
    redis_server.start()
    argv = [sys.executable, "-c", REPLAY, cluster.server.url, str(spool)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err[-500:] for _, err in outs]
    assert sum(int(out.strip().splitlines()[-1]) for out, _ in outs) == 40, "each event sent by exactly one replayer"
    assert list(spool.glob("*.json")) == [] and list((spool / "claimed").iterdir()) == []
    cluster.start_worker("w1")
    cluster.results(40, timeout=120)
    assert all(stream_event_ids(cluster)[event_id] == 1 for event_id in ids)


def test_a_claim_whose_replayer_died_goes_back_to_the_spool(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    (spool / "claimed").mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    abandoned = spool / "claimed" / f"{dead.stdout.strip()}.20261202T000000000000-ev.json"
    abandoned.write_text("{}")
    publisher = Publisher("redis://127.0.0.1:1/0", spool=spool, budget_s=0.2)
    publisher.replay()  # the file is back in the spool, then set aside as unreadable ("{}" is no event)
    publisher.close()
    assert [p.name for p in spool.iterdir() if p.is_file()] == ["20261202T000000000000-ev.bad"]


def test_the_beat_replays_the_spool_of_its_state_folder_with_no_new_event(
    cluster: Cluster, redis_server: RedisServer
) -> None:
    """Events spooled in the scheduler's state folder while Redis was down go out within seconds of Redis
    answering again: the beat replays them (no hook, publisher or sweep runs; the sweep is minutes away)."""
    sessions = {f"bt{i}": cluster.session(f"bt{i}", 2) for i in range(3)}
    spool = cluster.state / "spool"
    redis_server.stop()
    publisher = Publisher(cluster.server.url, spool=spool, budget_s=0.4)
    ids = [publisher.publish(TurnEnded(workspace="default", session_id=sid)) for sid in sessions]
    publisher.close()
    redis_server.start()
    beat = subprocess.Popen(
        [sys.executable, "-m", "scriptorium.cli.main", "beat", "--loglevel", "INFO"],
        cwd=ROOT,
        env={**cluster.env, "SCRIPTORIUM_SWEEP_INTERVAL_S": "3600"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        cluster.start_worker("w1")
        wait_for(lambda: not list(spool.glob("*.json")), 30, "the beat to replay the spool")
        cluster.results(3, timeout=60)
    finally:
        beat.terminate()
        beat.wait(20)
    assert all(stream_event_ids(cluster)[event_id] == 1 for event_id in ids), "each event arrives once"
    cited = records_citing(cluster.memory())
    assert all(cited[f"test/{sid}/{node}"] == 1 for sid, turns in sessions.items() for node in turns)
