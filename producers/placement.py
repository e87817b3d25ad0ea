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

Moving a workspace (``scriptorium move WORKSPACE HOST``; the worker's side is ``workers/moving.py``): the move
is recorded (``moving``) and the placement flipped to the new host in one step (:meth:`Placement.begin_move`),
so from then on every task for it, wherever it lands, waits — sent again to the new host's queue a moment
later, never run — until the move lands or is rolled back. The two ends are one step each too
(:meth:`Placement.land` on the new host, :meth:`Placement.roll_back` by the operator's command): whichever
comes first wins, so a move either lands or is undone, never both.

Replicas (``workers/replication.py``): each workspace has a second host, chosen like a placement among the
other live hosts, to which its holder sends every new commit; ``scriptorium move WORKSPACE HOST --from-replica``
promotes the replica when the holder is down.

Keys (under ``SCRIPTORIUM_REDIS_PREFIX``): ``placement`` (hash: workspace → host), ``hosts`` (hash: host → last
heartbeat, Unix seconds), ``moving`` (hash: workspace → the move under way, JSON), ``move:<id>`` (hash: one
move's progress) and ``replicas`` (hash: workspace → its replica: host, the commit sent last and the one applied,
JSON). The per-workspace fenced lock stays the guard against two holders.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis

from scriptorium.errors import InvalidArgument, NotFound

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


MOVE_WAIT_S = 1.0
"""How long a task for a workspace being moved waits before it is looked at again (on the new host)."""
MOVE_KEEP_S = 7 * 24 * 3600
"""How long a move's progress record is kept."""

_BEGIN = """
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return {'MOVING', redis.call('HGET', KEYS[2], ARGV[1])} end
local from = redis.call('HGET', KEYS[1], ARGV[1])
if not from then return {'NOT_PLACED', ''} end
if from == ARGV[2] then return {'ALREADY', from} end
local move = cjson.decode(ARGV[3])
move['from'] = from
local record = cjson.encode(move)
redis.call('HSET', KEYS[2], ARGV[1], record)
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[3], 'state', 'moving', 'from', from, 'to', ARGV[2], 'workspace', ARGV[1])
redis.call('EXPIRE', KEYS[3], ARGV[4])
return {'BEGUN', record}
"""
"""Record the move and flip the placement in one step: KEYS placement, moving, move:<id>; ARGV workspace,
host, the move (JSON), the record's TTL."""

_END = """
local found = redis.call('HGET', KEYS[2], ARGV[1])
if not found or cjson.decode(found)['id'] ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
if ARGV[3] == 'rolled_back' then redis.call('HSET', KEYS[1], ARGV[1], cjson.decode(found)['from']) end
redis.call('HSET', KEYS[3], 'state', ARGV[3])
return 1
"""
"""End the move ``ARGV[2]`` of workspace ``ARGV[1]`` as ``ARGV[3]`` (landed, or rolled_back: the placement
goes back) — only if it is still the move under way: 1, else 0 (the other end came first)."""


_MERGE = """
local found = redis.call('HGET', KEYS[1], ARGV[1])
if not found then return 0 end
local record = cjson.decode(found)
for k, v in pairs(cjson.decode(ARGV[2])) do record[k] = v end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(record))
return 1
"""
"""Merge fields into one workspace's JSON record of a hash: KEYS hash; ARGV workspace, the fields (JSON)."""


@dataclass(frozen=True)
class Move:
    """A move under way: its ID, the workspace, the host it leaves and the host it goes to."""

    id: str
    workspace: str
    source: str
    target: str
    started: float
    from_replica: bool = False

    @classmethod
    def parse(cls, workspace: str, raw: bytes | str) -> Move:
        found = json.loads(_text(raw))
        return cls(
            str(found["id"]),
            workspace,
            str(found["from"]),
            str(found["to"]),
            float(found["started"]),
            bool(found.get("from_replica", False)),
        )


@dataclass(frozen=True)
class Replica:
    """Where a workspace's replica is, what its holder sent it last and what it has applied (commit, the
    revision it installs, when)."""

    host: str
    sent: str = ""
    sent_at: float = 0.0
    head: str = ""
    """The holder's newest commit when it did not send it (a send was in flight)."""
    applied: str = ""
    applied_revision: str = ""
    applied_at: float = 0.0

    @property
    def behind(self) -> bool:
        return self.sent != self.applied or bool(self.head and self.head != self.applied)

    def lag_s(self, now: float | None = None) -> float:
        """How long the replica has lacked the newest commit sent (0 when it has it)."""
        if not self.behind:
            return 0.0
        return max(0.0, (time.time() if now is None else now) - self.sent_at)

    def as_json(self) -> str:
        return json.dumps(self.__dict__)

    @classmethod
    def parse(cls, raw: bytes | str) -> Replica:
        return cls(**json.loads(_text(raw)))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def queue_of(host: str) -> str:
    """The queue a worker host consumes its workspaces' tasks from."""
    return f"{HOST_QUEUE_PREFIX}{host}"


class Placement:
    """The placement record of one cluster (one Redis, one key prefix)."""

    def __init__(self, client: redis.Redis, prefix: str = "scriptorium:") -> None:
        self.client = client
        self.prefix = prefix
        self.placed_key = f"{prefix}placement"
        self.hosts_key = f"{prefix}hosts"
        self.moving_key = f"{prefix}moving"
        self.replicas_key = f"{prefix}replicas"

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

    def replica_of(self, workspace: str) -> Replica | None:
        found = self.client.hget(self.replicas_key, workspace)
        return None if found is None else Replica.parse(found)

    def replicas(self) -> dict[str, Replica]:
        return {_text(w): Replica.parse(raw) for w, raw in self.client.hgetall(self.replicas_key).items()}

    def choose_replica(self, workspace: str, holder: str) -> Replica | None:
        """``workspace``'s replica: as chosen already (unless it is its holder now, after a promotion), else
        the live host other than ``holder`` with the fewest replicas; None when no other host is live."""
        found = self.replica_of(workspace)
        if found is not None and found.host != holder:
            return found
        others = [h for h in self.live_hosts() if h != holder]
        if not others:
            return None
        load = {h: 0 for h in others}
        for replica in self.replicas().values():
            if replica.host in load:
                load[replica.host] += 1
        chosen = Replica(min(others, key=lambda h: (load[h], h)))
        if found is None:
            self.client.hsetnx(self.replicas_key, workspace, chosen.as_json())
        else:
            self.client.hset(self.replicas_key, workspace, chosen.as_json())
        return self.replica_of(workspace)

    def note_replica(self, workspace: str, **fields: str | float) -> None:
        """Update what ``workspace``'s replica record says (the holder: ``sent``; the replica: ``applied``)."""
        self.client.eval(_MERGE, 1, self.replicas_key, workspace, json.dumps(fields))

    def progress_key(self, move_id: str) -> str:
        """The hash recording one move's progress (state, figures, why it failed)."""
        return f"{self.prefix}move:{move_id}"

    def begin_move(self, workspace: str, host: str, now: float | None = None, from_replica: bool = False) -> Move:
        """Start moving ``workspace`` to ``host``: recorded as moving and placed there in one step. Refused
        (:class:`NotFound`, :class:`InvalidArgument`) for a workspace no host holds, a host that is not live,
        the host that holds it already, or a workspace already being moved; ``from_replica`` (the holder is
        down: ``host``'s replica becomes the workspace) for a host that is not its replica, or a holder that
        is live."""
        live = self.live_hosts(now)
        if host not in live:
            raise InvalidArgument(f"host {host!r} is not live: start its worker (--worker-host {host}) first")
        if from_replica:
            replica, holder = self.replica_of(workspace), self.host_of(workspace)
            if replica is None or replica.host != host or not replica.applied:
                raise InvalidArgument(f"{host!r} holds no replica of {workspace!r}: move it from its holder instead")
            if holder in live:
                raise InvalidArgument(
                    f"{workspace!r}'s holder {holder!r} is live: move it without --from-replica (nothing is lost)"
                )
        move_id = uuid.uuid4().hex
        started = time.time() if now is None else now
        record = json.dumps({"id": move_id, "to": host, "started": started, "from_replica": from_replica})
        keys = (self.placed_key, self.moving_key, self.progress_key(move_id))
        verdict, detail = (_text(v) for v in self.client.eval(_BEGIN, 3, *keys, workspace, host, record, MOVE_KEEP_S))
        if verdict == "NOT_PLACED":
            raise NotFound(f"workspace {workspace!r} is not placed on any host: nothing to move")
        if verdict == "ALREADY":
            raise InvalidArgument(f"workspace {workspace!r} is held by {host!r} already")
        if verdict == "MOVING":
            under_way = Move.parse(workspace, detail)
            raise InvalidArgument(
                f"workspace {workspace!r} is being moved already ({under_way.source} → {under_way.target}, "
                f"move {under_way.id})"
            )
        return Move.parse(workspace, detail)

    def moving(self, workspace: str) -> Move | None:
        """The move of ``workspace`` under way, if any."""
        found = self.client.hget(self.moving_key, workspace)
        return None if found is None else Move.parse(workspace, found)

    def moves(self) -> list[Move]:
        """Every move under way."""
        return [Move.parse(_text(w), raw) for w, raw in self.client.hgetall(self.moving_key).items()]

    def land(self, move: Move) -> bool:
        """The new host has the workspace: the move ends. False when it was rolled back first."""
        return self._end(move, "landed")

    def roll_back(self, move: Move) -> bool:
        """Undo a move that has not landed: placed back on its old host. False when it landed first."""
        return self._end(move, "rolled_back")

    def _end(self, move: Move, state: str) -> bool:
        keys = (self.placed_key, self.moving_key, self.progress_key(move.id))
        return bool(self.client.eval(_END, 3, *keys, move.workspace, move.id, state))

    def progress(self, move_id: str) -> dict[str, str]:
        return {_text(k): _text(v) for k, v in self.client.hgetall(self.progress_key(move_id)).items()}

    def note_progress(self, move_id: str, **fields: str | int | float) -> None:
        self.client.hset(self.progress_key(move_id), mapping={k: str(v) for k, v in fields.items()})

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
