"""The runtime-side publisher: one call per event, from any Python runtime.

It sends Celery task messages (JSON only) carrying the event; it never
carries message bodies — workers reread session storage. The task ID is the
event's ``event_id``.

A broker that does not answer is retried with Celery's publish retry policy
(``RETRY_POLICY``), and every connect and read has a timeout (a quarter of
``budget_s``, 2 s by default), so that a Redis that accepts connections but never
answers (SIGSTOPped, or behind a partition that keeps the socket open) costs a
publish about the budget, as one that refuses does. When it stays down and the
publisher has a spool folder, the event is written there durably (one file per
event, fsynced) and the call returns: a hook never fails, blocks or loses an
event because Redis is down.

Spooled events go out, oldest first, after the next event that the broker
accepts, and on :meth:`Publisher.replay`, which the session watcher calls every
few seconds while the spool holds anything (:mod:`scriptorium.runtimes.hooks.watcher`,
in the hook daemon and ``scriptorium serve``). Each replayer takes a file by
renaming it into ``claimed/`` (atomic): no two send the same event, and a file
another replayer took first is skipped, not an error. A claim whose process died
is put back by the next replay.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import structlog
from celery import Celery

from scriptorium.errors import RedisUnavailable
from scriptorium.fsutil import atomic_write, owner_alive
from scriptorium.producers.placement import router
from scriptorium.schemas.events import (
    TASK_FOR_EVENT,
    AnyEvent,
    BackfillRequested,
    HeadMoved,
    ReorganizeRequested,
    SessionIdle,
    TurnEnded,
    parse_event,
)

log = structlog.get_logger(__name__)

Event = AnyEvent
RETRY_POLICY = {"max_retries": 3, "interval_start": 0.1, "interval_step": 0.2, "interval_max": 0.3}
"""Celery's publish retry: four attempts, then the spool."""
BUDGET_S = 2.0
"""What one publish may cost a hook while the broker does not answer, before the event is spooled."""
CLAIMED = "claimed"


class Publisher:
    """Publishes events to the cluster's broker, spooling them while it is unreachable."""

    def __init__(
        self, broker_url: str, spool: Path | None = None, budget_s: float = BUDGET_S, prefix: str = "scriptorium:"
    ) -> None:
        self.app = Celery("scriptorium-publisher", broker=broker_url)
        # Per connect and per read: the PING kombu sends when it opens a channel waited forever without one.
        per_call = max(budget_s / 4, 0.05)
        self.app.conf.update(
            task_serializer="json",
            accept_content=["json"],
            broker_connection_retry=True,
            broker_connection_timeout=per_call,
            broker_transport_options={
                "socket_timeout": per_call,
                "socket_connect_timeout": per_call,
                "max_retries": RETRY_POLICY["max_retries"],
            },
            # A workspace's events go to the queue of the host that holds it (placement.py).
            task_routes=(router(broker_url, prefix),),
        )
        self.spool = spool

    def _send(self, event: Event) -> str:
        result = self.app.send_task(
            TASK_FOR_EVENT[event.type],
            args=[event.model_dump(mode="json")],
            task_id=event.event_id,
            retry=True,
            retry_policy=RETRY_POLICY,
        )
        return str(result.id)

    def publish(self, event: Event) -> str:
        """Send one event; returns the task ID (the event ID: the key of its result in the result backend).

        Raises ``RedisUnavailable`` when the broker stays down and there is no spool.
        """
        try:
            task_id = self._send(event)
        except Exception as exc:  # kombu raises OperationalError; transports differ in what they wrap
            if self.spool is None:
                raise RedisUnavailable(f"the broker did not take the event: {type(exc).__name__}: {exc}") from exc
            self._keep(event)
            log.warning("publish.spooled", event_id=event.event_id, type=event.type, error=str(exc)[:200])
            return event.event_id
        self.replay()
        return task_id

    def _keep(self, event: Event) -> None:
        assert self.spool is not None
        self.spool.mkdir(parents=True, exist_ok=True)
        # The name sorts by time of spooling, then by ID: replay keeps the order events happened in.
        name = f"{event.occurred_at.strftime('%Y%m%dT%H%M%S%f')}-{event.event_id}.json"
        atomic_write(self.spool / name, event.model_dump_json().encode())

    def spooled(self) -> list[Path]:
        if self.spool is None or not self.spool.is_dir():
            return []
        return sorted(p for p in self.spool.iterdir() if p.suffix == ".json" and p.is_file())

    def replay(self) -> int:
        """Send spooled events, oldest first, each removed once the broker took it. Returns how many went out
        (0 while the broker is still down: the rest stay, in order, for the next replay)."""
        if self.spool is None:
            return 0
        self._put_back_abandoned()
        sent = 0
        for path in self.spooled():
            claimed = self._claim(path)
            if claimed is None:
                continue  # another replayer took it first: it sends it
            try:
                event = parse_event(claimed.read_text(encoding="utf-8"))
            except Exception as exc:  # a torn or foreign file: set aside, never resent, never fatal
                log.error("publish.spool_unreadable", file=path.name, error=str(exc)[:200])
                os.replace(claimed, path.with_suffix(".bad"))
                continue
            try:
                self._send(event)
            except Exception:
                os.replace(claimed, path)  # still down: back in the spool, in its place
                break
            claimed.unlink()
            sent += 1
        if sent:
            log.info("publish.replayed", events=sent)
        return sent

    def _claim(self, path: Path) -> Path | None:
        """Take a spooled file for this process (None when another process took it first)."""
        assert self.spool is not None
        folder = self.spool / CLAIMED
        folder.mkdir(exist_ok=True)
        claimed = folder / f"{os.getpid()}.{path.name}"
        try:
            os.rename(path, claimed)
        except FileNotFoundError:
            return None
        return claimed

    def _put_back_abandoned(self) -> None:
        """Return to the spool the files claimed by replayers that died before sending them."""
        assert self.spool is not None
        folder = self.spool / CLAIMED
        if not folder.is_dir():
            return
        for claimed in folder.iterdir():
            name = claimed.name.partition(".")[2]
            if name and not owner_alive(claimed.name):
                with contextlib.suppress(FileNotFoundError):  # another replay put it back first
                    os.rename(claimed, self.spool / name)

    def turn_ended(self, workspace: str, session_id: str) -> str:
        return self.publish(TurnEnded(workspace=workspace, session_id=session_id))

    def session_idle(self, workspace: str, session_id: str) -> str:
        return self.publish(SessionIdle(workspace=workspace, session_id=session_id))

    def head_moved(self, workspace: str, session_id: str, left: str | None = None, head: str | None = None) -> str:
        return self.publish(HeadMoved(workspace=workspace, session_id=session_id, left=left, head=head))

    def reorganize(self, workspace: str) -> str:
        return self.publish(ReorganizeRequested(workspace=workspace))

    def backfill(self, workspace: str) -> str:
        return self.publish(BackfillRequested(workspace=workspace))

    def close(self) -> None:
        self.app.close()
