"""Several worker hosts: the placement record, and each workspace's passes run by the host holding it.

Two "hosts" here are worker processes with a state folder each (each its own disk) sharing one Redis and
one session store; the multi-machine run in network namespaces is the next step of the same design.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from scriptorium.producers.placement import Placement, queue_of
from scriptorium.producers.publisher import Publisher
from scriptorium.schemas.events import SessionIdle
from scriptorium.workspace import MemoryWorkspace
from tests.checks import exactly_once
from tests.cluster.conftest import Cluster, RedisServer, wait_for


def test_an_unplaced_workspace_goes_to_the_live_host_holding_fewest_and_racing_publishers_agree(
    redis_server: RedisServer,
) -> None:
    placement = Placement(redis.Redis.from_url(redis_server.url), "scriptorium:")
    assert placement.route("w0") is None, "no host registered: the shared queue, nothing placed"
    assert placement.placed() == {}
    placement.heartbeat("h1")
    placement.heartbeat("h2")
    placement.heartbeat("gone", now=1.0)  # last heard of long ago: not live
    assert placement.live_hosts() == ["h1", "h2"]
    assert placement.place("w1") == "h1" and placement.place("w2") == "h2", "fewest first, then by name"
    assert placement.place("w1") == "h1", "a placed workspace stays where it is"
    assert placement.route("w3") == queue_of("h1")
    placement.place("w8", "gone")
    assert placement.route("w8") == queue_of("gone"), "a placed workspace's tasks wait for its host"
    chosen: list[str | None] = []
    threads = [threading.Thread(target=lambda: chosen.append(placement.place("raced"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(chosen)) == 1 and chosen[0] in ("h1", "h2"), chosen
    shown = subprocess.run(
        [sys.executable, "-m", "scriptorium.cli.main", "placement", "--place", "w9", "h2", "--json"],
        env={**os.environ, "SCRIPTORIUM_BROKER_URL": redis_server.url},
        capture_output=True,
        text=True,
        timeout=60,
    )
    hosts = json.loads(shown.stdout)["hosts"]
    assert hosts["gone"]["live"] is False and hosts["gone"]["workspaces"] == ["w8"], hosts
    assert hosts["h2"]["live"] is True and "w9" in hosts["h2"]["workspaces"] and "w2" in hosts["h2"]["workspaces"]


def test_each_workspaces_passes_run_on_the_host_that_holds_it_exactly_once(cluster: Cluster) -> None:
    """Six workspaces placed on two hosts, each created on its host's disk only: every session is written
    exactly once, on its host; a task sent to the wrong host's worker (a workspace moved since) is forwarded
    to the right one, never run from a disk that lacks the workspace."""
    placement = Placement(cluster.redis, "scriptorium:")
    hosts = {"h1": cluster.tmp / "host-h1", "h2": cluster.tmp / "host-h2"}
    names = [f"w{n}" for n in range(6)]
    for n, name in enumerate(names):
        host = "h1" if n % 2 == 0 else "h2"
        placement.place(name, host)
        MemoryWorkspace.init(hosts[host] / "workspaces" / name / "memory").close()
    for host, state in hosts.items():
        cluster.start_worker(host, SCRIPTORIUM_STATE=str(state), SCRIPTORIUM_WORKER_HOST=host)
    wait_for(lambda: placement.live_hosts() == ["h1", "h2"], 30, "both hosts' heartbeats")
    sessions = {name: cluster.session(f"s-{name}", 4, workspace=name) for name in names}
    publisher = Publisher(cluster.server.url)
    try:
        for name in names:
            publisher.session_idle(name, f"s-{name}")
        results = cluster.results(len(names), timeout=120)
        assert sorted(r.workspace for r in results) == names and all(r.ok for r in results), results
        # A task that lands on the other host's queue (the workspace moved after it was sent) is forwarded.
        stray = cluster.session("s-w0-late", 3, workspace="w0")
        publisher.app.send_task(
            "scriptorium.write",
            args=[SessionIdle(workspace="w0", session_id="s-w0-late").model_dump(mode="json")],
            queue=queue_of("h2"),
        )
        (late,) = cluster.results(1, timeout=60)
        assert late.ok and late.workspace == "w0"
    finally:
        publisher.close()
    for n, name in enumerate(names):
        host, other = ("h1", "h2") if n % 2 == 0 else ("h2", "h1")
        written = {f"s-{name}": sessions[name], **({"s-w0-late": stray} if name == "w0" else {})}
        content = [(sid, node) for sid, ids in written.items() for node in ids]
        counts = exactly_once(hosts[host] / "workspaces" / name / "memory", cluster.store, content)
        assert counts == {"turns": len(content), "lost": 0, "duplicated": 0, "unmarked": 0, "partial_installs": 0}
        assert not (hosts[other] / "workspaces" / name).exists(), f"{name} never touched {other}'s disk"
    forwards = {host: cluster.log(host).count("task.forwarded") for host in hosts}
    assert forwards == {"h1": 0, "h2": 1}, "the publisher routed the six itself; only the stray was forwarded"


def test_a_host_that_cannot_read_the_placement_puts_the_task_back_rather_than_run_it_here(tmp_path: Path) -> None:
    """Redis does not answer when a host's worker asks where a workspace lives: run here, the pass could find a
    disk without the workspace and fail it for good; the task goes back on its queue instead."""
    from types import SimpleNamespace

    import pytest
    from celery.exceptions import Reject

    from scriptorium.settings import Settings
    from scriptorium.workers import handling
    from tests.cluster.conftest import free_port

    settings = Settings(state=tmp_path, broker_url=f"redis://127.0.0.1:{free_port()}/0", worker_host="h1")
    sent: list[object] = []
    task = SimpleNamespace(
        app=SimpleNamespace(send_task=lambda *a, **k: sent.append((a, k))),
        request=SimpleNamespace(id="t1", retries=0),
        name="scriptorium.write",
    )
    handling._runtime = None
    payload = SessionIdle(workspace="w0", session_id="s").model_dump(mode="json")
    with pytest.raises(Reject) as refused:
        handling.handle(task, payload, settings)  # type: ignore[arg-type]
    assert refused.value.requeue is True and sent == [], "put back, not forwarded, not run"
    assert not (tmp_path / "workspaces").exists()
    handling._runtime = None


def _move(cluster: Cluster, workspace: str, host: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scriptorium.cli.main", "move", workspace, host, "--json", *extra],
        env={**cluster.env, "SCRIPTORIUM_STATE": str(cluster.tmp / "operator")},
        capture_output=True,
        text=True,
        timeout=180,
    )


INSTANT = {"SCRIPTORIUM_REPLICA_SEND_INTERVAL_S": "0"}
"""Every pass sent to the replica at once."""


def _two_hosts(cluster: Cluster, names: list[str], **env: str) -> tuple[Placement, dict[str, Path]]:
    """``names`` placed on h1 and created on its disk; both hosts' workers up (``env``: more settings). Every
    pass is sent to the replica at once (a send interval of 0), unless ``env`` says otherwise: these tests
    look at what the replica holds after the last pass."""
    env = {**INSTANT, **env}
    placement = Placement(cluster.redis, "scriptorium:")
    hosts = {"h1": cluster.tmp / "host-h1", "h2": cluster.tmp / "host-h2"}
    for name in names:
        placement.place(name, "h1")
        MemoryWorkspace.init(hosts["h1"] / "workspaces" / name / "memory").close()
    for host, state in hosts.items():
        cluster.start_worker(host, SCRIPTORIUM_STATE=str(state), SCRIPTORIUM_WORKER_HOST=host, **env)
    wait_for(lambda: placement.live_hosts() == ["h1", "h2"], 30, "both hosts' heartbeats")
    return placement, hosts


def test_moving_workspaces_between_hosts_under_load_loses_and_repeats_nothing(cluster: Cluster) -> None:
    """Sessions keep arriving for three workspaces while two move to h2 and one of them back: every turn is
    written exactly once, into the copy its final host holds; the hosts left keep their copies aside only."""
    names = ["w0", "w1", "w2"]
    placement, hosts = _two_hosts(cluster, names)
    written: dict[str, dict[str, list[str]]] = {name: {} for name in names}
    publisher = Publisher(cluster.server.url)
    stop = threading.Event()

    def load() -> None:
        n = 0
        while not stop.is_set() and n < 600:  # until the moves are done: some tasks arrive mid-move
            name = names[n % len(names)]
            sid = f"s-{name}-{n}"
            written[name][sid] = cluster.session(sid, 3, workspace=name)
            publisher.session_idle(name, sid)
            n += 1
            stop.wait(0.03)

    feeding = threading.Thread(target=load)
    try:
        feeding.start()
        moves = [_move(cluster, "w0", "h2"), _move(cluster, "w1", "h2"), _move(cluster, "w0", "h1")]
        stop.set()
        feeding.join()
        for done in moves:
            assert done.returncode == 0, done.stderr
        figures = [json.loads(done.stdout) for done in moves]
        assert [(f["workspace"], f["from"], f["to"]) for f in figures] == [
            ("w0", "h1", "h2"),
            ("w1", "h1", "h2"),
            ("w0", "h2", "h1"),
        ]
        sent = sum(len(sessions) for sessions in written.values())
        results = cluster.results(sent, timeout=180)
        assert all(r.ok for r in results), [r for r in results if not r.ok]
    finally:
        stop.set()
        publisher.close()
    assert placement.placed() == {"w0": "h1", "w1": "h2", "w2": "h1"} and placement.moves() == []
    final = {"w0": "h1", "w1": "h2", "w2": "h1"}
    for name, host in final.items():
        content = [(sid, node) for sid, ids in written[name].items() for node in ids]
        memory = hosts[host] / "workspaces" / name / "memory"
        counts = exactly_once(memory, cluster.store, content)
        assert counts == {"turns": len(content), "lost": 0, "duplicated": 0, "unmarked": 0, "partial_installs": 0}
    wait_for(lambda: not (hosts["h2"] / "workspaces" / "w0" / "memory").exists(), 30, "h2 to put w0 aside")
    wait_for(lambda: not (hosts["h1"] / "workspaces" / "w1" / "memory").exists(), 30, "h1 to put w1 aside")
    aside = sorted(p.name.split("-")[0] for p in (hosts["h1"] / "retired").iterdir())
    assert aside == ["w0", "w1"], "h1 put aside its first w0 (replaced when it came back) and its w1"
    waited = cluster.log("h1").count("task.waits_for_move") + cluster.log("h2").count("task.waits_for_move")
    assert waited > 0, "some task arrived while a move was under way and waited for it"
    for name, host in final.items():  # sends coalesced under load; each replica ends equal to its workspace
        memory = hosts[host] / "workspaces" / name / "memory"
        wait_for(lambda m=memory, n=name: _replicated(placement, n, m), 60, f"{name}'s replica to catch up")
        replica = placement.replica_of(name)
        assert replica is not None and replica.host != host and not replica.behind
        assert _head(hosts[replica.host] / "replicas" / name / "memory") == _head(memory)


def test_a_move_that_cannot_land_is_rolled_back_and_refusals_change_nothing(cluster: Cluster) -> None:
    """The old host is down: the move times out and is undone, the workspace stays where it was. A host
    that is not live, a workspace no host holds, and the host that holds it already are refused."""
    placement, hosts = _two_hosts(cluster, ["w0"])
    for refused, reason in (
        (_move(cluster, "w0", "h9"), "INVALID_ARGUMENT"),
        (_move(cluster, "nowhere", "h2"), "NOT_FOUND"),
        (_move(cluster, "w0", "h1"), "INVALID_ARGUMENT"),
    ):
        assert refused.returncode != 0 and reason in refused.stderr, refused.stderr
    assert placement.placed() == {"w0": "h1"} and placement.moves() == []
    os.killpg(cluster.workers["h1"].pid, 9)
    cluster.workers["h1"].wait(10)
    timed_out = _move(cluster, "w0", "h2", "--timeout", "3")
    assert timed_out.returncode != 0 and "MOVE_FAILED" in timed_out.stderr, timed_out.stderr
    assert placement.placed() == {"w0": "h1"} and placement.moves() == [], "rolled back"
    assert (hosts["h1"] / "workspaces" / "w0" / "memory" / ".git").is_dir()
    assert not (hosts["h2"] / "workspaces" / "w0").exists()


def _head(memory: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(memory), "rev-parse", "refs/heads/main"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _tree(memory: Path, commit: str) -> str:
    return subprocess.run(
        ["git", "-C", str(memory), "rev-parse", f"{commit}^{{tree}}"], capture_output=True, text=True, check=True
    ).stdout.strip()


def _replicated(placement: Placement, workspace: str, memory: Path) -> bool:
    replica = placement.replica_of(workspace)
    return replica is not None and replica.applied == _head(memory)


def test_a_dead_holders_workspace_is_promoted_from_its_replica_and_what_it_missed_is_written_again(
    cluster: Cluster,
) -> None:
    """w0's holder h1 dies after an install its replica on h2 never received: promoted on h2, the replica's
    missing turns are written again there, the events that waited in h1's queue run once h1 is back, and in
    the end every turn is written exactly once and the new replica (on h1) equals the workspace."""
    placement, hosts = _two_hosts(cluster, ["w0"])
    h1_w0 = hosts["h1"] / "workspaces" / "w0" / "memory"
    written: dict[str, list[str]] = {}
    publisher = Publisher(cluster.server.url)
    try:
        for n in range(3):
            written[f"s{n}"] = cluster.session(f"s{n}", 3, workspace="w0")
            publisher.session_idle("w0", f"s{n}")
        assert all(r.ok for r in cluster.results(3, timeout=120))
        wait_for(lambda: _replicated(placement, "w0", h1_w0), 60, "the replica on h2 to apply h1's commits")
        replica = hosts["h2"] / "replicas" / "w0" / "memory"
        assert _head(replica) == _head(h1_w0)
        # h2 stops; h1 installs once more and sends it; h1 dies, and its send never reaches h2.
        cluster.stop_worker("h2")
        written["s3"] = cluster.session("s3", 3, workspace="w0")
        publisher.session_idle("w0", "s3")
        (s3,) = cluster.results(1, timeout=60, session="s3")
        assert s3.outcome == "written" and s3.revision, s3
        wait_for(lambda: placement.replica_of("w0").sent == _head(h1_w0), 30, "h1 to send its last commit")
        assert _tree(h1_w0, _head(h1_w0)) == s3.revision, "the commit sent is s3's install"
        assert _tree(replica, _head(replica)) != s3.revision
        cluster.stop_worker("h1")
        for key in cluster.redis.scan_iter(match="scriptorium:replica:w0:*"):
            cluster.redis.delete(key)
        written["s4"] = cluster.session("s4", 2, workspace="w0")
        publisher.session_idle("w0", "s4")  # waits in h1's queue: h1 holds w0
        cluster.start_worker("h2", SCRIPTORIUM_STATE=str(hosts["h2"]), SCRIPTORIUM_WORKER_HOST="h2", **INSTANT)
        placement.heartbeat("h1", now=1.0)  # h1's last heartbeat ages out (30 s) at once
        done = _move(cluster, "w0", "h2", "--from-replica")
        assert done.returncode == 0, done.stderr
        figures = json.loads(done.stdout)
        assert figures["from_replica"] is True and figures["rewritten_sessions"] == 1, figures
        assert all(r.ok for r in cluster.results(1, timeout=60)), "s3, written again on h2"
        cluster.start_worker("h1", SCRIPTORIUM_STATE=str(hosts["h1"]), SCRIPTORIUM_WORKER_HOST="h1", **INSTANT)
        assert all(r.ok for r in cluster.results(1, timeout=60)), "s4, forwarded from h1's queue to h2"
    finally:
        publisher.close()
    h2_w0 = hosts["h2"] / "workspaces" / "w0" / "memory"
    content = [(sid, node) for sid, ids in written.items() for node in ids]
    counts = exactly_once(h2_w0, cluster.store, content)
    assert counts == {"turns": len(content), "lost": 0, "duplicated": 0, "unmarked": 0, "partial_installs": 0}
    assert placement.placed() == {"w0": "h2"}
    wait_for(lambda: not h1_w0.exists(), 30, "h1, back, to put its old copy aside")
    wait_for(lambda: _replicated(placement, "w0", h2_w0), 60, "the new replica, on h1, to catch up")
    assert placement.replica_of("w0").host == "h1"
    assert _head(hosts["h1"] / "replicas" / "w0" / "memory") == _head(h2_w0)


def test_sends_made_while_the_replica_is_away_coalesce_and_it_catches_up_when_back(cluster: Cluster) -> None:
    """With one send in flight (the replica host is down), later passes send nothing; back, the replica
    applies the send it has and asks its holder for the rest, and ends equal to the workspace. (Each pass
    asks for its send at once here: the interval of the test below would carry them in one.)"""
    placement, hosts = _two_hosts(cluster, ["w0"])
    memory = hosts["h1"] / "workspaces" / "w0" / "memory"
    publisher = Publisher(cluster.server.url)
    try:
        cluster.stop_worker("h2")
        for n in range(3):
            cluster.session(f"s{n}", 2, workspace="w0")
            publisher.session_idle("w0", f"s{n}")
            assert all(r.ok for r in cluster.results(1, timeout=60))
        # The newest commit waits for the send in flight (noted just after the pass's result is published).
        wait_for(lambda: placement.replica_of("w0").head == _head(memory), 30, "the holder to note its head")
        record = placement.replica_of("w0")
        assert record is not None and record.applied == "" and record.sent != _head(memory)
        cluster.start_worker("h2", SCRIPTORIUM_STATE=str(hosts["h2"]), SCRIPTORIUM_WORKER_HOST="h2", **INSTANT)
        wait_for(lambda: _replicated(placement, "w0", memory), 60, "the replica to catch up")
    finally:
        publisher.close()
    assert _head(hosts["h2"] / "replicas" / "w0" / "memory") == _head(memory)
    assert cluster.log("h1").count("replica.sent") == 2, "one send, then the rest in one more"


def test_passes_within_one_send_interval_go_to_the_replica_with_the_first_pass_after_it(cluster: Cluster) -> None:
    """The first pass is sent at once; the three that follow within ``SCRIPTORIUM_REPLICA_SEND_INTERVAL_S``
    send nothing (the replica shows behind, with the holder's newest commit); the first pass after the
    interval sends every commit since in one send, and the replica ends equal."""
    interval = 4.0
    placement, hosts = _two_hosts(cluster, ["w0"], SCRIPTORIUM_REPLICA_SEND_INTERVAL_S=str(interval))
    memory = hosts["h1"] / "workspaces" / "w0" / "memory"
    publisher = Publisher(cluster.server.url)

    def one_pass(sid: str) -> None:
        cluster.session(sid, 2, workspace="w0")
        publisher.session_idle("w0", sid)
        assert all(r.ok for r in cluster.results(1, timeout=60))

    try:
        one_pass("s0")
        wait_for(lambda: _replicated(placement, "w0", memory), 30, "the first pass, sent at once")
        first = placement.replica_of("w0")
        assert first is not None
        for n in range(1, 4):  # spaced: sent one by one, each would be applied before the next pass
            one_pass(f"s{n}")
            time.sleep(0.3)
        assert time.time() - first.sent_at < interval, "the passes took longer than the interval"
        wait_for(lambda: placement.replica_of("w0").head == _head(memory), 10, "the holder to note its head")
        record = placement.replica_of("w0")
        assert record is not None and record.behind and record.sent == first.sent, "sent within the interval"
        time.sleep(max(0.0, first.sent_at + interval - time.time()))
        one_pass("s4")
        wait_for(lambda: _replicated(placement, "w0", memory), 60, "the replica to catch up")
    finally:
        publisher.close()
    assert _head(hosts["h2"] / "replicas" / "w0" / "memory") == _head(memory)
    assert cluster.log("h1").count("replica.sent") == 2, "the interval's passes went in more than one send"
