"""What a task does, kept out of the task bodies: run one pass, map its outcome, publish, mark handled."""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import redis
import structlog
from celery import Task
from celery.exceptions import Reject
from redis.exceptions import RedisError

from scriptorium.composition import make_writer
from scriptorium.errors import InvalidArgument, ReasonCode, ScriptoriumError
from scriptorium.producers.placement import MOVE_WAIT_S, Placement, queue_of
from scriptorium.schemas.events import (
    TASK_FOR_EVENT,
    AnyEvent,
    BackfillRequested,
    HeadMoved,
    IngestEnded,
    ReorganizeRequested,
    SessionIdle,
    TurnEnded,
    parse_event,
)
from scriptorium.sessions import SessionStore, workspace_of
from scriptorium.settings import Settings
from scriptorium.workers.errors import RetriesExhausted, TerminalWriteFailure
from scriptorium.workers.lock import RedisPassLock
from scriptorium.workers.stream import ResultStream
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.staging import sweep_orphans
from scriptorium.writing.outcomes import Failed, NothingDue, Outcome, Pending, Written, outcome_name
from scriptorium.writing.service import WriteService
from scriptorium.writing.watcher import due_sessions, settles

log = structlog.get_logger(__name__)
Event = AnyEvent
STAGING_SWEEP_EVERY_S = 60.0
"""How often a worker process looks for staging folders that dead pool children left (a glob of the temp dir)."""
WRITES = (TurnEnded, SessionIdle, HeadMoved)
DELIVERIES_TTL_S = 7 * 24 * 3600


