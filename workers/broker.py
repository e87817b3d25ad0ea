"""The Redis transport the workers use: kombu's, with what it lacks when Redis drops under a worker.

A worker holds messages it has taken but not acknowledged: the passes it runs, and the countdown tasks
(retries, hand-over checks) waiting in its timer. When the connection to Redis drops, Celery drops the
waiting ones from memory and closes the broken connection, and kombu tries to put them back on the queue
while Redis is still down. Two things then go wrong in kombu 5.7 / Celery 5.7 (the family of
celery#8030, celery#10205 and celery#10302, open in some form for years):

- Celery collects the connection before closing it, so the channel's later close finds no connection
  parameters (``'NoneType' object has no attribute 'hostname'``): the main process logs ``Unrecoverable
  error`` and exits, with the messages left for the visibility timeout.
- Even when the close goes through, the put-back fails (Redis is down) and is never tried again: the
  messages wait in Redis's unacknowledged hash for the visibility timeout (the hard time limit plus the
  longest retry delay: minutes).

Here a channel keeps its connection parameters, so a late close or acknowledgement reconnects instead of
crashing. A put-back that fails is kept, and the next channel this process opens (the consumer's,
once Redis answers again) puts those messages back on the queue at once. Messages whose task is still
running stay out of that: the running task acknowledges its own when it ends.
"""

from __future__ import annotations

import threading
from typing import Any

import structlog
from celery.worker import state as worker_state
from kombu.transport import redis as kombu_redis
from redis.exceptions import ConnectionError as RedisConnectionError

log = structlog.get_logger(__name__)

_stranded: list[Any] = []
"""QoS objects of closed channels whose messages could not be put back (kept per process)."""
_stranded_lock = threading.Lock()


def stranded_count() -> int:
    """Messages this process still has to put back (the health figures and the tests read it)."""
    with _stranded_lock:
        for qos in _stranded:
            qos._flush()  # an acknowledgement only marks its tag: drop those first
        return sum(len(qos._delivered) for qos in _stranded)


class QoS(kombu_redis.QoS):
    def restore_unacked_once(self, stderr: Any = None) -> None:
        """Put back what this channel holds at close; what cannot go back now goes back at reconnect."""
        try:
            super().restore_unacked_once(stderr)  # type: ignore[no-untyped-call]
        except (*self.channel.connection.connection_errors, RedisConnectionError, OSError) as exc:
            if self._delivered:
                with _stranded_lock:
                    _stranded.append(self)
                log.warning("broker.restore_deferred", messages=len(self._delivered), error=str(exc))


class Channel(kombu_redis.Channel):
    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._kept_params: dict[bool, dict[str, Any]] = {}
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]  # connects and pings Redis
        self._restore_stranded()

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:  # the connection was collected (after a broker error)
            kept = self._kept_params.get(asynchronous)
            if kept is None:
                raise RedisConnectionError("the broker connection is closed")
            return dict(kept)
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)  # type: ignore[no-untyped-call]
        self._kept_params[asynchronous] = dict(params)
        return params

    def _restore_stranded(self) -> None:
        running = {r.message.delivery_tag for r in tuple(worker_state.active_requests) if r.message is not None}
        with _stranded_lock:
            pending = list(_stranded)
        restored = 0
        for qos in pending:
            qos._flush()  # an acknowledgement only marks its tag: drop those first
            for tag in [t for t in list(qos._delivered) if t not in running]:
                # From the shared unacknowledged hash: a message already acknowledged or put back
                # by another worker is no longer there, and nothing is queued twice.
                self.qos.restore_by_tag(tag, client=self.client)
                qos._delivered.pop(tag, None)
                restored += 1
            if not qos._delivered:
                with _stranded_lock:
                    _stranded.remove(qos)
        if restored:
            log.info("broker.restored_at_reconnect", messages=restored)


class Transport(kombu_redis.Transport):
    Channel = Channel
