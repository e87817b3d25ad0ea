"""Two worker hosts as two machines: each in a network namespace of its own, with its own state folder as its
disk and its own worker processes, reaching one Redis and one PostgreSQL over its own link.

Redis listens on each link's address; PostgreSQL (on this machine's loopback) is reached through a small
TCP relay on each link. Twenty workspaces are placed across both hosts; sessions are written, five
workspaces move between the hosts under load, and one host's workers are SIGKILLed for 30 s mid-run. In the
end every turn is written exactly once into the copy its workspace's final host holds, no install is
partial, and every replica equals its workspace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from scriptorium.producers.placement import Placement
from scriptorium.producers.publisher import Publisher
from scriptorium.schemas.events import IngestEnded
from scriptorium.sessions import SessionStore, open_store
from scriptorium.workspace import MemoryWorkspace
from tests.checks import exactly_once
from tests.cluster.conftest import ROOT, free_port, wait_for
from tests.helpers.reports import failed, show_logs
from tests.requirements import PG_URL, require
from tests.sessions_fixtures import T0, chain

HOSTS = ("h1", "h2")
WORKSPACES = [f"w{n:02d}" for n in range(20)]
DOWN_S = 30.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Relay(threading.Thread):
    """Forward TCP connections from ``listen`` to ``target`` (PostgreSQL on the loopback, for a namespace)."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.server = socket.create_server(listen, reuse_port=False)
        self.target = target

    def run(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.server.close()


class Machines:
    """The two namespaced hosts, their links, Redis, the PostgreSQL relay and database, and the workers."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.tag = f"{os.getpid() % 10000}"
        self.netns = {host: f"scr{self.tag}-{host}" for host in HOSTS}
        self.gateway = {host: f"10.{200 + n}.{int(self.tag) % 250}.1" for n, host in enumerate(HOSTS)}
        self.address = {host: f"10.{200 + n}.{int(self.tag) % 250}.2" for n, host in enumerate(HOSTS)}
        for host in HOSTS:
            ns, outer, inner = self.netns[host], f"vs{self.tag}{host}", f"vn{self.tag}{host}"
            _ip("netns", "add", ns)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("addr", "add", f"{self.gateway[host]}/24", "dev", outer)
            _ip("link", "set", outer, "up")
            _ip("netns", "exec", ns, "ip", "addr", "add", f"{self.address[host]}/24", "dev", inner)
            _ip("netns", "exec", ns, "ip", "link", "set", inner, "up")
            _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
        self.redis_port = free_port()
        (tmp / "redis").mkdir()
        self.redis = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                *self.gateway.values(),
                "--protected-mode",
                "no",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--dir",
                str(tmp / "redis"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = redis.Redis(port=self.redis_port)
        wait_for(lambda: self._pings(), 10, "redis-server")
        import psycopg

        self.database = f"scr_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.database}".encode())
        self.pg = urlsplit(PG_URL)
        pg_host, pg_port = self.pg.hostname or "127.0.0.1", self.pg.port or 5432
        self.pg_url = self.pg_url_via(pg_host)
        self.relays = [Relay((self.gateway[host], pg_port), (pg_host, pg_port)) for host in HOSTS]
        for relay in self.relays:
            relay.start()
        self.store: SessionStore = open_store(self.pg_url)
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.read_from = "0-0"

    def _pings(self) -> bool:
        try:
            return bool(self.client.ping())
        except redis.RedisError:
            return False

    def pg_url_via(self, address: str) -> str:
        """This test's database at ``address`` (the loopback, or a link's relay)."""
        credentials = self.pg.netloc.rsplit("@", 1)[0] + "@" if "@" in self.pg.netloc else ""
        return urlunsplit(
            (self.pg.scheme, f"{credentials}{address}:{self.pg.port or 5432}", f"/{self.database}", "", "")
        )

    def state(self, host: str) -> Path:
        return self.tmp / f"disk-{host}"

    def url_for(self, host: str) -> str:
        return f"redis://{self.gateway[host]}:{self.redis_port}/0"

    def start(self, host: str) -> None:
        env = {
            **os.environ,
            "SCRIPTORIUM_BROKER_URL": self.url_for(host),
            "SCRIPTORIUM_STATE": str(self.state(host)),
            "SCRIPTORIUM_SESSIONS_URL": self.pg_url_via(self.gateway[host]),
            "SCRIPTORIUM_WORKER_HOST": host,
            "SCRIPTORIUM_TRIGGER_TOKENS": "0",
            "SCRIPTORIUM_RETRY_BASE_S": "0.2",
            "SCRIPTORIUM_RETRY_MAX_DELAY_S": "1",
            "SCRIPTORIUM_MAX_RETRIES": "8",
            "SCRIPTORIUM_VISIBILITY_MARGIN_S": "2",
            "SCRIPTORIUM_LOCK_TTL_S": "3",
            "SCRIPTORIUM_UNACKED_RESTORE_INTERVAL_S": "1",
            "SCRIPTORIUM_REPLICA_SEND_INTERVAL_S": "0",  # every pass sent at once: the end compares replicas
            # What the SIGKILLed host held unacknowledged comes back after the visibility timeout (the hard
            # limit + the longest retry + the margin): 23 s here, not the default ten minutes.
            "SCRIPTORIUM_TASK_SOFT_TIME_LIMIT_S": "15",
            "SCRIPTORIUM_TASK_HARD_TIME_LIMIT_S": "20",
        }
        log = (self.tmp / f"worker-{host}.log").open("ab")
        before = self.log(host)
        self.workers[host] = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                self.netns[host],
                sys.executable,
                "-m",
                "celery",
                "-A",
                "scriptorium.workers.app",
                "worker",
                "--pool",
                "prefork",
                "--concurrency",
                "1",
                "--hostname",
                f"{host}@%h",
                "--loglevel",
                "INFO",
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
        wait_for(lambda: "ready." in self.log(host)[len(before) :], 60, f"{host}'s worker")

    def log(self, host: str) -> str:
        path = self.tmp / f"worker-{host}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self, host: str) -> None:
        proc = self.workers.pop(host)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def session(self, sid: str, turns: int, workspace: str) -> list[str]:
        self.store.create_session(sid, {"provider": "test", "title": f"Session {sid}", "workspace": workspace})
        ids = [f"{sid}-t{i}" for i in range(turns)]
        self.store.add_nodes(chain(sid, ids), head=ids[-1], updated_at=T0)
        return ids

    def results(self, count: int, timeout: float) -> list[IngestEnded]:
        found: list[IngestEnded] = []

        def poll() -> bool:
            for _stream, items in self.client.xread({"scriptorium:ingest_ended": self.read_from}, block=200) or []:
                for entry_id, fields in items:
                    self.read_from = entry_id.decode()
                    found.append(IngestEnded.model_validate_json(fields[b"payload"]))
            return len(found) >= count

        wait_for(poll, timeout, f"{count} results", interval=0)
        return found

    def close(self) -> None:
        for host in list(self.workers):
            self.kill(host)
        self.store.close()
        for relay in self.relays:
            relay.close()
        self.redis.terminate()
        self.redis.wait(10)
        for host in HOSTS:
            subprocess.run(["ip", "netns", "delete", self.netns[host]], capture_output=True)
            subprocess.run(["ip", "link", "delete", f"vs{self.tag}{host}"], capture_output=True)
        import psycopg

        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)".encode())


@pytest.fixture
def machines(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Machines]:
    require("redis-server")
    require("postgres")
    require("netns")
    made = Machines(tmp_path)
    try:
        yield made
    finally:
        made.close()
        if failed(request.node):
            show_logs(tmp_path.glob("worker-*.log"))


def _move(m: Machines, workspace: str, host: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SCRIPTORIUM_BROKER_URL": f"redis://127.0.0.1:{m.redis_port}/0"}
    env["SCRIPTORIUM_STATE"] = str(m.tmp / "operator")
    return subprocess.run(
        [sys.executable, "-m", "scriptorium.cli.main", "move", workspace, host, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _head(memory: Path) -> str:
    done = subprocess.run(["git", "-C", str(memory), "rev-parse", "refs/heads/main"], capture_output=True, text=True)
    return done.stdout.strip()


def test_two_hosts_in_network_namespaces_lose_nothing_through_moves_and_a_host_down(machines: Machines) -> None:
    m = machines
    placement = Placement(m.client, "scriptorium:")
    for n, name in enumerate(WORKSPACES):
        host = HOSTS[n % 2]
        placement.place(name, host)
        MemoryWorkspace.init(m.state(host) / "workspaces" / name / "memory").close()
    for host in HOSTS:
        m.start(host)
    wait_for(lambda: placement.live_hosts() == list(HOSTS), 30, "both hosts' heartbeats")
    written: dict[str, dict[str, list[str]]] = {name: {} for name in WORKSPACES}
    publisher = Publisher(f"redis://127.0.0.1:{m.redis_port}/0")
    sent = 0

    def publish(name: str, sid: str, turns: int = 3) -> None:
        nonlocal sent
        written[name][sid] = m.session(sid, turns, name)
        publisher.session_idle(name, sid)
        sent += 1

    try:
        for name in WORKSPACES:
            publish(name, f"a-{name}")
        assert all(r.ok for r in m.results(len(WORKSPACES), timeout=240))
        # Five workspaces move while sessions keep arriving for them.
        movers = WORKSPACES[:5]
        stop = threading.Event()

        def load() -> None:
            n = 0
            while not stop.is_set() and n < 200:
                publish(movers[n % len(movers)], f"m{n}-{movers[n % len(movers)]}", 2)
                n += 1
                stop.wait(0.15)

        feeding = threading.Thread(target=load)
        feeding.start()
        try:
            moved = [_move(m, name, HOSTS[(n + 1) % 2]) for n, name in enumerate(movers)]
        finally:
            stop.set()
            feeding.join()
        for done in moved:
            assert done.returncode == 0, done.stderr
        # h1's workers die mid-run and stay down 30 s; sessions for every workspace keep coming.
        for name in WORKSPACES:
            publish(name, f"b-{name}")
        m.kill("h1")
        down_since = time.monotonic()
        for name in WORKSPACES:
            publish(name, f"c-{name}")
        time.sleep(max(0.0, DOWN_S - (time.monotonic() - down_since)))
        m.start("h1")
        m.results(sent - len(WORKSPACES), timeout=300)
    finally:
        publisher.close()
    final = placement.placed()
    assert sorted(final) == WORKSPACES and placement.moves() == []
    for n, name in enumerate(WORKSPACES[:5]):
        assert final[name] == HOSTS[(n + 1) % 2], f"{name} moved"
    totals = {"turns": 0, "lost": 0, "duplicated": 0, "unmarked": 0, "partial_installs": 0}
    for name, host in final.items():
        memory = m.state(host) / "workspaces" / name / "memory"
        content = [(sid, node) for sid, ids in written[name].items() for node in ids]
        for key, value in exactly_once(memory, m.store, content).items():
            totals[key] += value
    assert totals == {**totals, "lost": 0, "duplicated": 0, "unmarked": 0, "partial_installs": 0}, totals
    assert totals["turns"] == sum(len(ids) for sessions in written.values() for ids in sessions.values())
    for name, host in final.items():  # after recovery, every replica equals its workspace
        memory = m.state(host) / "workspaces" / name / "memory"

        def caught_up(name: str = name, memory: Path = memory) -> bool:
            replica = placement.replica_of(name)
            return replica is not None and replica.applied == _head(memory)

        wait_for(caught_up, 120, f"{name}'s replica")
        replica = placement.replica_of(name)
        assert replica is not None and replica.host != host
        assert _head(m.state(replica.host) / "replicas" / name / "memory") == _head(memory)
