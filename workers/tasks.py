"""Celery tasks: thin wrappers — parse the payload, run one core call, map the outcome."""

from __future__ import annotations

from typing import Any

from celery import Task

from scriptorium.producers.placement import Placement
from scriptorium.schemas.events import ReorganizeRequested
from scriptorium.workers import moving, replication
from scriptorium.workers.app import app
from scriptorium.workers.handling import WorkerRuntime, check_handover, handle, runtime, sweep

SETTINGS = app.conf.scriptorium_settings


def _runtime() -> WorkerRuntime:
    """This process's worker runtime, sending follow-up tasks through this app."""
    rt = runtime(SETTINGS)
    rt.send = app.send_task
    return rt


def _replicated(payload: Any, result: dict[str, Any]) -> dict[str, Any]:
    """After a task ran its pass on this host (several worker hosts): the workspace's replica is sent what
    it lacks, shortly (workers/replication.py)."""
    if SETTINGS.worker_host and "forwarded_to" not in result and isinstance(payload, dict):
        replication.send_soon(_runtime(), str(payload.get("workspace") or "default"))
    return result


@app.task(name="scriptorium.write", bind=True)
def write(self: Task, payload: Any) -> dict[str, Any]:
    """turn.ended (force=False), session.idle (force=True) or session.head_moved (the branch left, forced)."""
    return _replicated(payload, handle(self, payload, SETTINGS))


@app.task(name="scriptorium.reorganize", bind=True)
def reorganize(self: Task, payload: Any) -> dict[str, Any]:
    """memory.reorganize: organize one workspace's topics."""
    return _replicated(payload, handle(self, payload, SETTINGS))


@app.task(name="scriptorium.backfill", bind=True)
def backfill(self: Task, payload: Any) -> dict[str, Any]:
    """memory.backfill: write archived sources that no topic cites yet."""
    return _replicated(payload, handle(self, payload, SETTINGS))


@app.task(name="scriptorium.handover_check")
def handover_check(payload: dict[str, str]) -> str:
    """A write handed to the lock's holder, looked at again: done, still waiting, or taken back."""
    rt = _runtime()
    return check_handover(rt, payload["workspace"], payload["field"])


@app.task(name="scriptorium.move_out")
def move_out(payload: dict[str, str]) -> dict[str, Any]:
    """A move's first step, on the host it leaves: pack the workspace under its lock (workers/moving.py)."""
    rt = _runtime()
    return moving.move_out(rt, payload["workspace"], payload["move"])


@app.task(name="scriptorium.move_in")
def move_in(payload: dict[str, str]) -> dict[str, Any]:
    """A move's second step, on the host it goes to: unpack, verify, rename into place, land."""
    rt = _runtime()
    return moving.move_in(rt, payload["workspace"], payload["move"])


@app.task(name="scriptorium.move_retire")
def move_retire(payload: dict[str, str]) -> dict[str, Any]:
    """A move's last step, on the host it left: put that host's copy aside."""
    rt = _runtime()
    return moving.retire(rt, payload["workspace"], payload["move"])


@app.task(name="scriptorium.replicate")
def replicate(payload: dict[str, str]) -> dict[str, Any]:
    """On a workspace's replica host: apply the commits its holder sent."""
    rt = _runtime()
    return replication.apply(rt, payload["workspace"], payload["commit"], payload.get("base", ""))


@app.task(name="scriptorium.replicate_request")
def replicate_request(payload: dict[str, str]) -> str | None:
    """On a workspace's holder: a send is due (after a pass), or its replica applied one and asks for what
    came since."""
    rt = _runtime()
    return replication.send_due(rt, payload["workspace"], now=bool(payload.get("now")))


@app.task(name="scriptorium.move_promote")
def move_promote(payload: dict[str, str]) -> dict[str, Any]:
    """A move from the replica (its holder down), on the replica's host: the replica becomes the workspace."""
    rt = _runtime()
    return replication.promote(rt, payload["workspace"], payload["move"])


@app.task(name="scriptorium.sweep")
def idle_sweep() -> dict[str, int]:
    """Every five minutes: forced writes for idle or stale sessions; outbox; stream trim."""
    rt = _runtime()
    swept = sweep(rt, lambda name, payload: app.send_task(name, args=[payload]))
    placement = Placement(rt.redis, SETTINGS.redis_prefix)
    return {**swept, "replicas_asked": len(replication.catch_up(placement, app.send_task))}


@app.task(name="scriptorium.reorganize_all")
def reorganize_all() -> int:
    """03:00 daily: one reorganize per workspace."""
    names = SETTINGS.workspace_names()
    for name in names:
        app.send_task("scriptorium.reorganize", args=[ReorganizeRequested(workspace=name).model_dump(mode="json")])
    return len(names)


@app.task(name="scriptorium.ping")
def ping() -> str:
    """A no-op round trip: health checks, and the engine's ceiling in benchmarks."""
    return "pong"
