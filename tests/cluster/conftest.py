"""Real servers for cluster tests: our own redis-server on a free port, real Celery worker processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from scriptorium.schemas.events import IngestEnded
from scriptorium.sessions import NodeKind, SessionStore, open_store
from scriptorium.workspace import MemoryWorkspace
from tests.checks import exactly_once
from tests.helpers.reports import failed, show_logs
from tests.requirements import require
from tests.sessions_fixtures import T0, chain

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


class RedisServer:
    """A redis-server process with AOF on (as in production), restartable on the same port and data."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.dir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--maxmemory-policy",
                "noeviction",
                "--dir",
                str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        wait_for(lambda: _ping(client), 10, "redis-server to answer")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


def _ping(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    require("redis-server")
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


class Cluster:
    """Worker processes, a session store and the result stream of one test."""

    def __init__(self, tmp: Path, server: RedisServer) -> None:
        self.tmp = tmp
        self.server = server
        self.state = tmp / "state"
        self.sessions_url = f"sqlite:///{tmp / 'sessions.db'}"
        self.env = {
            **os.environ,
            "SCRIPTORIUM_BROKER_URL": server.url,
            "SCRIPTORIUM_STATE": str(self.state),
            "SCRIPTORIUM_SESSIONS_URL": self.sessions_url,
            "SCRIPTORIUM_TRIGGER_TOKENS": "0",
            "SCRIPTORIUM_RETRY_BASE_S": "0.2",
            "SCRIPTORIUM_RETRY_MAX_DELAY_S": "1",
            "SCRIPTORIUM_MAX_RETRIES": "8",
            "SCRIPTORIUM_VISIBILITY_MARGIN_S": "2",
            "SCRIPTORIUM_TASK_SOFT_TIME_LIMIT_S": "20",
            "SCRIPTORIUM_TASK_HARD_TIME_LIMIT_S": "25",
            "SCRIPTORIUM_LOCK_TTL_S": "3",
            "SCRIPTORIUM_QUARANTINE_AFTER": "2",
            "SCRIPTORIUM_UNACKED_RESTORE_INTERVAL_S": "1",
        }
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.store: SessionStore = open_store(self.sessions_url)
        self.redis = redis.Redis.from_url(server.url)
        self.read_from = "0-0"
        MemoryWorkspace.init(self.state / "memory").close()  # the operator creates the workspace

    def start_worker(
        self, name: str, concurrency: int = 1, app: str = "scriptorium.workers.app", command: bool = False, **env: str
    ) -> subprocess.Popen[bytes]:
        """A worker ``name@host`` of ``app``, once it is ready; with ``command``, started as an operator starts
        one (``scriptorium worker``, the project's app, gossip and mingle on)."""
        before = len(self.log(name))  # a worker started again waits for its own "ready."
        log = (self.tmp / f"worker-{name}.log").open("ab")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                *(("scriptorium.cli.main", "worker") if command else ("tests.helpers.celery_worker", app)),
                "--concurrency",
                str(concurrency),
                "--hostname",
                f"{name}@%h",
            ],
            cwd=ROOT,
            env={**self.env, **env},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.workers[name] = proc
        wait_for(lambda: "ready." in self.log(name)[before:], 30, f"worker {name} to be ready")
        return proc

    def log(self, name: str) -> str:
        path = self.tmp / f"worker-{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def pool_children(self, name: str) -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(self.workers[name].pid)], capture_output=True, text=True)
        return [int(pid) for pid in out.stdout.split()]

    def stop_worker(self, name: str) -> None:
        """SIGKILL one worker (its pool children too) and wait for it."""
        proc = self.workers.pop(name)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def shut_down(self, grace_s: float = 5.0) -> None:
        """The end of a test: every worker is asked to stop (SIGTERM: a warm shutdown, whose processes exit
        as they would in service, so a measuring tool sees what they ran), and killed after ``grace_s``."""
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.workers.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        self.stop_workers()

    def stop_workers(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.workers.clear()

    def session(self, sid: str, turns: int, workspace: str = "default", parent: str | None = None) -> list[str]:
        self.store.create_session(sid, {"provider": "test", "title": f"Session {sid}", "workspace": workspace})
        ids = [f"{sid}-t{i}" for i in range(turns)]
        nodes = chain(sid, ids, parent=parent)
        self.store.add_nodes(nodes, head=ids[-1], updated_at=T0)
        return ids

    def results(self, count: int, timeout: float = 60, session: str | None = None) -> list[IngestEnded]:
        """Wait for ``count`` more memory.ingest_ended entries on the stream (of one session, if given)."""
        found: list[IngestEnded] = []

        def poll() -> bool:
            try:
                entries = self.redis.xread({"scriptorium:ingest_ended": self.read_from}, block=200)
            except redis.RedisError:
                return False
            for _stream, items in entries:
                for entry_id, fields in items:
                    self.read_from = entry_id.decode()
                    result = IngestEnded.model_validate_json(fields[b"payload"])
                    if session is None or result.session_id == session:
                        found.append(result)
            return len(found) >= count

        wait_for(poll, timeout, f"{count} ingest_ended result(s)", interval=0)
        return found

    def memory(self, name: str = "default") -> Path:
        return self.state / "memory" if name == "default" else self.state / "workspaces" / name / "memory"

    def workspace(self, name: str = "default") -> MemoryWorkspace:
        return MemoryWorkspace(self.memory(name))

    def close(self) -> None:
        self.shut_down()
        self.store.close()


@pytest.fixture
def cluster(request: pytest.FixtureRequest, tmp_path: Path, redis_server: RedisServer) -> Iterator[Cluster]:
    made = Cluster(tmp_path, redis_server)
    yield made
    made.close()
    if failed(request.node):
        show_logs(tmp_path.glob("worker-*.log"))


def check_exactly_once(cluster: Cluster, sessions: dict[str, list[str]], workspace: str = "default") -> dict[str, int]:
    """Every content turn sent in is cited by exactly one record, marked in the session store, and
    the installed files equal git HEAD's tree with no install journal left (read before anything
    opens the workspace, whose open would run recovery)."""
    memory = cluster.memory(workspace)
    content = [
        (sid, node_id)
        for sid, ids in sessions.items()
        for node_id in ids
        if (node := cluster.store.get_node(sid, node_id)) is not None
        and node.kind in (NodeKind.USER, NodeKind.ASSISTANT)
    ]
    return exactly_once(memory, cluster.store, content)


def record_counts(name: str, counts: dict[str, int]) -> None:
    """Append fault-run counts to test-artifacts/faults.jsonl (for the closing note)."""
    out = ROOT / "test-artifacts"
    out.mkdir(exist_ok=True)
    with (out / "faults.jsonl").open("a") as handle:
        handle.write(json.dumps({"scenario": name, **counts}) + "\n")


FAULT_RUNS = int(os.environ.get("SCRIPTORIUM_FAULT_RUNS", "1"))
"""Loops per fault scenario: one in the suite (its time budget); fault campaigns set more."""
