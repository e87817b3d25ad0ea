"""The Celery application (``celery -A scriptorium.workers.app worker``): the composition root of a worker.

Every setting below has its reason in ``ops/README.md``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis
import structlog
from celery import Celery
from celery.schedules import crontab
from celery.signals import worker_ready
from kombu.entity import Queue

from scriptorium.producers.placement import HEARTBEAT_S, SHARED_QUEUE, Placement, queue_of, router
from scriptorium.settings import Settings


def make_app(settings: Settings) -> Celery:
    broker = settings.broker_url or "redis://127.0.0.1:6379/0"
    app = Celery(
        "scriptorium", broker=broker, backend=settings.result_backend or broker, include=["scriptorium.workers.tasks"]
    )
    transport = {
        "visibility_timeout": settings.visibility_timeout_s,
        # Look for messages a dead worker left unacknowledged every interval (throttle 1:
        # the interval alone decides); only those older than the visibility timeout move.
        "unacked_restore_interval": settings.unacked_restore_interval_s,
        "unacked_restore_throttle": 1,
    }
    app.conf.update(
        # kombu's Redis transport, with the put-back of held messages after a broker outage (broker.py).
        broker_transport="scriptorium.workers.broker:Transport",
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        broker_transport_options=transport,
        result_backend_transport_options=transport,
        task_soft_time_limit=settings.task_soft_time_limit_s,
        task_time_limit=settings.task_hard_time_limit_s,
        task_track_started=True,
        result_extended=True,
        result_expires=7 * 24 * 3600,
        # Task events cost every task a few publishes: on for dashboards (Flower), off otherwise.
        worker_send_task_events=settings.task_events,
        task_send_sent_event=settings.task_events,
        broker_connection_retry_on_startup=True,
        timezone=settings.timezone,
        enable_utc=True,
        beat_schedule={
            "idle-sweep": {"task": "scriptorium.sweep", "schedule": settings.sweep_interval_s},
            "nightly-reorganize": {"task": "scriptorium.reorganize_all", "schedule": crontab(hour=3, minute=0)},
        },
    )
    # Several worker hosts: each workspace's tasks go to the queue of the host holding it, and a worker of a
    # host consumes that queue and the shared one (placement.py); one host: the shared queue alone.
    app.conf.task_routes = (router(broker, settings.redis_prefix),)
    if settings.worker_host:
        queues = (SHARED_QUEUE, queue_of(settings.worker_host))
        app.conf.task_queues = tuple(Queue(name) for name in queues)  # type: ignore[no-untyped-call]
    app.conf.scriptorium_settings = settings
    return app


log = structlog.get_logger(__name__)


def run_worker(
    app: Celery, *, concurrency: int, loglevel: str = "INFO", hostname: str | None = None, **features: bool
) -> int:
    """Run a prefork worker of ``app`` in this process until it is stopped (SIGTERM: a warm shutdown), as
    ``celery -A APP worker`` does, and return its exit code. ``features``: ``without_gossip``,
    ``without_mingle``, ``without_heartbeat``. Not through celery's command line, which imports every celery
    subcommand first (``celery.bin.amqp`` alone 0.47 s): 1.47 s of CPU from start to ready and a warm
    shutdown here against 1.86 s."""
    from celery.utils.log import mlevel
    from celery.utils.nodenames import default_nodename, host_format

    worker = app.Worker(
        hostname=host_format(default_nodename(hostname)),  # "name@%h" as the command line expands it
        pool_cls="prefork",
        concurrency=concurrency,
        loglevel=mlevel(loglevel.upper()),
        **features,
    )
    worker.start()
    return int(worker.exitcode or 0)


def beat_host(settings: Settings, stop: threading.Event | None = None) -> threading.Thread:
    """Register this worker's host and keep it live (every :data:`HEARTBEAT_S`) from a daemon thread."""
    placement = Placement(
        redis.Redis.from_url(settings.broker_url or "redis://127.0.0.1:6379/0"), settings.redis_prefix
    )
    halt = stop or threading.Event()

    def loop() -> None:
        while not halt.is_set():
            try:
                placement.heartbeat(settings.worker_host)
            except redis.RedisError as exc:  # the broker is away: beat again when it is back
                log.warning("host.heartbeat_failed", host=settings.worker_host, error=str(exc))
            halt.wait(HEARTBEAT_S)

    thread = threading.Thread(target=loop, name="scriptorium-host-heartbeat", daemon=True)
    thread.start()
    return thread


def _on_worker_ready(sender: Any = None, **_: Any) -> None:
    settings = getattr(getattr(sender, "app", None), "conf", {}).get("scriptorium_settings")
    if isinstance(settings, Settings) and settings.worker_host:
        beat_host(settings)
        log.info("host.ready", host=settings.worker_host, queue=queue_of(settings.worker_host), at=time.time())
        from scriptorium.workers.replication import catch_up

        client = redis.Redis.from_url(settings.broker_url or "redis://127.0.0.1:6379/0")
        try:  # sends this host held when it stopped died with it: its replicas ask for them again
            asked = catch_up(Placement(client, settings.redis_prefix), sender.app.send_task, settings.worker_host)
            if asked:
                log.info("replica.catch_up", workspaces=asked)
        except redis.RedisError as exc:  # the sweep asks later
            log.warning("replica.catch_up_failed", error=str(exc))


worker_ready.connect(_on_worker_ready, weak=False, dispatch_uid="scriptorium-host-heartbeat")


app = make_app(Settings())
