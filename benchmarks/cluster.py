"""End-to-end latency and throughput of the worker cluster, beside its floors, in one run.

Starts its own redis-server and one Celery worker (prefork, two processes,
verbatim writer, SQLite sessions), then measures:

* ``e2e``: ``turn.ended`` published → ``memory.ingest_ended`` read from the stream
  (two new turns per event, trigger threshold 0), p50/p95;
* ``bare``: the same pass called directly in-process (file lock), p50,
  interleaved with the end-to-end events; both sides get four untimed warm-up passes;
* ``noop``: a no-op task's round trip (p50) and throughput — the engine's ceiling;
* ``passes_per_s``: passes across 20 workspaces, each with its own new turns,
  published a round (one event per workspace) at a time; the clock runs from a
  round's first publish to its last result (writing the turns into the session
  store beforehand is the runtime's work, as it is outside the bare pass's clock).

Targets: e2e_p50 ≤ bare_p50 + 3 × noop_p50 + 5 ms; passes_per_s ≥ 75% of
2 × 1000 / bare_p50. Prints a table, then one JSON line (``e2e_p50_ms``,
``e2e_p95_ms``, ``bare_pass_p50_ms``, ``noop_roundtrip_p50_ms``,
``passes_per_s``, ``noop_tasks_per_s``).

With ``--hosts 2``: the same 20 workspaces and two worker processes in all, first on one host (one
worker, two processes, the shared queue), then on two hosts (one worker process each, with its own state
folder as its disk, the workspaces placed ten on each, every commit replicated to the other host), the two
arms alternating ``--trials`` times; each arm measures passes per second (the rounds above) and the
single-workspace p50 (``e2e``), and the run ends by moving a 1,000-record workspace between the two hosts
``--moves`` times. Each arm's throughput run is 100 rounds (about half a minute: several of replication's
send intervals, after the warm-up's sends have landed). Targets: two hosts ≥ 0.9 × one host's passes per
second; their e2e p50 within 1.2 ×.
Last line: ``passes_per_s_1_host``, ``passes_per_s_2_hosts``, ``e2e_p50_ms_1_host``, ``e2e_p50_ms_2_hosts``,
``move_ms_p50`` (medians over the trials), and ``passes_ratio_paired_p50``: the median over the trials of
two hosts' rate over one host's in the same trial (the machine drifts between trials; a trial's two arms run
back to back).

``--smoke`` (CI): 3 events, 20 no-op tasks, one round — that it runs end to end, not its figures.

Usage: python benchmarks/cluster.py [--events N] [--noop N] [--rounds N] [--smoke] [--hosts 2 [--trials N] [--moves N]]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import redis
import structlog
from celery import Celery

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scriptorium.schemas.events import IngestEnded, TurnEnded  # noqa: E402
from scriptorium.sessions import Node, NodeKind, SessionStore, open_store  # noqa: E402
from scriptorium.workspace import MemoryWorkspace  # noqa: E402
from scriptorium.writers.organizer import OfflineOrganizer  # noqa: E402
from scriptorium.writers.verbatim import VerbatimWriter  # noqa: E402
from scriptorium.writing.service import WriteService, WriteSettings  # noqa: E402

STREAM = "scriptorium:ingest_ended"
WORKSPACES = 20
ROUNDS = 5
"""Rounds of the one-host throughput run (``--hosts 2`` runs more: cluster_hosts.TWO_HOST_ROUNDS)."""


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def add_turns(store: SessionStore, sid: str, n: int, counter: list[int]) -> None:
    session = store.get_session(sid)
    parent = session.head if session else None
    nodes = []
    for _ in range(n):
        counter[0] += 1
        kind = NodeKind.USER if counter[0] % 2 else NodeKind.ASSISTANT
        node_id = f"{sid}-n{counter[0]}"
        text = f"turn {counter[0]}: we decided to keep the nightly reorganize at three and answers short"
        nodes.append(Node(node_id, sid, parent, str(kind), kind, text, datetime.now(UTC)))
        parent = node_id
    store.add_nodes(nodes, head=parent, updated_at=datetime.now(UTC))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class BarePass:
    """The same pass called directly in-process (file lock), on its own workspace and store."""

    def __init__(self, tmp: Path) -> None:
        self.ws = MemoryWorkspace.init(tmp / "bare" / "memory")
        self.store = open_store(f"sqlite:///{tmp / 'bare-sessions.db'}")
        self.store.create_session("s", {"provider": "bench"})
        self.service = WriteService(
            self.ws, self.store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0)
        )
        self.counter = [0]

    def run(self) -> float:
        add_turns(self.store, "s", 2, self.counter)
        t0 = time.perf_counter()
        outcome = self.service.write("s")
        elapsed = (time.perf_counter() - t0) * 1000
        assert outcome.ok
        return elapsed

    def close(self) -> None:
        self.store.close()
        self.ws.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=60)
    parser.add_argument("--noop", type=int, default=2000)
    parser.add_argument("--sessions-url", default=None, help="session store (default: SQLite in a temp dir)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help=f"passes per workspace in the throughput run ({ROUNDS}; --hosts 2: 100)",
    )
    parser.add_argument("--smoke", action="store_true", help="the smallest size, for CI: that it runs, not its figures")
    parser.add_argument("--hosts", type=int, choices=(1, 2), default=1, help="2: one host against two hosts")
    parser.add_argument("--trials", type=int, default=3, help="--hosts 2: how many times each arm runs")
    parser.add_argument("--moves", type=int, default=5, help="--hosts 2: moves of the 1,000-record workspace")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.hosts == 2:
        from benchmarks.cluster_hosts import TWO_HOST_ROUNDS, two_hosts

        args.rounds = args.rounds or TWO_HOST_ROUNDS
        two_hosts(args)
        return
    if args.smoke:
        args.events, args.noop, args.rounds = 3, 20, args.rounds or 1
    args.rounds = args.rounds or ROUNDS
    roundtrips = 20 if args.smoke else 200
    with tempfile.TemporaryDirectory(prefix="scriptorium-bench-") as tmp_name:
        tmp = Path(tmp_name)
        port = free_port()
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--save", "", "--appendonly", "yes", "--dir", str(tmp)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        client = redis.Redis.from_url(url)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        sessions_url = args.sessions_url or f"sqlite:///{tmp / 'sessions.db'}"
        env = {
            **os.environ,
            "SCRIPTORIUM_BROKER_URL": url,
            "SCRIPTORIUM_STATE": str(tmp / "state"),
            "SCRIPTORIUM_SESSIONS_URL": sessions_url,
            "SCRIPTORIUM_TRIGGER_TOKENS": "0",
            "SCRIPTORIUM_LOG_LEVEL": "WARNING",
        }
        store = open_store(sessions_url)
        names = ["default"] + [f"ws{i:02d}" for i in range(1, WORKSPACES)]
        for name in names:
            root = tmp / "state" / ("memory" if name == "default" else f"workspaces/{name}/memory")
            MemoryWorkspace.init(root).close()
            store.create_session(f"s-{name}", {"provider": "bench", "workspace": name})
        log = (tmp / "worker.log").open("wb")
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "scriptorium.workers.app",
                "worker",
                "--pool",
                "prefork",
                "--concurrency",
                "2",
                "--loglevel",
                "WARNING",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        app = Celery("bench", broker=url, backend=url)
        app.conf.update(accept_content=["json"], result_accept_content=["json"])
        try:
            for _ in range(300):
                if app.control.ping(timeout=0.2):
                    break
            last = "$"

            def read(count: int) -> list[IngestEnded]:
                nonlocal last
                out: list[IngestEnded] = []
                while len(out) < count:
                    for _s, items in client.xread({STREAM: last}, block=5000) or []:
                        for entry_id, fields in items:
                            last = entry_id.decode()
                            out.append(IngestEnded.model_validate_json(fields[b"payload"]))
                return out

            # Warm each pool process (imports, workspace caches) before measuring.
            counter = [0]
            for _ in range(4):
                add_turns(store, "s-default", 2, counter)
                app.send_task(
                    "scriptorium.write",
                    args=[TurnEnded(workspace="default", session_id="s-default").model_dump(mode="json")],
                )
                read(1)
            # Interleaved with the bare pass, so machine noise hits both alike; the bare pass gets the
            # same four warm-up passes as the cluster (imports, workspace caches), untimed.
            bare_runner = BarePass(tmp)
            for _ in range(4):
                bare_runner.run()
            e2e: list[float] = []
            bare: list[float] = []
            for _ in range(args.events):
                add_turns(store, "s-default", 2, counter)
                t0 = time.perf_counter()
                event = TurnEnded(workspace="default", session_id="s-default")
                app.send_task("scriptorium.write", args=[event.model_dump(mode="json")])
                (result,) = read(1)
                e2e.append((time.perf_counter() - t0) * 1000)
                assert result.ok and result.outcome == "written", result
                bare.append(bare_runner.run())
            bare_runner.close()
            noop_rt = []
            for _ in range(roundtrips):
                t0 = time.perf_counter()
                assert app.send_task("scriptorium.ping").get(timeout=10) == "pong"
                noop_rt.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            pending = [app.send_task("scriptorium.ping") for _ in range(args.noop)]
            for item in pending:
                item.get(timeout=60)
            noop_rate = args.noop / (time.perf_counter() - t0)
            for name in names:  # warm every workspace's service in the pool
                add_turns(store, f"s-{name}", 2, counter)
                app.send_task(
                    "scriptorium.write",
                    args=[TurnEnded(workspace=name, session_id=f"s-{name}").model_dump(mode="json")],
                )
            read(len(names))
            # Each round gives every workspace new turns, then publishes one turn.ended per workspace:
            # every pass has its own work, and the 20 passes of a round spread over both processes.
            # Only the cluster's time counts: from a round's first publish to its last result. Adding
            # the turns to the session store is the runtime's work, done while the workers are idle.
            results = []
            elapsed = 0.0
            for _ in range(args.rounds):
                for name in names:
                    add_turns(store, f"s-{name}", 2, counter)
                t0 = time.perf_counter()
                for name in names:
                    event = TurnEnded(workspace=name, session_id=f"s-{name}")
                    app.send_task("scriptorium.write", args=[event.model_dump(mode="json")])
                results += read(len(names))
                elapsed += time.perf_counter() - t0
            assert all(r.outcome == "written" for r in results), [r.outcome for r in results]
            passes_rate = len(results) / elapsed
            in_worker_ms = statistics.median(r.timings_ms["pass_ms"] for r in results)
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(30)
            server.terminate()
            server.wait(10)
            store.close()
    e2e_p50, e2e_p95 = statistics.median(e2e), percentile(e2e, 0.95)
    bare_p50, noop_p50 = statistics.median(bare), statistics.median(noop_rt)
    e2e_budget = bare_p50 + 3 * noop_p50 + 5
    rate_floor = 0.75 * 2 * 1000 / bare_p50
    print(f"{'figure':>28} {'value':>10} {'target':>22}")
    print(f"{'e2e p50 ms':>28} {e2e_p50:>10.2f} {'<= ' + format(e2e_budget, '.2f'):>22}")
    print(f"{'e2e p95 ms':>28} {e2e_p95:>10.2f} {'':>22}")
    print(f"{'bare pass p50 ms':>28} {bare_p50:>10.2f} {'':>22}")
    print(f"{'no-op round trip p50 ms':>28} {noop_p50:>10.2f} {'':>22}")
    print(f"{'no-op tasks/s':>28} {noop_rate:>10.1f} {'':>22}")
    print(f"{'passes/s (20 workspaces)':>28} {passes_rate:>10.1f} {'>= ' + format(rate_floor, '.1f'):>22}")
    print(f"{'pass p50 ms inside workers':>28} {in_worker_ms:>10.2f} {'(under load)':>22}")
    print(
        json.dumps(
            {
                "e2e_p50_ms": round(e2e_p50, 3),
                "e2e_p95_ms": round(e2e_p95, 3),
                "bare_pass_p50_ms": round(bare_p50, 3),
                "noop_roundtrip_p50_ms": round(noop_p50, 3),
                "passes_per_s": round(passes_rate, 2),
                "noop_tasks_per_s": round(noop_rate, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
