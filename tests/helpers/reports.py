"""Each test's reports, kept on its item (by ``tests/conftest.py``) so a fixture's teardown can tell whether
the test failed — and then print what only it holds, such as the logs of the processes it started."""

from __future__ import annotations

import pytest

REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()


def failed(item: pytest.Item) -> bool:
    """Whether the test's setup or call failed (read in a fixture's teardown)."""
    return any(report.failed for report in item.stash.get(REPORTS, {}).values())
