"""The run's closing note: the summed time of each group of tests, by folder and by what they need.

Under pytest-xdist the workers send every report to the controller, which sums them here; the sums are test
time (setup, call and teardown), so beside the wall time they show how much the workers ran at once.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from tests.requirements import MARKERS

_started = time.monotonic()
_seconds: defaultdict[str, float] = defaultdict(float)
_tests: defaultdict[str, int] = defaultdict(int)


def group_of(nodeid: str) -> str:
    """``tests/cluster`` for a test in tests/cluster/…, ``tests`` for one directly in tests/."""
    parts = nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    groups = [group_of(report.nodeid), *(f"-m {name}" for name in MARKERS if name in report.keywords)]
    for group in groups:
        _seconds[group] += report.duration
        _tests[group] += report.when == "call" or (report.when == "setup" and not report.passed)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not _seconds:
        return
    wall = time.monotonic() - _started
    folders = sorted(g for g in _seconds if not g.startswith("-m "))
    total = sum(_seconds[g] for g in folders)
    terminalreporter.write_sep("=", "time per group (summed test time)")
    for group in [*folders, *(g for g in _seconds if g.startswith("-m "))]:
        terminalreporter.write_line(f"{group:<22} {_tests[group]:>5} tests {_seconds[group]:>8.1f} s")
    terminalreporter.write_line(f"{'all':<22} {sum(_tests[g] for g in folders):>5} tests {total:>8.1f} s")
    workers = getattr(config.option, "numprocesses", None) or 1
    terminalreporter.write_line(
        f"wall {wall:.1f} s on {workers} worker(s): test time / wall = {total / wall if wall else 0:.2f}"
    )
