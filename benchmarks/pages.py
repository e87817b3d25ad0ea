"""The Memory page's time to first byte at a year's size.

Builds a workspace of ``--records`` dated records (50 per topic: 75,000 records
make 1,500 topics, every month of 2025 with about 6,250 records, every day
with about 220) over ``--sources`` archived messages, starts ``scriptorium
serve`` on it, signs in and times each page over real HTTP: the first request
after the server started (the snapshot is parsed then), then the median of
``--repeats`` more. The Timeline is timed again after a write another process
made (the server re-reads the snapshot from its parse cache).

The floor: reading one month's own Timeline files (``timeline/2025/2025-12/``)
straight from git, in process.

Prints a table, then one JSON line with ``timeline_ttfb_ms``, ``timeline_bytes``
(the default Timeline, median), ``timeline_first_ms`` (the first request),
``timeline_after_write_ms``, ``floor_ms`` and ``floor_bytes`` (one month's
files), ``pages_max_ms`` and ``pages_max_bytes`` (the slowest and largest page).

Usage: python benchmarks/pages.py [--records N] [--sources N] [--repeats N] [--quick] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workspace_fixture import build_workspace

from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange

ROOT = Path(__file__).resolve().parent.parent
COOKIE = "scriptorium_session"
PAGES = [
    ("timeline (default)", "/memory?section=timeline"),
    ("timeline month", "/memory?section=timeline&item=2025-06"),
    ("timeline day", "/memory?section=timeline&item=2025-06-14"),
    ("timeline year", "/memory?section=timeline&item=2025"),
    ("topics", "/memory?section=topics"),
    ("topic", "/memory?section=topics&item=topics/area-07/topic-00007.md"),
    ("recent", "/memory?section=recent"),
    ("core", "/memory?section=core"),
    ("proposals", "/memory?section=proposals"),
    ("settings", "/memory?section=settings"),
    (
        "source",
        f"/memory?section=sources&item={SourceMessage('bench', 'thread-00003', 'msg-007', 'user', '', '').path}",
    ),
    ("api status", "/api/memory/status"),
    ("api search", "/api/memory/search?q=postgres+redis"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ttfb(client: httpx.Client, path: str) -> tuple[float, int]:
    """(ms to the first byte of the body, the body's size)."""
    started = time.perf_counter()
    with client.stream("GET", path) as response:
        chunks = response.iter_bytes()
        first = next(chunks, b"")
        at = (time.perf_counter() - started) * 1000
        size = len(first) + sum(len(chunk) for chunk in chunks)
        assert response.status_code == 200, (path, response.status_code)
    return at, size


class Serving:
    """``scriptorium serve`` on the state, signed in to the page."""

    def __init__(self, state: Path) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scriptorium.cli.main", "serve", "--state", str(state), "--port", str(self.port)],
            cwd=ROOT,
            env={**os.environ, "SCRIPTORIUM_STATE": str(state)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/openapi.json", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.1)
        token = (state / "owner-token").read_text().strip()
        signed = httpx.post(f"{url}/memory/login", data={"token": token})
        assert signed.status_code == 303, signed.text
        self.client = httpx.Client(
            base_url=url,
            cookies={COOKIE: signed.cookies[COOKIE]},
            headers={"Authorization": f"Bearer {token}"},
            timeout=600,
        )

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(30)


def floor(root: Path, month: str) -> tuple[float, int]:
    """Read one month's own Timeline files from git: (median ms, bytes)."""
    ws = MemoryWorkspace(root)
    tree = ws.revision
    times, size = [], 0
    for _ in range(5):
        ws.git.drop_caches()
        started = time.perf_counter()
        files = ws.git.list_files(tree, f"timeline/{month[:4]}/{month}")
        size = sum(len(ws.git.read_blob(sha)) for sha in files.values())
        times.append((time.perf_counter() - started) * 1000)
    ws.close()
    return statistics.median(times), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=75_000)
    parser.add_argument("--sources", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="5,000 records, for smoke runs")
    parser.add_argument(
        "--smoke", action="store_true", help="500 records, one repeat: that it runs, not its figures (CI)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.records, args.sources, args.repeats = 500, 200, 1
    if args.quick:
        args.records, args.sources, args.repeats = 5_000, 1_000, 3
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory(prefix="scriptorium-pages-") as tmp:
        state = Path(tmp) / "state"
        started = time.perf_counter()
        build_workspace(state / "memory", args.records, args.sources).close()
        setup_s = time.perf_counter() - started
        server = Serving(state)
        rows: list[tuple[str, float, float, int]] = []
        try:
            for label, path in PAGES:
                first, _ = _ttfb(server.client, path)
                runs = [_ttfb(server.client, path) for _ in range(args.repeats)]
                rows.append((label, first, statistics.median(ms for ms, _ in runs), runs[-1][1]))
            # A write from another process: the server finds the revision moved.
            ws = MemoryWorkspace(state / "memory")
            path = "topics/area-01/topic-00001.md"
            text = ws.read_topic(path)
            ws.apply_changes([TopicChange(path, "update", text.replace("Record ", "Record edited ", 1))], message="e")
            ws.close()
            after_write, _ = _ttfb(server.client, "/memory?section=timeline")
        finally:
            server.close()
        floor_ms, floor_bytes = floor(state / "memory", "2025-12")
    print(
        f"{args.records:,} records in {args.records // 50:,} topics, {args.sources:,} sources (setup {setup_s:.0f} s)"
    )
    print(f"{'page':<20} {'first ms':>9} {'median ms':>10} {'bytes':>11}")
    for label, first, median, size in rows:
        print(f"{label:<20} {first:>9.1f} {median:>10.1f} {size:>11,}")
    print(f"{'timeline after write':<20} {after_write:>9.1f}")
    print(f"{'floor: a month files':<20} {'':>9} {floor_ms:>10.1f} {floor_bytes:>11,}")
    timeline = rows[0]
    summary = {
        "records": args.records,
        "topics": args.records // 50,
        "timeline_ttfb_ms": round(timeline[2], 1),
        "timeline_bytes": timeline[3],
        "timeline_first_ms": round(timeline[1], 1),
        "timeline_after_write_ms": round(after_write, 1),
        "floor_ms": round(floor_ms, 1),
        "floor_bytes": floor_bytes,
        "pages_max_ms": round(max(row[2] for row in rows), 1),
        "pages_max_bytes": max(row[3] for row in rows),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
