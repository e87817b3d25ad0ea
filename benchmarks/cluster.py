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

Usage: python benchmarks/cluster.py [--events N] [--noop N] [--hosts 2 [--trials N] [--moves N]]
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
from scriptorium.settings import Settings  # noqa: E402
from scriptorium.workspace import MemoryWorkspace  # noqa: E402
from scriptorium.writers.organizer import OfflineOrganizer  # noqa: E402
from scriptorium.writers.verbatim import VerbatimWriter  # noqa: E402
from scriptorium.writing.service import WriteService, WriteSettings  # noqa: E402

STREAM = "scriptorium:ingest_ended"
WORKSPACES = 20


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
        "--rounds", type=int, default=None, help="passes per workspace in the throughput run (5; --hosts 2: 100)"
    )
    parser.add_argument("--hosts", type=int, choices=(1, 2), default=1, help="2: one host against two hosts")
    parser.add_argument("--trials", type=int, default=3, help="--hosts 2: how many times each arm runs")
    parser.add_argument("--moves", type=int, default=5, help="--hosts 2: moves of the 1,000-record workspace")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.hosts == 2:
        args.rounds = args.rounds or TWO_HOST_ROUNDS
        two_hosts(args)
        return
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
            for _ in range(200):
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


class Hosts:
    """One cluster for one arm: a redis-server, a session store, and workers — one host with two processes,
    or two hosts (``h1``, ``h2``) with one each and a disk of their own."""

    def __init__(self, tmp: Path, hosts: int) -> None:
        self.tmp, self.hosts = tmp, hosts
        self.settle_s = Settings().replica_send_interval_s + 1.0 if hosts == 2 else 1.0
        """How long replication takes to land after a pass: one send interval, and a second for the send."""
        tmp.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.server = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--save", "", "--appendonly", "yes", "--dir", str(tmp)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis.from_url(self.url)
        for _ in range(100):
            try:
                self.client.ping()
                break
            except redis.RedisError:
                time.sleep(0.05)
        self.sessions_url = f"sqlite:///{tmp / 'sessions.db'}"
        self.store = open_store(self.sessions_url)
        self.names = [f"ws{i:02d}" for i in range(WORKSPACES)]
        self.workers: list[subprocess.Popen[bytes]] = []
        self.last = "0-0"
        self.counter = [0]
        from scriptorium.producers.placement import Placement

        self.placement = Placement(self.client, "scriptorium:")
        for n, name in enumerate(self.names):
            host = self.host_of(n)
            MemoryWorkspace.init(self.state(host) / "workspaces" / name / "memory").close()
            if host:
                self.placement.place(name, host)
            self.store.create_session(f"s-{name}", {"provider": "bench", "workspace": name})
        for host in ("h1", "h2") if hosts == 2 else ("",):
            self.start(host, concurrency=1 if hosts == 2 else 2)
        from scriptorium.producers.publisher import Publisher

        self.publisher = Publisher(self.url)
        if hosts == 2:
            deadline = time.monotonic() + 30
            while self.placement.live_hosts() != ["h1", "h2"] and time.monotonic() < deadline:
                time.sleep(0.1)

    def host_of(self, n: int) -> str:
        return ("h1", "h2")[n % 2] if self.hosts == 2 else ""

    def state(self, host: str) -> Path:
        return self.tmp / (f"host-{host}" if host else "state")

    def start(self, host: str, concurrency: int) -> None:
        env = {
            **os.environ,
            "SCRIPTORIUM_BROKER_URL": self.url,
            "SCRIPTORIUM_STATE": str(self.state(host)),
            "SCRIPTORIUM_SESSIONS_URL": self.sessions_url,
            "SCRIPTORIUM_TRIGGER_TOKENS": "0",
            "SCRIPTORIUM_LOG_LEVEL": "WARNING",
            **({"SCRIPTORIUM_WORKER_HOST": host} if host else {}),
        }
        command = [sys.executable, "-m", "celery", "-A", "scriptorium.workers.app", "worker", "--pool", "prefork"]
        command += ["--concurrency", str(concurrency), "--loglevel", "WARNING", "--hostname", f"{host or 'one'}@%h"]
        command += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
        log = (self.tmp / f"worker-{host or 'one'}.log").open("wb")
        self.workers.append(
            subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        )

    def read(self, count: int) -> list[IngestEnded]:
        out: list[IngestEnded] = []
        while len(out) < count:
            for _s, items in self.client.xread({STREAM: self.last}, block=5000) or []:
                for entry_id, fields in items:
                    self.last = entry_id.decode()
                    out.append(IngestEnded.model_validate_json(fields[b"payload"]))
        return out

    def pass_of(self, name: str) -> None:
        add_turns(self.store, f"s-{name}", 2, self.counter)
        self.publisher.turn_ended(name, f"s-{name}")

    def commands(self) -> int:
        """Every command Redis has run so far (its own count)."""
        stats = self.client.info("commandstats")
        return sum(int(v["calls"]) for v in stats.values() if isinstance(v, dict))

    def measure(self, rounds: int, events: int) -> tuple[float, float, float]:
        """Passes per second over every workspace, the e2e p50 of one workspace (ms), and the Redis commands
        per pass (publisher, workers, replication, and the readers' own)."""
        for _ in range(2):  # warm every pool process and every workspace, untimed
            for name in self.names:
                self.pass_of(name)
            self.read(len(self.names))
        time.sleep(self.settle_s)  # the warm-up's replication lands before counting
        before = self.commands()
        elapsed, done = 0.0, 0
        for _ in range(rounds):
            for name in self.names:
                add_turns(self.store, f"s-{name}", 2, self.counter)
            t0 = time.perf_counter()
            for name in self.names:
                self.publisher.turn_ended(name, f"s-{name}")
            results = self.read(len(self.names))
            elapsed += time.perf_counter() - t0
            assert all(r.outcome == "written" for r in results), [(r.outcome, r.message) for r in results]
            done += len(results)
        time.sleep(self.settle_s)  # the last window's replication, counted with its passes
        per_pass = (self.commands() - before) / done
        e2e = []
        for _ in range(events):
            add_turns(self.store, "s-ws00", 2, self.counter)
            t0 = time.perf_counter()
            self.publisher.turn_ended("ws00", "s-ws00")
            (result,) = self.read(1)
            e2e.append((time.perf_counter() - t0) * 1000)
            assert result.outcome == "written", result
        return done / elapsed, statistics.median(e2e), per_pass

    def close(self) -> None:
        self.publisher.close()
        for worker in self.workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        self.server.terminate()
        self.server.wait(10)
        self.store.close()


