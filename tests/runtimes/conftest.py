"""Fixtures the runtime tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import trusted_and_pending_world
from tests.helpers.daemon import daemon_environment
from tests.helpers.runtime_setup import make_home
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


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The hook environment with a hook daemon allowed (30 s idle), sockets in this test's own folder; the
    daemons stopped after (:func:`tests.helpers.daemon.daemon_environment`)."""
    with daemon_environment(monkeypatch) as values:
        yield values


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home whose Claude Code and Codex hold settings of their own (:func:`tests.helpers.runtime_setup.make_home`)."""
    return make_home(tmp_path)
