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
    placement.move("w1", "gone")
    assert placement.route("w1") == queue_of("gone"), "a placed workspace's tasks wait for its host"
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
    assert hosts["gone"]["live"] is False and hosts["gone"]["workspaces"] == ["w1"], hosts
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
