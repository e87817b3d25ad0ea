"""Pending content on sessions of 1,000 and 100,000 nodes with 50 unwritten at the head.

The walk goes back from the head and stops at the first marked node, so it
should cost what is unwritten, not what the session holds. Measures, in the
same run:

* ``store``: ``SessionStore.pending`` (one recursive query) on SQLite, and on
  PostgreSQL when it is reachable;
* ``service``: the write pass's selection (the walk, the migration check
  against the installed tree, token counts of the 50 messages);
* ``floor``: a bare SQL read of the head's row from the same table, on its own
  connection — the least any walk from the head must cost;
* ``walk``: the same recursive walk as bare SQL (50 rows back from the head over
  ``parent_id``, without the marker check) — what the store adds is building nodes.
  Each repeat runs the floors and the store's walk back to back, so machine noise
  hits them alike.

Prints a table, then one JSON line: ``pending_ms_1k``, ``pending_ms_100k``,
``growth_100k_over_1k``, ``floor_ms_100k``, ``walk_floor_ms_100k``,
``ratio_vs_floor_100k``, ``ratio_vs_walk_100k`` (SQLite, medians).

Usage: python benchmarks/pending.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
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
SIZES = (1_000, 100_000)
"""Session sizes in nodes; the JSON keys name them 1k and 100k (``--smoke``: 100 and 1,000, same keys)."""
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


def alternating(calls: list[Callable[[], object]], repeats: int) -> list[float]:
    """Medians of ``calls``, run back to back in each repeat (after one warm-up each)."""
    for call in calls:
        call()
    samples: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for call, out in zip(calls, samples, strict=True):
            t0 = time.perf_counter()
            call()
            out.append((time.perf_counter() - t0) * 1000)
    return [statistics.median(out) for out in samples]


Read = Callable[[str, str], list[object]]
HEAD_ROW = "SELECT * FROM {t} WHERE session_id = {p} AND id = {p}"
# The walk the store runs, as bare SQL: back from the head over parent_id, 50 rows, no marker check.
WALK = (
    "WITH RECURSIVE chain(id, parent_id, depth) AS ("
    " SELECT id, parent_id, 0 FROM {t} WHERE session_id = {p} AND id = {p}"
    " UNION ALL SELECT n.id, n.parent_id, c.depth + 1 FROM chain c"
    f" JOIN {{t}} n ON n.session_id = {{p}} AND n.id = c.parent_id WHERE c.depth < {UNWRITTEN - 1})"
    " SELECT n.* FROM chain c JOIN {t} n ON n.session_id = {p} AND n.id = c.id ORDER BY c.depth DESC"
)


def sqlite_floors(path: Path) -> tuple[Read, Read]:
    conn = sqlite3.connect(path)
    head, walk = HEAD_ROW.format(t="nodes", p="?"), WALK.format(t="nodes", p="?")
    return (
        lambda s, h: conn.execute(head, (s, h)).fetchall(),
        lambda s, h: conn.execute(walk, (s, h, s, s)).fetchall(),
    )


def postgres_floors(prefix: str) -> tuple[Read, Read]:
    import psycopg

    conn = psycopg.connect(PG_URL, autocommit=True, prepare_threshold=None)
    head = HEAD_ROW.format(t=f"{prefix}nodes", p="%s").encode()
    walk = WALK.format(t=f"{prefix}nodes", p="%s").encode()
    return (
        lambda s, h: conn.execute(head, (s, h)).fetchall(),
        lambda s, h: conn.execute(walk, (s, h, s, s)).fetchall(),
    )


def measure(
    store: SessionStore,
    label: str,
    repeats: int,
    scratch: Path,
    floors: tuple[Read, Read],
    sizes: tuple[int, int] = SIZES,
) -> dict[str, float]:
    ws = MemoryWorkspace.init(scratch / f"memory-{label}")
    service = WriteService(ws, store, VerbatimWriter(), OfflineOrganizer())
    row: dict[str, float] = {}
    head_row, walk = floors
    for size in sizes:
        session = f"bench-{size}-{uuid.uuid4().hex[:6]}"
        head = fill(store, session, size, ws.key)
        assert len(store.pending(session, head, ws.key)) == UNWRITTEN
        assert len(head_row(session, head)) == 1 and len(walk(session, head)) == UNWRITTEN
        row[f"floor_{size}"], row[f"walk_{size}"], row[f"store_{size}"] = alternating(
            [
                lambda s=session, h=head: head_row(s, h),
                lambda s=session, h=head: walk(s, h),
                lambda s=session, h=head: store.pending(s, h, ws.key),
            ],
            repeats,
        )
        record = store.get_session(session)
        assert record is not None
        assert len(service.pending.on_branch(record, head)[1]) == UNWRITTEN
        row[f"service_{size}"] = timed(lambda r=record, h=head: service.pending.on_branch(r, h), repeats)
    ws.close()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="100 and 1,000 nodes, 3 repeats: that it runs (CI)")
    args = parser.parse_args()
    sizes = (100, 1_000) if args.smoke else SIZES
    if args.smoke:
        args.repeats = 3
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="scriptorium-bench-") as tmp:
        db = Path(tmp) / "sessions.db"
        sqlite = open_store(f"sqlite:///{db}")
        rows["sqlite"] = measure(sqlite, "sqlite", args.repeats, Path(tmp), sqlite_floors(db), sizes)
        sqlite.close()
        prefix = f"bench{uuid.uuid4().hex[:8]}_"
        try:
            pg = open_store(PG_URL, table_prefix=prefix)
        except Exception as exc:  # PostgreSQL is optional here
            print(f"postgresql: skipped ({exc.__class__.__name__})")
        else:
            try:
                rows["postgresql"] = measure(pg, "pg", args.repeats, Path(tmp), postgres_floors(prefix), sizes)
            finally:
                pg.close()
                import psycopg

                with psycopg.connect(PG_URL, autocommit=True) as conn:
                    tables = f"{prefix}nodes, {prefix}sessions, {prefix}schema_version"
                    conn.execute(f"DROP TABLE IF EXISTS {tables}".encode())
    print(f"sessions of {sizes[0]:,} and {sizes[1]:,} nodes (the keys' 1k and 100k), {UNWRITTEN} unwritten")
    print(f"{'store':>11} {'what':>8} {'1k ms':>8} {'100k ms':>9} {'100k/1k':>8} {'vs floor':>9} {'vs walk':>8}")
    for name, row in rows.items():
        for what in ("floor", "walk", "store", "service"):
            small, large = row[f"{what}_{sizes[0]}"], row[f"{what}_{sizes[1]}"]
            print(
                f"{name:>11} {what:>8} {small:>8.3f} {large:>9.3f} {large / small:>8.2f} "
                f"{large / row[f'floor_{sizes[1]}']:>9.2f} {large / row[f'walk_{sizes[1]}']:>8.2f}"
            )
    sq = rows["sqlite"]
    small, large = sq[f"store_{sizes[0]}"], sq[f"store_{sizes[1]}"]
    print(
        json.dumps(
            {
                "pending_ms_1k": round(small, 4),
                "pending_ms_100k": round(large, 4),
                "growth_100k_over_1k": round(large / small, 3),
                "floor_ms_100k": round(sq[f"floor_{sizes[1]}"], 4),
                "walk_floor_ms_100k": round(sq[f"walk_{sizes[1]}"], 4),
                "ratio_vs_floor_100k": round(large / sq[f"floor_{sizes[1]}"], 3),
                "ratio_vs_walk_100k": round(large / sq[f"walk_{sizes[1]}"], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
