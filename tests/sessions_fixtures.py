"""Session-store fixtures: every store test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scriptorium.sessions import Node, NodeKind, SessionStore, open_store
from tests.requirements import PG_URL, require


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "sqlite":
        opened = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
        yield opened
        opened.close()
        return
    require("postgres")
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    opened = open_store(PG_URL, table_prefix=prefix)
    yield opened
    opened.close()
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {prefix}nodes, {prefix}sessions, {prefix}schema_version".encode())


T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


def chain(
    session: str,
    ids: list[str],
    parent: str | None = None,
    kinds: list[NodeKind] | None = None,
    start: int = 0,
) -> list[Node]:
    """Nodes ``ids`` each following the previous, alternating user/assistant by default."""
    nodes = []
    for offset, node_id in enumerate(ids):
        kind = kinds[offset] if kinds else (NodeKind.USER if (start + offset) % 2 == 0 else NodeKind.ASSISTANT)
        nodes.append(
            Node(
                id=node_id,
                session_id=session,
                parent_id=parent,
                role="assistant" if kind is NodeKind.ASSISTANT else "user",
                kind=kind,
                content=f"{node_id}: the {kind} said something worth keeping about {node_id}",
                created_at=T0 + timedelta(minutes=start + offset),
            )
        )
        parent = node_id
    return nodes
