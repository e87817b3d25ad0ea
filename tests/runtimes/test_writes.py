"""The resident processes' write queue: writes wait for the runtimes to go quiet, a steady stream still
writes, and closing runs what is queued at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from scriptorium.runtimes.hooks import writes
from scriptorium.runtimes.hooks.writes import WriteQueue
from tests.cluster.conftest import wait_for


class Ran:
    """Jobs that note when they ran."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self._lock = threading.Lock()

    def job(self, name: str) -> object:
        def run() -> None:
            with self._lock:
                self.at[name] = time.monotonic()

        return run


def test_queued_writes_start_once_no_hook_came_for_the_settle_time(tmp_path: Path) -> None:
    ran, queue = Ran(), WriteQueue(tmp_path, settle_s=0.4)
    try:
        queue.put(ran.job("stop"))  # type: ignore[arg-type]
        time.sleep(0.25)
        last = time.monotonic()
        queue.put(ran.job("end"))  # type: ignore[arg-type]
        assert not queue.idle(), "a settling write counts as work: a resident process must not end"
        wait_for(lambda: len(ran.at) == 2, 10, "both writes")
        assert ran.at["stop"] >= last + 0.4, "the first write started while hooks were still coming"
        assert ran.at["stop"] <= ran.at["end"], "the writes ran out of order"
        wait_for(queue.idle, 5, "the queue to be idle")
    finally:
        queue.close()


def test_a_steady_stream_of_hooks_still_writes_within_the_longest_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writes, "MAX_SETTLE_S", 0.5)
    ran, queue = Ran(), WriteQueue(tmp_path, settle_s=60)
    try:
        first = time.monotonic()
        queue.put(ran.job("first"))  # type: ignore[arg-type]
        while time.monotonic() - first < 1.5 and "first" not in ran.at:
            queue.put(lambda: None)  # never quiet
            time.sleep(0.05)
        assert "first" in ran.at, "a steady stream of hooks held the write back for good"
        assert first + 0.5 <= ran.at["first"] < first + 1.5
    finally:
        queue.close(timeout=1)


def test_closing_runs_what_is_queued_without_waiting_to_settle(tmp_path: Path) -> None:
    ran, queue = Ran(), WriteQueue(tmp_path, settle_s=60)
    queue.put(ran.job("end"))  # type: ignore[arg-type]
    started = time.monotonic()
    queue.close(timeout=10)
    assert "end" in ran.at, "a write queued at close was dropped"
    assert time.monotonic() - started < 5, "closing waited for the settle time"


def test_after_a_burst_of_writes_the_after_step_runs_once(tmp_path: Path) -> None:
    """The resident processes refresh their recall index after writes: once the queue has run what was
    queued, not once a write."""
    ran, after = Ran(), []
    queue = WriteQueue(tmp_path, settle_s=0.3, after=lambda: after.append(sorted(ran.at)))
    try:
        for name in ("stop", "subagent", "end"):
            queue.put(ran.job(name))  # type: ignore[arg-type]
        wait_for(lambda: after, 10, "the step after the writes")
        wait_for(queue.idle, 5, "the queue to be idle")
        assert after == [["end", "stop", "subagent"]], "run once, after every queued write"
        queue.put(ran.job("later"))  # type: ignore[arg-type]
        wait_for(lambda: len(after) == 2, 10, "the step after the next write")
    finally:
        queue.close()
