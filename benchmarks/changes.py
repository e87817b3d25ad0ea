"""The REST path's overhead: create_record through ``POST /api/memory/changes`` beside the bare transaction.

Builds a 10,000-record workspace (10,000 archived sources) and an identical
copy, starts ``scriptorium serve`` on a free port over the first, then
alternates, 100 times each in the same run:

* ``api``: one single-record ``create_record`` POSTed over real HTTP (keep-alive client),
  parsed, validated, transacted, answered;
* ``bare``: the same change as ``MemoryWorkspace.update(memory_changes=[CreateRecord(…)])``
  in-process on the copy — the workspace transaction alone.

Target: ``api_p50_ms / bare_txn_p50_ms`` ≤ 1.2. Prints a table, then one JSON line
(``api_p50_ms``, ``api_p95_ms``, ``bare_txn_p50_ms``, ``api_overhead_ratio``).

Usage: python benchmarks/changes.py [--records 10000] [--calls 100]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
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

from scriptorium.changes.structured import Citation, CreateRecord, Destination
from scriptorium.workspace import MemoryWorkspace

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory(prefix="scriptorium-changes-") as tmp_name:
        tmp = Path(tmp_name)
        api_state, bare_state = tmp / "api", tmp / "bare"
        build_workspace(api_state / "memory", args.records, args.records).close()
        shutil.copytree(api_state, bare_state, symlinks=True)
        bare = MemoryWorkspace(bare_state / "memory")
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "scriptorium.cli", "serve", "--state", str(api_state), "--port", str(port)],
            cwd=ROOT,
            env={**os.environ, "SCRIPTORIUM_LOG_LEVEL": "WARNING"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    if httpx.get(f"{url}/openapi.json", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            token = (api_state / "owner-token").read_text().strip()
            client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
            api_ms: list[float] = []
            bare_ms: list[float] = []
            for step in range(-5, args.calls):  # five warm-up rounds (imports, caches) are not counted
                content = f"Benchmark fact {step}: the nightly reorganize runs at three."
                source = f"bench/thread-{step % 100:05d}/msg-{step % 100:03d}"
                body = {
                    "memory_changes": [
                        {
                            "op": "create_record",
                            "content": content,
                            "time": "2026-11-30",
                            "sources": [{"source": source, "label": "reorganize"}],
                            "destination": {"topic_path": "topics/bench/new.md", "headings": ["Facts"]},
                        }
                    ],
                    "message": f"api create {step}",
                }
                t0 = time.perf_counter()
                response = client.post("/api/memory/changes", json=body)
                elapsed_api = (time.perf_counter() - t0) * 1000
                assert response.status_code == 200, response.text
                assert len(response.json()["created_ids"]) == 1
                change = CreateRecord(
                    content,
                    "2026-11-30",
                    (Citation(source, "reorganize"),),
                    Destination("topics/bench/new.md", ("Facts",)),
                )
                t0 = time.perf_counter()
                result = bare.update(memory_changes=[change], message=f"bare create {step}")
                elapsed_bare = (time.perf_counter() - t0) * 1000
                assert len(result.created_ids) == 1 and result.git_committed
                if step >= 0:
                    api_ms.append(elapsed_api)
                    bare_ms.append(elapsed_bare)
            client.close()
        finally:
            server.terminate()
            server.wait(30)
            bare.close()
    api_p50, api_p95, bare_p50 = statistics.median(api_ms), pct(api_ms, 0.95), statistics.median(bare_ms)
    print(f"{'path':>26} {'p50 ms':>9} {'p95 ms':>9}")
    print(f"{'POST /api/memory/changes':>26} {api_p50:>9.2f} {api_p95:>9.2f}")
    print(f"{'bare transaction':>26} {bare_p50:>9.2f} {pct(bare_ms, 0.95):>9.2f}")
    print(f"api / bare p50 = {api_p50 / bare_p50:.3f} (target <= 1.2); {args.records} records, {args.calls} calls each")
    print(
        json.dumps(
            {
                "api_p50_ms": round(api_p50, 3),
                "api_p95_ms": round(api_p95, 3),
                "bare_txn_p50_ms": round(bare_p50, 3),
                "api_overhead_ratio": round(api_p50 / bare_p50, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
