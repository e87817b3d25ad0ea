"""Fixtures the runtime tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import trusted_and_pending_world
from tests.helpers.worlds import copied


@pytest.fixture
def state(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace whose core holds a trusted record and a pending-backed one, and a topic of each trust
    (:func:`tests.conftest.trusted_and_pending_world`, built once per session and copied)."""
    return copied(
        "trusted-and-pending",
        lambda folder: trusted_and_pending_world(folder / "memory"),
        tmp_path_factory,
        tmp_path / "state",
    )