def move_times(tmp: Path, moves: int) -> list[float]:
    """Move a 1,000-record workspace between two hosts ``moves`` times; each move's time (ms), as the operator's
    command reports it (from the move's start to its landing)."""
    from benchmarks.workspace_fixture import build_workspace

    cluster = Hosts(tmp, 2)
    try:
        build_workspace(cluster.state("h1") / "workspaces" / "big" / "memory", 1000, 1000).close()
        cluster.placement.place("big", "h1")
        times = []
        for n in range(moves):
            target = ("h2", "h1")[n % 2]
            done = subprocess.run(
                [sys.executable, "-m", "scriptorium.cli.main", "move", "big", target, "--json"],
                env={**os.environ, "SCRIPTORIUM_BROKER_URL": cluster.url, "SCRIPTORIUM_STATE": str(tmp / "operator")},
                capture_output=True,
                text=True,
                check=True,
            )
            times.append(float(json.loads(done.stdout)["move_ms"]))
        return times
    finally:
        cluster.close()


TWO_HOST_ROUNDS = 100
"""--hosts 2: each arm's throughput run holds several replication send intervals
(``SCRIPTORIUM_REPLICA_SEND_INTERVAL_S``, 10 s): about half a minute, so what is measured is replication's
steady cost, not one interval's worth of sends."""


def two_hosts(args: argparse.Namespace) -> None:
    rates: dict[int, list[float]] = {1: [], 2: []}
    latencies: dict[int, list[float]] = {1: [], 2: []}
    commands: dict[int, list[float]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="scriptorium-bench-") as tmp_name:
        tmp = Path(tmp_name)
        for trial in range(args.trials):
            for hosts in (1, 2) if trial % 2 == 0 else (2, 1):  # alternate which arm runs first
                cluster = Hosts(tmp / f"t{trial}-h{hosts}", hosts)
                try:
                    rate, p50, per_pass = cluster.measure(args.rounds, args.events)
                finally:
                    cluster.close()
                rates[hosts].append(rate)
                latencies[hosts].append(p50)
                commands[hosts].append(per_pass)
        moves = move_times(tmp / "moves", args.moves)
    figures = {
        "passes_per_s_1_host": round(statistics.median(rates[1]), 2),
        "passes_per_s_2_hosts": round(statistics.median(rates[2]), 2),
        "e2e_p50_ms_1_host": round(statistics.median(latencies[1]), 3),
        "e2e_p50_ms_2_hosts": round(statistics.median(latencies[2]), 3),
        "move_ms_p50": round(statistics.median(moves), 1),
        "redis_commands_per_pass_1_host": round(statistics.median(commands[1]), 1),
        "redis_commands_per_pass_2_hosts": round(statistics.median(commands[2]), 1),
        "passes_ratio_paired_p50": round(statistics.median(b / a for a, b in zip(rates[1], rates[2], strict=True)), 3),
    }
    ratio = figures["passes_per_s_2_hosts"] / figures["passes_per_s_1_host"]
    latency = figures["e2e_p50_ms_2_hosts"] / figures["e2e_p50_ms_1_host"]
    print(f"{'figure':>32} {'1 host':>10} {'2 hosts':>10} {'ratio':>7} {'target':>8}")
    print(
        f"{'passes/s (20 workspaces)':>32} {figures['passes_per_s_1_host']:>10.1f} "
        f"{figures['passes_per_s_2_hosts']:>10.1f} {ratio:>7.3f} {'>= 0.9':>8}"
    )
    print(
        f"{'e2e p50 ms (one workspace)':>32} {figures['e2e_p50_ms_1_host']:>10.2f} "
        f"{figures['e2e_p50_ms_2_hosts']:>10.2f} {latency:>7.3f} {'<= 1.2':>8}"
    )
    trials = " / ".join(" ".join(f"{r:.1f}" for r in rates[h]) for h in (1, 2))
    print(f"{'passes/s per trial (1 / 2 hosts)':>32} {trials}")
    print(f"{'2 / 1 host, median of the trials':>32} {figures['passes_ratio_paired_p50']:>21.3f}")
    print(
        f"{'Redis commands per pass':>32} {statistics.median(commands[1]):>10.1f} "
        f"{statistics.median(commands[2]):>10.1f}"
    )
    print(f"{'move of 1,000 records, ms p50':>32} {figures['move_ms_p50']:>10.1f} ({len(moves)} moves)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
