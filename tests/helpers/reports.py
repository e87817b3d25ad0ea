"""Each test's reports, kept on its item (by ``tests/conftest.py``) so a fixture's teardown can tell whether
the test failed — and then print what only it holds, such as the logs of the processes it started."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


def failed(item: pytest.Item) -> bool:
    """Whether the test's setup or call failed (read in a fixture's teardown)."""
    return any(report.failed for report in item.stash.get(REPORTS, {}).values())


def show_logs(logs: Iterable[Path], lines: int = 200, flagged: int = 100) -> None:
    """On stderr, each log's warnings and errors before its last ``lines`` (up to ``flagged`` of them), then
    those last lines: a fixture's teardown after a failure, which pytest shows with it — what the test's
    worker processes did is in their logs alone."""
    for log in sorted(logs):
        every = log.read_text(errors="replace").splitlines()
        head, tail = every[:-lines], every[-lines:]
        marked = [line for line in head if _FLAGGED.search(line)][-flagged:]
        if marked:
            sys.stderr.write(f"--- {log.name}: warnings and errors before its end\n" + "\n".join(marked) + "\n")
        sys.stderr.write(f"--- {log.name} (last {len(tail)} lines)\n" + "\n".join(tail) + "\n")


_FLAGGED = re.compile(r"warning|error|exception|traceback", re.IGNORECASE)
