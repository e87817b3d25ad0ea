"""Pending content on sessions of 1,000 and 100,000 nodes with 50 unwritten at the head.

The walk goes back from the head and stops at the first marked node, so it
should cost what is unwritten, not what the session holds. Measures, in the
same run:

* ``store``: ``SessionStore.pending`` (one recursive query) on SQLite, and on
  PostgreSQL when it is reachable;
* ``service``: the write pass's selection (the walk, the migration check
  against the installed tree, token counts of the 50 messages).

Prints a table, then one JSON line: ``pending_ms_1k``, ``pending_ms_100k``,
``growth_100k_over_1k`` (SQLite store walk, medians).

Usage: python benchmarks/pending.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scriptorium.sessions import Node, NodeKind, SessionStore, open_store
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.service import WriteService

UNWRITTEN = 50
PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def fill(store: SessionStore, session: str, size: int, workspace_key: str) -> str:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    store.create_session(session, {"provider": "bench"})
    nodes = []
    parent = None
    for i in range(size):
        kind = NodeKind.USER if i % 2 == 0 else NodeKind.ASSISTANT
        node_id = f"n{i:07d}"
        nodes.append(
            Node(
                node_id,
                session,
                parent,
                str(kind),
                kind,
                f"message {i} about the cluster plan",
                t0 + timedelta(seconds=i),
            )
        )
        parent = node_id
    for start in range(0, size, 20_000):
        store.add_nodes(nodes[start : start + 20_000])
    store.set_head(session, parent or "")
    store.mark_written(session, [n.id for n in nodes[: size - UNWRITTEN]], workspace_key, "bench")
    return parent or ""


def timed(fn: object, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def measure(store: SessionStore, label: str, repeats: int, scratch: Path) -> dict[str, float]:
    ws = MemoryWorkspace.init(scratch / f"memory-{label}")
    service = WriteService(ws, store, VerbatimWriter(), OfflineOrganizer())
    row: dict[str, float] = {}
    for size in (1_000, 100_000):
        session = f"bench-{size}-{uuid.uuid4().hex[:6]}"
        head = fill(store, session, size, ws.key)
        assert len(store.pending(session, head, ws.key)) == UNWRITTEN
        row[f"store_{size}"] = timed(lambda s=session, h=head: store.pending(s, h, ws.key), repeats)
        record = store.get_session(session)
        assert record is not None
        assert len(service._pending(record, head)[1]) == UNWRITTEN
        row[f"service_{size}"] = timed(lambda r=record, h=head: service._pending(r, h), repeats)
    ws.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="scriptorium-bench-") as tmp:
        sqlite = open_store(f"sqlite:///{Path(tmp) / 'sessions.db'}")
        rows["sqlite"] = measure(sqlite, "sqlite", args.repeats, Path(tmp))
        sqlite.close()
        prefix = f"bench{uuid.uuid4().hex[:8]}_"
        try:
            pg = open_store(PG_URL, table_prefix=prefix)
        except Exception as exc:  # PostgreSQL is optional here
            print(f"postgresql: skipped ({exc.__class__.__name__})")
        else:
            try:
                rows["postgresql"] = measure(pg, "pg", args.repeats, Path(tmp))
            finally:
                pg.close()
                import psycopg

                with psycopg.connect(PG_URL, autocommit=True) as conn:
                    conn.execute(f"DROP TABLE IF EXISTS {prefix}nodes, {prefix}sessions".encode())
    print(f"{'store':>11} {'what':>8} {'1k ms':>8} {'100k ms':>9} {'100k/1k':>8}")
    for name, row in rows.items():
        for what in ("store", "service"):
            small, large = row[f"{what}_1000"], row[f"{what}_100000"]
            print(f"{name:>11} {what:>8} {small:>8.3f} {large:>9.3f} {large / small:>8.2f}")
    small, large = rows["sqlite"]["store_1000"], rows["sqlite"]["store_100000"]
    print(
        json.dumps(
            {
                "pending_ms_1k": round(small, 4),
                "pending_ms_100k": round(large, 4),
                "growth_100k_over_1k": round(large / small, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
