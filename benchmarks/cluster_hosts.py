"""``benchmarks/cluster.py --hosts 2``: the same cluster on one host and on two, alternated, and moves of a
workspace between the two hosts (see ``cluster.py``'s docstring for what is measured and the targets)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from benchmarks.cluster import ROOT, STREAM, WORKSPACES, add_turns, free_port
from scriptorium.schemas.events import IngestEnded
from scriptorium.sessions import open_store
from scriptorium.settings import Settings
from scriptorium.workspace import MemoryWorkspace


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
