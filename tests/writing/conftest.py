"""Fixtures the writing tests share (the workspace, ``ws``, is tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scriptorium.sessions import SessionStore, open_store
from tests.sessions_fixtures import T0, chain


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[SessionStore]:
    """A session store holding session ``s1`` ("Trip"): u1, a1, u2, a2, its head a2."""
    opened = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    opened.create_session("s1", {"provider": "test", "title": "Trip"}, created_at=T0)
    opened.add_nodes(chain("s1", ["u1", "a1", "u2", "a2"]), head="a2")
    yield opened
    opened.close()
