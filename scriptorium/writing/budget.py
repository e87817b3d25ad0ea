"""The daily budget of a writer that costs money: its runs, and the tokens its model reports, per UTC day.

The LLM writer and the agent-CLI writers count what they spend in their
:class:`~scriptorium.writer_interface.Usage`; the verbatim writer has none and is never charged or capped.
Before a costly writer runs a batch (or the nightly organize) the pass asks :meth:`WriterBudget.check`:
once the day's runs or tokens reach their cap (``SCRIPTORIUM_WRITER_DAILY_RUNS``,
``SCRIPTORIUM_WRITER_DAILY_TOKENS``; 0: no cap) it raises ``WRITER_BUDGET_SPENT`` (retryable: the batch is
not archived, nothing is written or marked, and the pass is tried again later), unless the user chose
``SCRIPTORIUM_WRITER_OVER_BUDGET=verbatim``, when the verbatim writer writes that batch instead. After a
run, what its writer's usage grew by is charged. A run that starts under the cap finishes: a day can end one
run's worth over it.

The ledger is one small file in the workspace's runtime folder (``.scriptorium/writer-budget.json``): the
UTC day and what was spent that day, rewritten atomically under a file lock, so processes that write the
same workspace share it and lose no charge; a new day starts from nothing. It never grows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scriptorium.defaults import DEFAULT_WRITER_DAILY_RUNS, DEFAULT_WRITER_DAILY_TOKENS
from scriptorium.errors import BudgetSpent, InvalidArgument
from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.workspace.lock import FileLock

BUDGET_FILE = "writer-budget.json"
BUDGET_LOCK = "writer-budget.lock"
BUDGET_VERSION = 1
"""The ledger's layout (:mod:`scriptorium.formats`): one a newer release wrote is refused, not reset."""
LOCK_TIMEOUT_S = 10.0
"""The ledger's lock is held for one read and one write; waiting longer means something is wrong."""


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """The caps of one UTC day (0: no cap)."""

    runs: int = DEFAULT_WRITER_DAILY_RUNS
    tokens: int = DEFAULT_WRITER_DAILY_TOKENS


@dataclass(frozen=True, slots=True)
class Spend:
    """What costly writers spent on one UTC day."""

    day: str
    runs: int = 0
    tokens: int = 0


class WriterBudget:
    """One workspace's ledger (``runtime_dir``: its ``.scriptorium/``) against ``limits``; ``clock`` gives
    POSIX seconds (the day is the UTC day of it)."""

    def __init__(self, runtime_dir: Path, limits: BudgetLimits, clock: Callable[[], float] = time.time) -> None:
        self.path = runtime_dir / BUDGET_FILE
        self.limits = limits
        self.clock = clock
        self._lock = FileLock(runtime_dir / BUDGET_LOCK)

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def _read(self) -> Spend:
        try:
            entry = read_versioned(json.loads(self.path.read_bytes()), BUDGET_VERSION, str(self.path))
            return Spend(str(entry["day"]), int(entry["runs"]), int(entry["tokens"]))
        except FileNotFoundError:
            return Spend("")
        except (OSError, ValueError, KeyError, TypeError, InvalidArgument):
            return Spend("")  # not a ledger this release wrote whole: the day starts again, the next charge fixes it

    def today(self) -> Spend:
        """What was spent today (UTC); a ledger of an earlier day is nothing spent."""
        day = self._now().date().isoformat()
        spend = self._read()
        return spend if spend.day == day else Spend(day)

    def over(self, spend: Spend) -> list[str]:
        """The caps ``spend`` reached (none: some budget is left)."""
        reached = []
        if self.limits.runs > 0 and spend.runs >= self.limits.runs:
            reached.append(f"{spend.runs} of {self.limits.runs} runs")
        if self.limits.tokens > 0 and spend.tokens >= self.limits.tokens:
            reached.append(f"{spend.tokens:,} of {self.limits.tokens:,} tokens")
        return reached

    def check(self) -> None:
        """Raise BudgetSpent (WRITER_BUDGET_SPENT, retryable) when today's budget is spent."""
        spend = self.today()
        reached = self.over(spend)
        if not reached:
            return
        now = self._now()
        midnight = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
        left = int((midnight - now).total_seconds()) // 60
        settings = []
        if self.limits.runs > 0 and spend.runs >= self.limits.runs:
            settings.append("SCRIPTORIUM_WRITER_DAILY_RUNS")
        if self.limits.tokens > 0 and spend.tokens >= self.limits.tokens:
            settings.append("SCRIPTORIUM_WRITER_DAILY_TOKENS")
        raise BudgetSpent(
            f"the writer's budget for {spend.day} (UTC) is spent: {' and '.join(reached)}; the pass waits, "
            "its turns stay pending and nothing is lost",
            guidance=f"Wait for 00:00 UTC (in {left // 60} h {left % 60} min), when the budget starts again; or "
            f"raise {' and '.join(settings)} (0: no cap); or set SCRIPTORIUM_WRITER_OVER_BUDGET=verbatim to have "
            "the verbatim writer write meanwhile. `scriptorium memory status` shows the day's spend.",
        )

    def charge(self, runs: int, tokens: int) -> Spend:
        """Add ``runs`` and ``tokens`` to today's spend (under the ledger's lock: no charge is lost)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock.hold(timeout=LOCK_TIMEOUT_S):
            spend = self.today()
            spend = Spend(spend.day, spend.runs + max(0, runs), spend.tokens + max(0, tokens))
            entry = versioned({"day": spend.day, "runs": spend.runs, "tokens": spend.tokens}, BUDGET_VERSION)
            atomic_write(self.path, json.dumps(entry).encode())
        return spend

    def status(self) -> dict[str, Any]:
        """Today's spend against the caps, for ``memory status``."""
        spend = self.today()
        return {
            "day": spend.day,
            "runs": spend.runs,
            "runs_limit": self.limits.runs,
            "tokens": spend.tokens,
            "tokens_limit": self.limits.tokens,
            "spent": bool(self.over(spend)),
        }
