"""``scriptorium serve | worker | beat | publish``: the server and cluster commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scriptorium.cli.output import EXIT_OK, emit
from scriptorium.cli.parser import Declare
from scriptorium.errors import InvalidArgument

if TYPE_CHECKING:  # the handlers import what they run on: the parser loads none of it (issue 56)
    from scriptorium.settings import Settings


def _require_broker(settings: Settings) -> str:
    if not settings.broker_url:
        raise InvalidArgument(
            "no broker configured (SCRIPTORIUM_BROKER_URL): the embedded default runs in-process, "
            "e.g. `scriptorium ingest`"
        )
    return settings.broker_url


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    _require_broker(settings)
    from scriptorium.workers.app import make_app, run_worker

    if args.worker_host:
        from scriptorium.settings import Settings

        settings = Settings.model_validate({**settings.model_dump(), "worker_host": args.worker_host})

    return run_worker(make_app(settings), concurrency=args.concurrency, loglevel=args.loglevel, hostname=args.hostname)


def cmd_beat(args: argparse.Namespace, settings: Settings) -> int:
    import threading

    import redis

    from scriptorium.runtimes.hooks.watcher import replaying
    from scriptorium.workers.app import make_app
    from scriptorium.workers.beat import single_scheduler

    url = _require_broker(settings)
    app = make_app(settings)
    settings.state.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    with single_scheduler(redis.Redis.from_url(url), f"{settings.redis_prefix}beat"):
        replaying(settings, stop)  # events spooled in this state folder go out soon after the broker is back
        try:
            app.start(["beat", "--loglevel", args.loglevel, "--schedule", str(settings.state / "celerybeat-schedule")])
        finally:
            stop.set()
    return EXIT_OK


def cmd_publish(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.producers.publisher import Publisher

    publisher = Publisher(_require_broker(settings), spool=settings.state / "spool", prefix=settings.redis_prefix)
    try:
        if args.event in ("turn-ended", "session-idle", "head-moved") and not args.session:
            raise InvalidArgument(f"{args.event} needs --session")
        task_id = {
            "turn-ended": lambda: publisher.turn_ended(args.workspace, args.session),
            "session-idle": lambda: publisher.session_idle(args.workspace, args.session),
            "head-moved": lambda: publisher.head_moved(args.workspace, args.session, left=args.left),
            "reorganize": lambda: publisher.reorganize(args.workspace),
            "backfill": lambda: publisher.backfill(args.workspace),
        }[args.event]()
        spooled = len(publisher.spooled())
    finally:
        publisher.close()
    human = task_id if not spooled else f"{task_id} ({spooled} event(s) spooled until the broker answers)"
    emit(args, {"task_id": task_id, "spooled": spooled}, human)
    return EXIT_OK


def cmd_placement(args: argparse.Namespace, settings: Settings) -> int:
    """The worker hosts (live or not, by their last heartbeat), the workspaces each holds, each workspace's
    replica and its lag, and the moves under way."""
    import time

    import redis

    from scriptorium.producers.placement import HOST_TTL_S, Placement

    placement = Placement(redis.Redis.from_url(_require_broker(settings)), settings.redis_prefix)
    if args.place:
        workspace, host = args.place
        placement.place(workspace, host)
    hosts, placed, now = placement.hosts(), placement.placed(), time.time()
    by_host: dict[str, list[str]] = {host: [] for host in hosts}
    for workspace, host in sorted(placed.items()):
        by_host.setdefault(host, []).append(workspace)
    rows: dict[str, dict[str, Any]] = {
        host: {
            "live": host in hosts and now - hosts[host] <= HOST_TTL_S,
            "last_heartbeat_s": round(now - hosts[host], 1) if host in hosts else None,
            "workspaces": workspaces,
        }
        for host, workspaces in sorted(by_host.items())
    }
    lines = [
        f"{host:<24} {'live' if row['live'] else 'DOWN':<5} {len(row['workspaces']):>4} workspace(s)  "
        + " ".join(row["workspaces"])
        for host, row in rows.items()
    ]
    replicas = {
        workspace: {
            "host": replica.host,
            "applied": replica.applied or None,
            "sent": replica.sent or None,
            "behind": replica.behind,
            "lag_s": round(replica.lag_s(now), 1),
        }
        for workspace, replica in sorted(placement.replicas().items())
    }
    lines += [
        f"replica of {workspace} on {row['host']}: "
        + (f"behind for {row['lag_s']} s" if row["behind"] else f"up to date at {str(row['applied'])[:12]}")
        for workspace, row in replicas.items()
    ]
    moving = {m.workspace: {"from": m.source, "to": m.target, "move": m.id} for m in placement.moves()}
    lines += [f"moving {w}: {m['from']} → {m['to']} (move {m['move']})" for w, m in moving.items()]
    payload: dict[str, object] = {"hosts": rows, "replicas": replicas, "moving": moving}
    emit(args, payload, "\n".join(lines) or "no worker host registered: one host, the shared queue")
    return EXIT_OK


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.access.owner import owner_token
    from scriptorium.web.serving import serve

    _token, created = owner_token(settings.state)
    if created:  # the token itself never goes to a log: service logs are read by more people than the owner
        print(f"owner token created in {settings.state / 'owner-token'} (0600): read it there", file=sys.stderr)
    if (args.ssl_certfile is None) != (args.ssl_keyfile is None):
        raise InvalidArgument("--ssl-certfile and --ssl-keyfile go together")
    serve(settings, args.host, args.port, args.forwarded_allow_ips, args.ssl_certfile, args.ssl_keyfile)
    return EXIT_OK


def cmd_move(args: argparse.Namespace, settings: Settings) -> int:
    """Move a workspace to another worker host (workers/moving.py): drain, copy, verify, flip, resume."""
    import time

    import redis

    from scriptorium.errors import ReasonCode, ScriptoriumError
    from scriptorium.producers.placement import Placement, queue_of
    from scriptorium.producers.publisher import Publisher

    broker = _require_broker(settings)
    placement = Placement(redis.Redis.from_url(broker), settings.redis_prefix)
    move = placement.begin_move(args.workspace, args.host, from_replica=args.from_replica)
    print(f"moving {move.workspace}: {move.source} → {move.target} (move {move.id})", file=sys.stderr)
    publisher = Publisher(broker, prefix=settings.redis_prefix)
    try:
        payload = {"workspace": move.workspace, "move": move.id}
        if move.from_replica:  # the holder is down: its replica, on the new host, becomes the workspace
            publisher.app.send_task("scriptorium.move_promote", args=[payload], queue=queue_of(move.target))
        else:
            publisher.app.send_task("scriptorium.move_out", args=[payload], queue=queue_of(move.source))
    finally:
        publisher.close()
    deadline, said = time.monotonic() + args.timeout, ""
    progress = placement.progress(move.id)
    while progress.get("state") not in ("landed", "failed") and time.monotonic() < deadline:
        if progress.get("state") == "packed" and said != "packed":
            said = "packed"
            print(f"packed {progress.get('bytes')} bytes at revision {progress.get('revision')}", file=sys.stderr)
        time.sleep(0.05)
        progress = placement.progress(move.id)
    if progress.get("state") != "landed" and placement.roll_back(move):
        why = progress.get("message") or f"not landed within {args.timeout:g} s (is {move.source}'s worker up?)"
        raise ScriptoriumError(
            f"move of {move.workspace} to {move.target} rolled back: {progress.get('reason', 'TIMEOUT')}: {why}; "
            f"it stays on {move.source}",
            reason=ReasonCode.MOVE_FAILED,
        )
    progress = placement.progress(move.id)  # landed (perhaps just as the wait ended)
    figures: dict[str, object] = {
        "workspace": move.workspace,
        "from": move.source,
        "to": move.target,
        "move": move.id,
        "revision": progress.get("revision"),
        "bytes": int(progress.get("bytes", 0)),
        "from_replica": move.from_replica,
        "rewritten_sessions": int(progress.get("rewritten", 0)),
        "move_ms": round((time.time() - move.started) * 1000, 1),
    }
    emit(args, figures, f"{move.workspace} now on {move.target} at revision {figures['revision']}")
    return EXIT_OK


def register(command: Declare) -> None:
    """Add these commands through the CLI's ``command(name, handler, help, arguments)``."""

    def serve(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--host", default="127.0.0.1")
        sub.add_argument("--port", type=int, default=8765)
        sub.add_argument(
            "--forwarded-allow-ips",
            metavar="ADDRESSES",
            default=None,
            help="proxies (comma-separated addresses or networks, or *) whose X-Forwarded-For and X-Forwarded-Proto "
            "are believed: the client's address for per-client limits, https for the Secure cookie "
            "(default $SCRIPTORIUM_FORWARDED_ALLOW_IPS, else none)",
        )
        sub.add_argument("--ssl-certfile", type=Path, default=None, help="serve over TLS with this certificate (PEM)")
        sub.add_argument("--ssl-keyfile", type=Path, default=None, help="the certificate's private key (PEM)")

    command("serve", cmd_serve, "serve the owner REST API at /api/memory (the owner token: <state>/owner-token)", serve)

    def worker(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--concurrency", type=int, default=2, help="pool processes")
        sub.add_argument("--loglevel", default="INFO")
        sub.add_argument("--hostname", default=None, help="worker node name")
        sub.add_argument(
            "--worker-host",
            default=None,
            help="this machine's name among several worker hosts (SCRIPTORIUM_WORKER_HOST): it consumes its own "
            "queue and holds the workspaces placed on it",
        )

    command("worker", cmd_worker, "run a Celery worker for write passes (needs SCRIPTORIUM_BROKER_URL)", worker)
    command(
        "placement",
        cmd_placement,
        "the worker hosts and the workspaces each holds (several worker hosts)",
        lambda sub: sub.add_argument(
            "--place", nargs=2, metavar=("WORKSPACE", "HOST"), help="place a workspace not placed yet on HOST"
        ),
    )

    def move(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("workspace", help="the workspace to move")
        sub.add_argument("host", help="the live worker host to move it to")
        sub.add_argument("--timeout", type=float, default=600.0, help="roll back when not landed by then (s)")
        sub.add_argument(
            "--from-replica",
            action="store_true",
            help="the holder is down: promote HOST's replica (turns it had not received are written again)",
        )

    command(
        "move",
        cmd_move,
        "move a workspace to another worker host: its tasks wait, its folder is copied and verified, then they "
        "run there",
        move,
    )
    command(
        "beat",
        cmd_beat,
        "run the only scheduler: idle sweep every 5 minutes, reorganize at 03:00",
        lambda sub: sub.add_argument("--loglevel", default="INFO"),
    )

    def publish(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("event", choices=["turn-ended", "session-idle", "head-moved", "reorganize", "backfill"])
        sub.add_argument("--workspace", default="default", help="workspace name")
        sub.add_argument("--session", help="session ID (turn-ended, session-idle, head-moved)")
        sub.add_argument("--left", help="head-moved: the tip the head left (default: every tip off its path)")

    command("publish", cmd_publish, "publish one event to the cluster (shell use of the publisher)", publish)
