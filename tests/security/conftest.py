"""Fixtures the security tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.daemon import daemon_environment
from tests.helpers.requesters import requesters_template
from tests.requesters_fixtures import World


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[World, dict[str, str]]:
    """The requesters' world and tokens, once per module; each test that changes it serves a copy
    (:func:`tests.helpers.requesters.copy_served`)."""
    return requesters_template(tmp_path_factory)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The hook environment with a hook daemon allowed (:func:`tests.helpers.daemon.daemon_environment`)."""
    with daemon_environment(monkeypatch) as values:
        yield values
