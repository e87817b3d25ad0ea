"""A requester's storage quota: the bytes its tokens may add per day (UTC).

A ``write`` token's change is applied with no owner's decision, and everything it commits stays in git
history; a ``runtime`` token's session nodes stay in the session store. Each is bounded per requester
(per token, for a token made without one) and per day:

* a ``write`` token pays the bytes of every file its change puts in the tree — the topic files as
  rewritten, the archived request and sources, the derived views — as measured on the validated plan
  (:class:`~scriptorium.access.guard.RequesterGuard`), before anything is installed; a dry run pays
  nothing, and a change that fails after the check is refunded;
* a ``runtime`` token pays the bytes of the nodes it posts (content, metadata, names), before they are
  stored (the nodes route: :func:`runtime_quota`, :func:`nodes_size`).

The owner is never counted, nor is a ``propose`` token: its held changes are bounded by the hold queue's
own limits, and reach the memory only by the owner's decision. Over the quota a request is refused with
``QUOTA_EXCEEDED`` (HTTP 429) and nothing is stored; the count starts again at 00:00 UTC.

The ledger is one small file per requester and scope in a ``quota/`` folder beside what it bounds (the
workspace's runtime folder for changes, the state folder for session nodes), holding the day and the bytes
counted that day, rewritten atomically under a file lock: it survives restarts, every process serving the
same state shares it, a request costs one read and one write of it, and it never grows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from scriptorium.audience import Principal
from scriptorium.errors import InvalidArgument, QuotaExceeded, ReasonCode
from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.workspace.lock import FileLock
from scriptorium.workspace.paths import RUNTIME_DIR

if TYPE_CHECKING:
    from scriptorium.workspace import MemoryWorkspace

QUOTA_DIR = "quota"
ENTRY_VERSION = 1
"""A quota entry's layout (:mod:`scriptorium.formats`): one a newer release wrote is refused, not reset."""
LOCK_TIMEOUT_S = 10.0
"""The ledger lock is held for one read and one write; waiting longer means something is wrong."""


def today() -> str:
    return datetime.now(UTC).date().isoformat()


@dataclass(frozen=True, slots=True)
class Charge:
    """What one request was counted (to refund it when the request fails after the check)."""

    key: str
    day: str
    size: int


class StorageQuota:
    """One scope's daily byte quota, kept in ``folder`` (see the module docs); ``limit`` 0: no quota."""

    def __init__(self, folder: Path, scope: str, limit: int, clock: Callable[[], str] = today) -> None:
        self.folder = folder
        self.scope = scope
        self.limit = limit
        self.clock = clock
        self._lock = FileLock(folder / "quota.lock")

    def key(self, principal: Principal) -> str:
        who = principal.requester or f"token-{principal.token_id or 'unknown'}"
        return f"{self.scope}.{who}"

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}.json"

    def _read(self, key: str) -> tuple[str, int]:
        try:
            path = self._path(key)
            entry = read_versioned(json.loads(path.read_bytes()), ENTRY_VERSION, str(path))
            return str(entry["day"]), int(entry["bytes"])
        except FileNotFoundError:
            return "", 0
        except (OSError, ValueError, KeyError, TypeError, InvalidArgument):
            return "", 0  # a torn or foreign file counts as a fresh day; the next charge rewrites it

    def used(self, principal: Principal) -> int:
        """The bytes ``principal`` was counted today."""
        day, used = self._read(self.key(principal))
        return used if day == self.clock() else 0

    def charge(self, principal: Principal, size: int) -> Charge | None:
        """Count ``size`` bytes for ``principal``, or refuse (QUOTA_EXCEEDED) when they would pass today's
        limit; None when nothing is counted (the owner, another scope, no limit)."""
        if principal.scope != self.scope or self.limit <= 0:
            return None
        key = self.key(principal)
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._lock.hold(timeout=LOCK_TIMEOUT_S):
            now = self.clock()
            day, used = self._read(key)
            used = used if day == now else 0
            if used + size > self.limit:
                raise QuotaExceeded(
                    f"{principal.name} may store {self.limit} bytes a day; {used} are used today and this "
                    f"request needs {size}",
                    reason=ReasonCode.QUOTA_EXCEEDED,
                    guidance="Wait for the next day (00:00 UTC), or send less; the owner sets the quota "
                    f"(SCRIPTORIUM_{self.scope.upper()}_QUOTA_BYTES).",
                )
            atomic_write(self._path(key), _entry(now, used + size))
        return Charge(key, now, size)

    def refund(self, charge: Charge | None) -> None:
        """Take back what a request that failed after its charge was counted (the same day only)."""
        if charge is None:
            return
        with self._lock.hold(timeout=LOCK_TIMEOUT_S):
            day, used = self._read(charge.key)
            if day == charge.day:
                atomic_write(self._path(charge.key), _entry(day, max(0, used - charge.size)))


def _entry(day: str, used: int) -> bytes:
    return json.dumps(versioned({"day": day, "bytes": used}, ENTRY_VERSION)).encode()


def write_quota(ws: MemoryWorkspace) -> StorageQuota:
    """The ``write`` quota of ``ws`` (its limit from the workspace's configuration), kept in its runtime
    folder."""
    return StorageQuota(ws.root / RUNTIME_DIR / QUOTA_DIR, "write", ws.config.write_quota_bytes)


def runtime_quota(state: Path, limit: int) -> StorageQuota:
    """The ``runtime`` quota of the session store in the state folder ``state``, kept there."""
    return StorageQuota(state / QUOTA_DIR, "runtime", limit)


def nodes_size(contents: Iterable[str]) -> int:
    """The bytes a batch of nodes asks the session store to keep: its strings (content, metadata, names,
    title), as the edge that parsed the batch lists them."""
    return sum(len(text.encode()) for text in contents)
