"""Schemas, the idle sweep, the single scheduler, the publisher CLI and Flower against a real cluster."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime

import pytest
from celery import Celery

from scriptorium.errors import InvalidArgument
from scriptorium.schemas.events import IngestEnded, SessionIdle, TurnEnded, parse_event
from scriptorium.schemas.export import OUT, render
from scriptorium.sessions import Node, NodeKind
from scriptorium.settings import Settings
from scriptorium.workers.app import make_app
from tests.cluster.conftest import ROOT, Cluster, check_exactly_once, free_port, wait_for


def test_the_exported_json_schemas_are_current() -> None:
    for name, text in render().items():
        assert (OUT / name).read_text() == text, f"run `python -m scriptorium.schemas.export` ({name} is stale)"
    schema = json.loads((OUT / "event.schema.json").read_text())
    assert {"turn.ended", "session.idle", "memory.reorganize", "memory.backfill"} <= set(json.dumps(schema).split('"'))


@pytest.mark.parametrize(
    "payload",
    [
        "not json",
        "x" * 20_000,
        {"type": "turn.ended", "workspace": "default"},
        {"type": "turn.ended", "workspace": "default", "session_id": "s", "content": "a message body"},
        {"type": "turn.ended", "workspace": "../etc", "session_id": "s"},
        {"type": "turn.ended", "workspace": "default", "session_id": "s", "schema_version": 2},
        {"type": "memory.unknown", "workspace": "default"},
        ["turn.ended"],
    ],
)
def test_payloads_that_do_not_validate_are_refused(payload: object) -> None:
    with pytest.raises(InvalidArgument):
        parse_event(payload)


def test_events_round_trip_as_json() -> None:
    event = TurnEnded(workspace="team-a", session_id="s1")
    assert parse_event(event.model_dump_json()) == event
    assert IngestEnded(workspace="w", ok=True, outcome="written").schema_version == 1


def test_every_place_celery_reads_the_visibility_timeout_covers_limit_plus_retry() -> None:
    settings = Settings(task_hard_time_limit_s=600, retry_max_delay_s=300)
    app = make_app(settings)
    conf = app.conf
    assert conf.accept_content == ["json"] and conf.task_serializer == "json" and conf.result_accept_content == ["json"]
    assert conf.task_acks_late and conf.task_reject_on_worker_lost and conf.worker_prefetch_multiplier == 1
    for options in (conf.broker_transport_options, conf.result_backend_transport_options):
        assert options["visibility_timeout"] > conf.task_time_limit + settings.retry_max_delay_s
    assert conf.task_soft_time_limit < conf.task_time_limit
    schedule = conf.beat_schedule
    assert schedule["idle-sweep"]["schedule"] == 300
    nightly = schedule["nightly-reorganize"]["schedule"]
    assert nightly.hour == {3} and nightly.minute == {0}


def test_the_sweep_writes_idle_unhandled_and_stale_sessions_only(cluster: Cluster) -> None:
    idle = cluster.session("idle", 3)
    handled = cluster.session("handled", 3)
    cluster.start_worker("w1")
    app = Celery("sweep-client", broker=cluster.server.url)
    app.send_task(
        "scriptorium.write", args=[SessionIdle(workspace="default", session_id="handled").model_dump(mode="json")]
    )
    cluster.results(1, session="handled")
    # A new turn on "handled" moves updated_at forward (not idle yet); "fresh" is new and not idle.
    cluster.store.add_nodes(_turns(cluster, "handled", "handled-x0"), head="handled-x0", updated_at=datetime.now(UTC))
    cluster.store.create_session("fresh", {"provider": "test", "workspace": "default"})
    cluster.store.add_nodes(_turns(cluster, "fresh", "fresh-t0"), head="fresh-t0", updated_at=datetime.now(UTC))
    fresh = ["fresh-t0"]
    app.send_task("scriptorium.sweep")
    result = cluster.results(1, session="idle")[0]
    assert result.ok and result.nodes_written == 3
    time.sleep(2)
    assert check_exactly_once(cluster, {"idle": idle})["lost"] == 0
    ws = cluster.workspace()
    cited = {n.source.message for t in ws.snapshot().topics.values() for n in t.footnotes.values() if n.source}
    ws.close()
    assert "handled-x0" not in cited and not set(fresh) & cited, "sessions active within 30 minutes wait"
    assert set(handled) <= cited
    app.close()


def _turns(cluster: Cluster, sid: str, node_id: str) -> list[Node]:
    """A user turn written just now (so neither idle nor stale)."""
    session = cluster.store.get_session(sid)
    parent = session.head if session else None
    return [Node(node_id, sid, parent, "user", NodeKind.USER, f"{node_id} says something new", datetime.now(UTC))]


def test_only_one_scheduler_may_run(cluster: Cluster) -> None:
    env = {**cluster.env}
    first = subprocess.Popen(
        [sys.executable, "-m", "scriptorium.cli.main", "beat", "--loglevel", "INFO"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: cluster.redis.exists("scriptorium:beat"), 20, "the first scheduler's lease")
        second = subprocess.run(
            [sys.executable, "-m", "scriptorium.cli.main", "beat"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 75 and "LOCK_HELD" in second.stderr
    finally:
        first.terminate()
        first.wait(20)


def test_the_publisher_cli_sends_one_event(cluster: Cluster) -> None:
    turns = cluster.session("cli", 2)
    cluster.start_worker("w1", command=True)  # `scriptorium worker`, as the compose file runs it
    out = subprocess.run(
        [sys.executable, "-m", "scriptorium.cli.main", "publish", "session-idle", "--session", "cli", "--json"],
        cwd=ROOT,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["task_id"]
    (result,) = cluster.results(1, session="cli")
    assert result.ok and check_exactly_once(cluster, {"cli": turns})["lost"] == 0
    missing = subprocess.run(
        [sys.executable, "-m", "scriptorium.cli.main", "publish", "turn-ended"],
        cwd=ROOT,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 3 and "needs --session" in missing.stderr


def test_cluster_commands_refuse_to_run_without_a_broker(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = subprocess.run(
        [sys.executable, "-m", "scriptorium.cli.main", "worker", "--state", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        env={k: v for k, v in __import__("os").environ.items() if k != "SCRIPTORIUM_BROKER_URL"},
    )
    assert out.returncode == 3 and "no broker configured" in out.stderr


def test_flower_works_against_the_cluster(cluster: Cluster) -> None:
    cluster.session("f", 2)
    cluster.start_worker("w1", SCRIPTORIUM_TASK_EVENTS="true")
    port = free_port()
    flower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "scriptorium.workers.app",
            "flower",
            f"--port={port}",
            "--address=127.0.0.1",
            "--basic-auth=ops:secret",
        ],
        cwd=ROOT,
        env=cluster.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def get(path: str) -> str | None:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}{path}",
                headers={"Authorization": "Basic " + base64.b64encode(b"ops:secret").decode()},
            )
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    return response.read().decode()
            except OSError:
                return None

        assert wait_for(lambda: get("/healthcheck"), 30, "flower") == "OK"
        workers = wait_for(
            lambda: (w := get("/api/workers?refresh=1")) and "w1@" in w and w, 30, "flower's worker list"
        )
        assert "scriptorium.write" in workers
        app = Celery("flower-client", broker=cluster.server.url)
        app.send_task(
            "scriptorium.write", args=[SessionIdle(workspace="default", session_id="f").model_dump(mode="json")]
        )
        cluster.results(1, session="f")

        # Task events are off until Flower switches them on (enable_events); ping until it shows a ping
        # done (the write may show first, if events came on while it ran).
        def seen() -> list[dict[str, object]] | None:
            app.send_task("scriptorium.ping")
            listing = get("/api/tasks")
            tasks = list(json.loads(listing).values()) if listing else []
            pings = [t for t in tasks if t.get("name") == "scriptorium.ping" and t.get("state") == "SUCCESS"]
            return pings or None

        pings = wait_for(seen, 60, "a ping in flower's task list", interval=1.0)
        assert str(pings[0]["worker"]).startswith("w1@"), pings[0]
    finally:
        flower.terminate()
        flower.wait(20)


def test_the_nightly_job_reorganizes_every_workspace(cluster: Cluster) -> None:
    from scriptorium.workspace import MemoryWorkspace

    MemoryWorkspace.init(cluster.state / "workspaces" / "team-b" / "memory").close()
    cluster.start_worker("w1")
    app = Celery("nightly-client", broker=cluster.server.url)
    app.send_task("scriptorium.reorganize_all")
    results = cluster.results(2)
    assert sorted(r.workspace for r in results) == ["default", "team-b"]
    assert all(r.ok and r.event_type == "memory.reorganize" for r in results)
    app.close()
