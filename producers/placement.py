"""Which worker host holds each workspace, when the cluster has several: the placement record in Redis.

Each worker host keeps the workspaces placed on it on its own disk and consumes its own queue
(:func:`queue_of`, ``scriptorium.host.<host>``) besides the shared ``celery`` queue, which carries the work
that needs no workspace (the sweep, pings). A worker started with ``SCRIPTORIUM_HOST`` registers its host
and beats every :data:`HEARTBEAT_S`; a host unheard of for :data:`HOST_TTL_S` is not live. Every sender —
the publisher, the hooks in cluster mode, the beat, a worker's retries and hand-overs — routes a
workspace's tasks by the record (:func:`router`, installed as Celery's ``task_routes``):

* a placed workspace's tasks go to its host's queue, whether that host is live or not: they wait in its
  durable queue until it returns or an operator moves the workspace;
* an unplaced one is placed on the live host holding the fewest workspaces (ties: by name), with
  ``HSETNX``: publishers racing to place it agree on the first;
* with no host registered at all, nothing is placed and every task takes the shared queue: the
  single-host cluster, as before.

Keys (under ``SCRIPTORIUM_REDIS_PREFIX``): ``placement`` (hash: workspace → host) and ``hosts`` (hash:
host → last heartbeat, Unix seconds). The per-workspace fenced lock stays the guard against two holders.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any

import redis

HOST_QUEUE_PREFIX = "scriptorium.host."
SHARED_QUEUE = "celery"
"""Celery's default queue: the work no workspace owns."""
HEARTBEAT_S = 5.0
HOST_TTL_S = 30.0
"""A host whose last heartbeat is older than this is not live: nothing new is placed on it."""
ROUTED_TASKS = frozenset(
    {"scriptorium.write", "scriptorium.reorganize", "scriptorium.backfill", "scriptorium.handover_check"}
)
"""The tasks that run on one workspace (their first argument names it)."""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def queue_of(host: str) -> str:
    """The queue a worker host consumes its workspaces' tasks from."""
    return f"{HOST_QUEUE_PREFIX}{host}"


class Placement:
    """The placement record of one cluster (one Redis, one key prefix)."""

    def __init__(self, client: redis.Redis, prefix: str = "scriptorium:") -> None:
        self.client = client
        self.placed_key = f"{prefix}placement"
        self.hosts_key = f"{prefix}hosts"

    def host_of(self, workspace: str) -> str | None:
        found = self.client.hget(self.placed_key, workspace)
        return None if found is None else _text(found)

    def placed(self) -> dict[str, str]:
        """Every workspace → its host."""
        return {_text(k): _text(v) for k, v in self.client.hgetall(self.placed_key).items()}

    def hosts(self) -> dict[str, float]:
        """Every registered host → its last heartbeat (Unix seconds)."""
        return {_text(k): float(v) for k, v in self.client.hgetall(self.hosts_key).items()}

    def live_hosts(self, now: float | None = None) -> list[str]:
        now = time.time() if now is None else now
        return sorted(host for host, seen in self.hosts().items() if now - seen <= HOST_TTL_S)

    def heartbeat(self, host: str, now: float | None = None) -> None:
        """``host`` is live (a worker of it runs)."""
        self.client.hset(self.hosts_key, host, time.time() if now is None else now)

    def place(self, workspace: str, host: str | None = None) -> str | None:
        """The host holding ``workspace``: as placed already, else now ``host`` (default: the live host with
        the fewest workspaces); None when it is unplaced and no host is live. First placement wins."""
        found = self.host_of(workspace)
        if found is not None:
            return found
        if host is None:
            live = self.live_hosts()
            if not live:
                return None
            load = {h: 0 for h in live}
            for placed_on in self.placed().values():
                if placed_on in load:
                    load[placed_on] += 1
            host = min(live, key=lambda h: (load[h], h))
        self.client.hsetnx(self.placed_key, workspace, host)
        return self.host_of(workspace)

    def move(self, workspace: str, host: str) -> None:
        """Record ``workspace`` as held by ``host`` (the operator's move, once the copy is verified)."""
        self.client.hset(self.placed_key, workspace, host)

    def route(self, workspace: str) -> str | None:
        """The queue ``workspace``'s tasks go to (None: the shared queue, no host being registered)."""
        if not self.client.exists(self.hosts_key):
            return None
        host = self.place(workspace)
        return queue_of(host) if host is not None else None


@functools.cache
def _placement(url: str, prefix: str) -> Placement:
    return Placement(redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0), prefix)


def router(url: str, prefix: str) -> Any:
    """A Celery router (``task_routes``) sending each workspace's tasks to its host's queue."""

    def route(name: str, args: Any, kwargs: Any, options: Mapping[str, Any], task: Any = None, **kw: Any) -> Any:
        if name not in ROUTED_TASKS or options.get("queue"):
            return None  # not a workspace's, or the sender chose the queue (a forward to the new host)
        payload = args[0] if args else kwargs.get("payload")
        workspace = payload.get("workspace") if isinstance(payload, Mapping) else None
        queue = _placement(url, prefix).route(str(workspace or "default"))
        return {"queue": queue} if queue else None

    return route
