"""The REST path's overhead, and the hold queue's: each beside the bare transaction it wraps.

Builds a 10,000-record workspace (10,000 archived sources) and an identical
copy, starts ``scriptorium serve`` on a free port over the first, then
alternates, 100 times each in the same run:

* ``api``: one single-record ``create_record`` POSTed over real HTTP (keep-alive client)
  with the owner token, parsed, validated, transacted, answered;
* ``api (write token)``: the same with a ``write`` token — the scoped-token check (keyed
  hash, token file) and the audience checks on top;
* ``api (propose token)``: the same with a ``propose`` token — held: a dry run and a
  proposal file, 202;
* ``bare``: the same change through ``scriptorium.changes.update.update`` in-process on the
  copy — the workspace transaction alone;
* ``held``: :func:`scriptorium.access.decisions.hold` in-process on the copy (the audience
  checks, a dry run, the proposal written) beside ``bare dry run``, the same change's
  ``update(..., dry_run=True)``.

Targets: ``api_p50_ms / bare_txn_p50_ms`` ≤ 1.2 (``api_overhead_ratio``), the same for the
write token (``api_token_overhead_ratio``), and ``held_p50_ms / bare_dry_run_p50_ms`` ≤ 1.2
(``held_ratio``). Prints a table, then one JSON line with those keys and the p50s.

A requester may have only so many proposals open (``OPEN_PER_REQUESTER``), so after each round the owner
rejects the two it held, as a reviewer would, outside the clock (a ``reject`` on each side: the copies stay
alike). ``--smoke`` (CI): 200 records, 3 calls — that it runs end to end, not its figures.

Usage: python benchmarks/changes.py [--records 10000] [--calls 100] [--smoke]
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
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workspace_fixture import MESSAGES_PER_THREAD, build_workspace, scratch

from scriptorium.access.decisions import hold, reject
from scriptorium.audience import OWNER_PRINCIPAL, Principal
from scriptorium.changes.proposals import ProposalStore
from scriptorium.changes.structured import Citation, CreateRecord, Destination
from scriptorium.changes.update import update as update_memory
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
    parser.add_argument("--smoke", action="store_true", help="200 records, 3 calls: that it runs, not its figures")
    args = parser.parse_args()
    if args.smoke:
        args.records, args.calls = 200, 3
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with scratch("scriptorium-changes-") as tmp:
        api_state, bare_state = tmp / "api", tmp / "bare"
        build_workspace(api_state / "memory", args.records, args.records).close()
        shutil.copytree(api_state, bare_state, symlinks=True)
        bare = MemoryWorkspace(bare_state / "memory")
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "scriptorium.cli.main", "serve", "--state", str(api_state), "--port", str(port)],
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
            owner = (api_state / "owner-token").read_text().strip()
            tokens = {"owner": owner, "write": _token(api_state, "write"), "propose": _token(api_state, "propose")}
            clients = {
                kind: httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
                for kind, token in tokens.items()
            }
            times: dict[str, list[float]] = {k: [] for k in ("owner", "write", "propose", "bare", "dry", "held")}
            store = ProposalStore(bare.root)
            requester = Principal("propose", "bench", "bench-token")
            for step in range(-5, args.calls):  # five warm-up rounds (imports, caches) are not counted
                thread, message = divmod((step * 97) % args.records, MESSAGES_PER_THREAD)
                source = f"bench/thread-{thread:05d}/msg-{message:03d}"

                body = partial(_body, step, source)
                change = partial(_change, step, source)
                measured: dict[str, list[float]] = {k: [] for k in times}
                held_ids: list[str] = []
                for kind in ("owner", "write", "propose"):
                    t0 = time.perf_counter()
                    response = clients[kind].post("/api/memory/changes", json=body(kind))
                    measured[kind].append((time.perf_counter() - t0) * 1000)
                    assert response.status_code == (202 if kind == "propose" else 200), response.text
                    if kind == "propose":
                        held_ids.append(response.json()["id"])
                for kind in ("owner", "write"):  # the copy gets as many installs as the served workspace
                    t0 = time.perf_counter()
                    result = update_memory(bare, memory_changes=[change(kind)], message=f"bare {kind} {step}")
                    measured["bare"].append((time.perf_counter() - t0) * 1000)
                    assert len(result.created_ids) == 1 and result.git_committed
                t0 = time.perf_counter()
                preview = update_memory(bare, memory_changes=[change("dry")], message=f"dry {step}", dry_run=True)
                measured["dry"].append((time.perf_counter() - t0) * 1000)
                assert preview.dry_run and preview.diff
                t0 = time.perf_counter()
                held = hold(
                    bare, store, requester, body("held"), {"memory_changes": [change("held")], "message": "held"}
                )
                measured["held"].append((time.perf_counter() - t0) * 1000)
                # Untimed: the owner rejects what was held, or the requester's open proposals reach the quota.
                for proposal_id in held_ids:
                    rejected = clients["owner"].post(
                        f"/api/memory/proposals/{proposal_id}/reject", json={"why": "bench"}
                    )
                    assert rejected.status_code == 200, rejected.text
                reject(bare, store, held.id, OWNER_PRINCIPAL, "bench")
                if step >= 0:
                    for kind, values in measured.items():
                        times[kind].extend(values)
            for client in clients.values():
                client.close()
        finally:
            server.terminate()
            server.wait(30)
            bare.close()
    p50 = {kind: statistics.median(values) for kind, values in times.items()}
    labels = {
        "owner": "POST /api/memory/changes",
        "write": "  with a write token",
        "propose": "  with a propose token",
        "bare": "bare transaction",
        "held": "held (in process)",
        "dry": "bare dry run",
    }
    print(f"{'path':>26} {'p50 ms':>9} {'p95 ms':>9}")
    for kind, label in labels.items():
        print(f"{label:>26} {p50[kind]:>9.2f} {pct(times[kind], 0.95):>9.2f}")
    api_ratio, token_ratio = p50["owner"] / p50["bare"], p50["write"] / p50["bare"]
    held_ratio = p50["held"] / p50["dry"]
    print(f"api / bare p50 = {api_ratio:.3f}, write token / bare = {token_ratio:.3f} (targets <= 1.2)")
    print(f"held / dry run p50 = {held_ratio:.3f} (target <= 1.2); {args.records} records, {args.calls} calls each")
    print(
        json.dumps(
            {
                "api_p50_ms": round(p50["owner"], 3),
                "api_p95_ms": round(pct(times["owner"], 0.95), 3),
                "bare_txn_p50_ms": round(p50["bare"], 3),
                "api_overhead_ratio": round(api_ratio, 3),
                "api_write_token_p50_ms": round(p50["write"], 3),
                "api_token_overhead_ratio": round(token_ratio, 3),
                "api_propose_token_p50_ms": round(p50["propose"], 3),
                "held_p50_ms": round(p50["held"], 3),
                "bare_dry_run_p50_ms": round(p50["dry"], 3),
                "held_ratio": round(held_ratio, 3),
            }
        )
    )


def _text(step: int, kind: str) -> str:
    # Each path's own text: no path reuses what another parsed just before.
    return f"Benchmark fact {step} ({kind}): the nightly reorganize runs at three."


def _body(step: int, source: str, kind: str) -> dict[str, Any]:
    return {
        "memory_changes": [
            {
                "op": "create_record",
                "content": _text(step, kind),
                "time": "2026-11-30",
                "sources": [{"source": source, "label": "reorganize"}],
                "destination": {"topic_path": "topics/bench/new.md", "headings": ["Facts"]},
            }
        ],
        "message": f"{kind} create {step}",
    }


def _change(step: int, source: str, kind: str) -> CreateRecord:
    return CreateRecord(
        _text(step, kind),
        "2026-11-30",
        (Citation(source, "reorganize"),),
        Destination("topics/bench/new.md", ("Facts",)),
    )


def _token(state: Path, scope: str) -> str:
    from scriptorium.access.tokens import TokenStore

    _record, token = TokenStore(state).create(scope, "bench")
    return token


if __name__ == "__main__":
    main()