class WorkerRuntime:
    """Per-process resources, created lazily in each pool child (never inherited across fork)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pid = os.getpid()
        self.send: Callable[..., Any] | None = None
        """How to enqueue a task (the app's ``send_task``; set by each handled task)."""
        self._locks: dict[str, RedisPassLock] = {}
        self._swept_at = 0.0
        self.redis = redis.Redis.from_url(settings.broker_url or "redis://127.0.0.1:6379/0")
        self.stream = ResultStream(self.redis, f"{settings.redis_prefix}ingest_ended")
        self._store: SessionStore | None = None
        self._services: dict[str, WriteService] = {}

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            self._store = self.settings.session_store()
        return self._store

    def service(self, workspace: str) -> WriteService:
        cached = self._services.get(workspace)
        if cached is None:
            s = self.settings
            # Workers serve existing workspaces only: a mistyped name must not create a new one.
            ws = MemoryWorkspace(s.workspace_state(workspace) / "memory", s.workspace_config())
            writer, organizer = make_writer(s)
            lock = RedisPassLock(self.redis, ws, workspace, s.redis_prefix, s.lock_ttl_s, s.lock_timeout)
            self._locks[workspace] = lock
            cached = WriteService(ws, self.store, writer, organizer, s.write_settings(), lock=lock)
            cached.on_handover = lambda payload: run_handed_over(self, workspace, payload)
            self._services[workspace] = cached
        return cached

    def lock(self, workspace: str) -> RedisPassLock:
        self.service(workspace)
        return self._locks[workspace]

    def forget_workspace(self, workspace: str) -> None:
        """Drop what this process holds open of ``workspace`` (its folder was replaced or put aside)."""
        self._locks.pop(workspace, None)
        service = self._services.pop(workspace, None)
        if service is not None:
            service.workspace.close()

    def sweep_staging(self, every_s: float = STAGING_SWEEP_EVERY_S) -> int:
        """Remove orphaned staging folders on this host, at most once per ``every_s`` in this process."""
        now = time.monotonic()
        if now - self._swept_at < every_s:
            return 0
        self._swept_at = now
        found = sweep_orphans()
        if found.removed:
            log.info("staging.orphans_swept", removed=found.removed, live=found.live)
        return found.removed

    def handled_key(self, workspace: str) -> str:
        return f"{self.settings.redis_prefix}handled:{workspace}"


_runtime: WorkerRuntime | None = None


def runtime(settings: Settings) -> WorkerRuntime:
    global _runtime
    if _runtime is None or _runtime.pid != os.getpid():
        _runtime = WorkerRuntime(settings)
    return _runtime


def backoff(retries: int, settings: Settings) -> float:
    """Exponential backoff with full jitter, capped: uniform over [0, min(cap, base * 2**retries)].

    Full jitter (AWS's name), not equal jitter's [ceiling/2, ceiling]: tasks that failed together (a model
    outage) spread over the whole window instead of retrying in its upper half together."""
    ceiling = min(settings.retry_max_delay_s, settings.retry_base_s * 2**retries)
    return random.uniform(0, ceiling)


def handle(task: Task, payload: Any, settings: Settings) -> dict[str, Any]:
    """Run the pass an event asks for and map its outcome to the task's state."""
    try:
        event = parse_event(payload)
    except InvalidArgument as exc:
        log.error("event.rejected", task_id=task.request.id, error=exc.message)
        raise Reject(exc.message, requeue=False) from exc
    rt = runtime(settings)
    rt.send = task.app.send_task
    if settings.worker_host and (elsewhere := _held_elsewhere(task, rt, event.workspace)) is not None:
        # Moved since it was sent (or sent before any host registered): its host runs it, from its disk. While
        # the workspace is being moved, it waits: sent to the new host again a moment later, run by neither.
        host, wait = elsewhere
        task.app.send_task(
            task.name, args=[payload], task_id=task.request.id, queue=queue_of(host), countdown=wait or None
        )
        log.info("task.waits_for_move" if wait else "task.forwarded", workspace=event.workspace, host=host)
        return {"event_id": str(event.event_id), "forwarded_to": host}
    rt.sweep_staging()
    structlog.contextvars.bind_contextvars(
        event_id=event.event_id,
        workspace=event.workspace,
        task_id=task.request.id,
        session_id=getattr(event, "session_id", None),
    )
    try:
        return _handle(task, event, rt)
    finally:
        structlog.contextvars.clear_contextvars()


def _held_elsewhere(task: Task, rt: WorkerRuntime, workspace: str) -> tuple[str, float] | None:
    """Where a task for ``workspace`` goes instead of running here, and after how long: its host, at once,
    when that is not this worker's (an unplaced one is placed here); the move's new host, after
    :data:`MOVE_WAIT_S`, while it is being moved. While Redis does not answer, the task goes back on its
    queue: run here, it could be a disk without it."""
    host = rt.settings.worker_host
    placement = Placement(rt.redis, rt.settings.redis_prefix)
    try:
        moving = placement.moving(workspace)
        holder = placement.place(workspace, host) if moving is None else None
    except RedisError as exc:
        log.warning("task.placement_unknown", workspace=workspace, error=str(exc))
        raise Reject(f"placement unknown: {exc}", requeue=True) from exc
    if moving is not None:
        return moving.target, MOVE_WAIT_S
    return (holder, 0.0) if holder not in (None, host) else None


def _handle(task: Task, event: Event, rt: WorkerRuntime) -> dict[str, Any]:
    settings = rt.settings
    retries = int(task.request.retries or 0)
    # Starts and normal endings of this task (its retries share the task ID): a start that never
    # ended killed its worker. Redeliveries of duplicates are other tasks and do not count.
    deliveries_key = _deliveries_key(settings, str(task.request.id))
    try:
        pipe = rt.redis.pipeline(transaction=False)
        pipe.hincrby(deliveries_key, "started", 1)
        pipe.hget(deliveries_key, "ended")
        pipe.expire(deliveries_key, DELIVERIES_TTL_S)
        started_raw, ended_raw, _ = pipe.execute()
        started_count, ended_count = int(started_raw), int(ended_raw or 0)
    except RedisError:
        started_count, ended_count = 1, 0  # cannot count: run the pass (it is idempotent)
    deaths = started_count - 1 - ended_count
    started = time.perf_counter()
    if deaths >= settings.quarantine_after:
        outcome: Outcome = Failed(ReasonCode.WORKER_LOST, f"its pass killed the worker {deaths} times; quarantined")
    else:
        outcome = _run(event, rt)
        if outcome.reason == ReasonCode.LOCK_HELD and isinstance(event, WRITES):
            if _hand_over(rt, event, str(task.request.id)):
                _ended(rt, deliveries_key)  # kept: a hand-over sent again takes these counts over
                _check_back(rt, event.workspace, str(task.request.id))
                log.info("task.handed_over", reason=str(outcome.reason))
                return {"event_id": str(event.event_id), "handed_over": True}
            outcome = _run(event, rt)  # the holder let go in between: run it now
    timings = {"pass_ms": round((time.perf_counter() - started) * 1000, 3)}
    result = _result(event, outcome, retries + 1, timings)
    log.info("task.outcome", outcome=result.outcome, reason=result.reason, attempts=result.attempts)
    if isinstance(outcome, Pending) and retries < settings.max_retries:
        _ended(rt, deliveries_key)
        try:
            raise task.retry(countdown=backoff(retries, settings), max_retries=settings.max_retries)
        except Reject as exc:
            # Celery rejects without requeue when it cannot publish the retry (the broker is down),
            # which would drop the event. Requeue the message itself instead: while Redis is down the
            # requeue fails too and the message stays unacknowledged, which the worker's transport
            # puts back on the queue as soon as it reconnects (workers/broker.py).
            log.warning("task.retry_unpublished", error=str(exc.reason), reason=str(outcome.reason))
            raise Reject(exc.reason, requeue=True) from exc
    session_id = getattr(event, "session_id", None)
    if session_id is not None and settles(outcome):
        _mark_handled(rt, event.workspace, session_id)
    rt.stream.publish(result, settings.workspace_state(event.workspace) / "memory" / ".scriptorium")
    _forget(rt, deliveries_key)
    if isinstance(outcome, Pending):
        raise RetriesExhausted(f"{outcome.reason}: {outcome.message} (after {retries + 1} attempts)")
    if isinstance(outcome, Failed):
        raise TerminalWriteFailure(f"{outcome.reason}: {outcome.message}")
    return result.model_dump(mode="json")


def _hand_over(rt: WorkerRuntime, event: Event, task_id: str) -> bool:
    """Leave a write that found the workspace lock held to the holder, which runs it before letting go;
    False when the lock is free by now (or Redis cannot say), and the task carries on itself. Each task
    hands over under its own ID: two deliveries of one event are two tasks, and each publishes its result
    (under the event's ID the second would overwrite the first, whose result would never come)."""
    payload = json.dumps({"task_id": task_id, "event": event.model_dump(mode="json")})
    try:
        return rt.lock(event.workspace).hand_over(task_id, payload)
    except RedisError as exc:
        log.warning("task.handover_failed", error=str(exc))
        return False


def _handed(payload: str) -> tuple[str, Event]:
    """A hand-over's task ID and event."""
    handed = json.loads(payload)
    return str(handed["task_id"]), parse_event(handed["event"])


def send_again(rt: WorkerRuntime, payload: str, countdown: float = 0.0) -> None:
    """Queue a handed-over write as a task again. It takes over the first task's delivery counts (a task
    ID is never reused: Celery would take the new run for the old, finished one), so the deliveries that
    killed a worker keep counting toward quarantine across hand-overs."""
    task_id, event = _handed(payload)
    if rt.send is None:
        return
    new_id = str(uuid.uuid4())
    old_key, new_key = _deliveries_key(rt.settings, task_id), _deliveries_key(rt.settings, new_id)
    try:
        counts = {_text(k): int(v) for k, v in rt.redis.hgetall(old_key).items()}
        if counts:
            pipe = rt.redis.pipeline()
            for field, value in counts.items():
                pipe.hset(new_key, field, value)
            pipe.expire(new_key, DELIVERIES_TTL_S)
            pipe.delete(old_key)
            pipe.execute()
    except RedisError as exc:  # the count restarts: quarantine takes longer, nothing is lost
        log.warning("task.deliveries_not_carried", error=str(exc))
    rt.send(TASK_FOR_EVENT[event.type], args=[event.model_dump(mode="json")], task_id=new_id, countdown=countdown)


def _deliveries_key(settings: Settings, task_id: str) -> str:
    return f"{settings.redis_prefix}deliveries:{task_id}"


def _check_back(rt: WorkerRuntime, workspace: str, field: str) -> None:
    """Look again one lock TTL later: by then a live holder has extended its lease; a dead one's expired."""
    if rt.send is not None:
        args = [{"workspace": workspace, "field": field}]
        rt.send("scriptorium.handover_check", args=args, countdown=rt.settings.lock_ttl_s)


def check_handover(rt: WorkerRuntime, workspace: str, field: str) -> str:
    """The waiter's follow-up: ``done`` (the holder ran it), ``waiting`` (held still: look again later),
    or ``reclaimed`` (the holder died first: the write goes back on the queue)."""
    state = rt.lock(workspace).check_handover(field)
    if state is False:
        return "done"
    if state is True:
        _check_back(rt, workspace, field)
        return "waiting"
    send_again(rt, state)
    log.warning("task.handover_reclaimed", task_id=field, workspace=workspace)
    return "reclaimed"


def run_handed_over(rt: WorkerRuntime, workspace: str, payload: str) -> None:
    """The holder's side: run a write handed over to it (the lock still held), publish its result as the
    waiting task would have; a write that is still pending goes back on the queue under its task ID."""
    task_id, event = _handed(payload)
    assert isinstance(event, WRITES)
    started = time.perf_counter()
    service = rt.service(workspace)
    match event:
        case TurnEnded():
            outcome = service.held_write(event.session_id, force=False)
        case SessionIdle():
            outcome = service.held_write(event.session_id, force=True)
        case HeadMoved():
            outcome = service.held_write(event.session_id, force=True, tips=[event.left] if event.left else None)
    if isinstance(outcome, Pending):
        send_again(rt, payload, countdown=rt.settings.retry_base_s)
        return
    result = _result(event, outcome, 1, {"pass_ms": round((time.perf_counter() - started) * 1000, 3)})
    _mark_handled(rt, workspace, event.session_id)
    rt.stream.publish(result, rt.settings.workspace_state(workspace) / "memory" / ".scriptorium")
    _forget(rt, _deliveries_key(rt.settings, task_id))
    log.info("task.handover_ran", event_id=str(event.event_id), outcome=result.outcome)


def _run(event: Event, rt: WorkerRuntime) -> Outcome:
    try:
        return _dispatch(event, rt)
    except ScriptoriumError as exc:
        return Pending(exc.reason, exc.message) if exc.retryable else Failed(exc.reason, exc.message)
    except Exception as exc:  # unclassified: a bug, which a retry would only repeat; not retryable
        log.exception("task.unclassified_error")
        return Failed(ReasonCode.UNCLASSIFIED_ERROR, f"{type(exc).__name__}: {exc}")


def _dispatch(event: Event, rt: WorkerRuntime) -> Outcome:
    service = rt.service(event.workspace)
    match event:
        case TurnEnded():
            return service.write(event.session_id, force=False)
        case SessionIdle():
            return service.write(event.session_id, force=True)
        case HeadMoved():
            return service.write(event.session_id, force=True, tips=[event.left] if event.left else None)
        case ReorganizeRequested():
            return service.reorganize()
        case BackfillRequested():
            return service.backfill()


def _result(event: Event, outcome: Outcome, attempts: int, timings: dict[str, float]) -> IngestEnded:
    return IngestEnded(
        event_id=event.event_id,
        event_type=event.type,
        workspace=event.workspace,
        session_id=getattr(event, "session_id", None),
        ok=outcome.ok,
        outcome=outcome_name(outcome),  # type: ignore[arg-type]
        reason=str(outcome.reason) if outcome.reason else None,
        retryable=outcome.retryable,
        message=getattr(outcome, "message", ""),
        revision=outcome.revision if isinstance(outcome, Written) else None,
        changed_files=list(outcome.changed_files) if isinstance(outcome, Written) else [],
        pending_count=outcome.pending_nodes if isinstance(outcome, Written | NothingDue | Pending | Failed) else 0,
        nodes_written=outcome.nodes_written if isinstance(outcome, Written | Pending | Failed) else 0,
        attempts=attempts,
        timings_ms=timings,
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _ended(rt: WorkerRuntime, key: str) -> None:
    with contextlib.suppress(RedisError):
        rt.redis.hincrby(key, "ended", 1)


def _forget(rt: WorkerRuntime, key: str) -> None:
    with contextlib.suppress(RedisError):
        rt.redis.delete(key)


def _mark_handled(rt: WorkerRuntime, workspace: str, session_id: str) -> None:
    """Remember the session's updated_at as handled; a later turn moves updated_at past it."""
    session = rt.store.get_session(session_id)
    if session is None:
        return
    try:
        rt.redis.hset(rt.handled_key(workspace), session_id, repr(session.updated_at.timestamp()))
    except RedisError as exc:
        log.warning("handled.mark_failed", error=str(exc))


def sweep(rt: WorkerRuntime, send: Any) -> dict[str, int]:
    """The idle watcher and safety net: enqueue forced writes; republish the outbox; trim the stream."""
    s = rt.settings
    now = datetime.now(UTC)
    counts = {"idle": 0, "stale": 0, "republished": 0, "handovers_reclaimed": 0}
    counts["orphans_swept"] = rt.sweep_staging(every_s=0)
    for workspace in s.workspace_names():
        service = rt.service(workspace)
        for payload in rt.lock(workspace).reclaim():  # handed to a holder that died before running it
            send_again(rt, payload)
            counts["handovers_reclaimed"] += 1
        raw = rt.redis.hgetall(rt.handled_key(workspace))
        handled = {_text(k): float(_text(v)) for k, v in raw.items()}
        sessions = [s for s in rt.store.list_sessions() if workspace_of(s) == workspace]
        for due in due_sessions(sessions, handled, now, s.idle_after_s, s.pending_bound_s, service.pending_since):
            counts[due.why] += 1
            event = SessionIdle(workspace=workspace, session_id=due.session_id)
            send(TASK_FOR_EVENT[event.type], event.model_dump(mode="json"))
        try:
            counts["republished"] += rt.stream.flush(service.workspace.root / ".scriptorium" / "outbox.jsonl")
        except RedisError as exc:
            log.warning("sweep.outbox_flush_failed", error=str(exc))
    rt.stream.trim()
    return counts
