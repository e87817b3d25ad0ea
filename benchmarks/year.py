"""A heavy year of use, a month at a time: what each operation costs as memory grows.

Generates a year of Claude Code transcripts from a fixed seed (:mod:`year_corpus`: 2,000 sessions a year
across 15 projects, about 102,000 user and assistant messages and 134 MB, with rewound forks, resumed
sessions and subagents, in Claude Code's own layout), then for each month, on the embedded default:

* writes that month's transcripts (new session files, resumed ones appended to, subagent files) and imports
  the whole projects folder as the watcher does: ``scriptorium ingest <projects> --state <state>`` in a
  process of its own (only what each file gained is read; every session touched gets its forced write).
  Every month holds the same amount of data, so its import time is comparable with every other month's:
  wall time, messages/s, CPU time and peak memory (of its processes, git's included), and any failed write;
* lets the maintenance the import left due finish (the background repack it set off, or one due but not yet
  started), so that no month's latencies are taken beside a repack (its time is the ``settle`` step's);
* measures the state's size on disk as ``du`` does (blocks in use, each file once): the session store,
  the sources, the topics, ``.git`` (with its loose objects and packs: ``git_packed`` is whether git's own
  ``gc --auto`` would find nothing to do — at most ``gc.auto``, 6,700 by default, loose objects and at most
  ``gc.autoPackLimit``, 50, packs), the rest, and the whole state beside the raw transcripts imported so far;
* with the hook daemon stopped (as it is after a quarter hour without a hook, when the watcher imports),
  runs the prompt hook once: the first prompt after the import (``cold``: its time, and whether the answer
  carried recall), then, once the daemon it started answers and every side is warmed alike (three calls each),
  ``--repeats`` rounds of: the prompt hook through the daemon (``scriptorium hook``, as Claude Code's
  command hook runs it), the same payload over HTTP (``POST /api/hooks`` of a running ``scriptorium serve``,
  a new connection each time) and SessionStart through the daemon — p50 and p95;
* ``scriptorium memory status`` (the command's wall time, median), one REST change (a ``create_record``
  through ``POST /api/memory/changes`` of the live server, median of several, each its own record) and the
  Timeline page's time to first byte (``GET /memory?section=timeline`` signed in, as a browser asks for it;
  the page's size too).

At the end, with the daemon stopped, a cold first prompt once more (``cold_first_prompt_has_recall`` is
whether it and every month's first prompt after its import carried recall; each is reported too), then
``scriptorium memory forget --session <a session of the first month> --purge-history``: its wall time and
peak memory (the largest process of its tree: git's included).

Figures are medians over warmed repeats; the JSON line reports the last month (``*_m12``, whatever
``--months``: the key names are the issue's) beside the first, and their ratios. Targets (issue 55):
``import_growth_m12_over_m1`` ≤ 1.5, ``state_disk_over_raw`` ≤ 3, ``git_packed``, ``timeline_ttfb_ms_m12``
≤ 500, ``status_ms_m12`` ≤ 300, ``session_start_ms_m12`` ≤ 1.3 × month 1's, ``change_ms_m12`` ≤ 1.3 ×
month 1's, ``prompt_hook_p50_ms_m12`` ≤ 1.2 × month 1's, ``purge_s_m12`` ≤ 30 and ``purge_peak_mb`` ≤ 300,
``cold_first_prompt_has_recall``. A step that fails is reported in the table with its reason, and the run
goes on. Prints tables, then as its last line one JSON object.

The hooks and the server run with ``SCRIPTORIUM_WATCH=false`` (no watcher sweep competes with what is
measured) and without any other ``SCRIPTORIUM_*`` setting of the caller's environment.

Usage: python benchmarks/year.py [--months 12] [--sessions 2000] [--seed 2025] [--repeats 20] [--keep DIR]
       python benchmarks/year.py --smoke    (2 months of 2 sessions: the CI size)
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import logging
import os
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import httpx
import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hooks import free_port, stop_daemon
from startup_env import from_bytecode
from year_corpus import PROJECTS, YEAR, Month, YearCorpus, project_cwd

from scriptorium.defaults import DEFAULT_REPACK_LOOSE_OBJECTS
from scriptorium.workspace.packing import is_repacking, loose_estimate, repack_now

_SCRIPT = Path(sys.executable).with_name("scriptorium")
CLI = (
    [str(_SCRIPT)]
    if _SCRIPT.exists()
    else [sys.executable, "-c", "import sys; from scriptorium.cli.entry import main; sys.exit(main())"]
)
"""The console script beside this interpreter (what the runtimes' hooks run), else the same entry point."""
GC_AUTO, GC_AUTO_PACK_LIMIT = 6700, 50
"""git's defaults for ``gc.auto`` and ``gc.autoPackLimit``: past either, ``git gc --auto`` would pack."""
KB = 1024
MB = 1024 * 1024

_WRAP = """
import json, os, resource, subprocess, sys, time
started = time.perf_counter()
child = subprocess.Popen(sys.argv[2:])
_, status, own = os.wait4(child.pid, 0)
child.returncode = os.waitstatus_to_exitcode(status)
wall = time.perf_counter() - started
tree = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    json.dump({"wall_s": wall, "cpu_s": own.ru_utime + own.ru_stime, "tree_cpu_s": tree.ru_utime + tree.ru_stime,
               "peak": own.ru_maxrss, "tree_peak": tree.ru_maxrss}, out)
sys.exit(child.returncode)
"""
"""Runs a command as its child and writes what ``wait4`` says of it: wall and CPU time, its peak resident size,
and of its whole tree (``RUSAGE_CHILDREN``: git's processes included) the CPU time and the largest peak."""


# -- processes ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Run:
    code: int
    out: str
    err: str
    wall_s: float
    cpu_s: float
    tree_cpu_s: float
    peak_mb: float
    tree_peak_mb: float


def measured(command: list[str], env: dict[str, str], timeout_s: float) -> Run:
    """``command`` run to its end in a process group of its own (killed whole past ``timeout_s``)."""
    scale = 1 if sys.platform == "darwin" else KB  # ru_maxrss: bytes on macOS, KiB on Linux
    with tempfile.TemporaryDirectory(prefix="year-run-") as tmp:
        report = Path(tmp) / "rusage.json"
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRAP, str(report), *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RuntimeError(f"{' '.join(command[-3:])} still running after {timeout_s:.0f} s: killed") from None
        usage = json.loads(report.read_text()) if report.exists() else {}
    return Run(
        proc.returncode,
        out,
        err,
        float(usage.get("wall_s", 0.0)),
        float(usage.get("cpu_s", 0.0)),
        float(usage.get("tree_cpu_s", 0.0)),
        usage.get("peak", 0) * scale / MB,
        usage.get("tree_peak", 0) * scale / MB,
    )


def tail(text: str, limit: int = 300) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "")[-limit:]


def daemon_pids(runtime: Path) -> list[int]:
    pids = []
    for lock in runtime.glob("scriptorium/*.lock"):
        with contextlib.suppress(OSError, ValueError):
            if text := lock.read_text().strip():
                pids.append(int(text))
    return pids


def daemon_up(runtime: Path) -> bool:
    return bool(list(runtime.glob("scriptorium/*.sock")))


def wait_daemon(runtime: Path, timeout_s: float = 60) -> bool:
    """Until the hook daemon a hook started answers (its socket bound); False if it never does."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon_up(runtime):
            return True
        time.sleep(0.05)
    return False


def stop_daemon_and_wait(runtime: Path, timeout_s: float = 30) -> None:
    """:func:`hooks.stop_daemon` (SIGTERM, its folder removed), then until its process is gone."""
    pids = daemon_pids(runtime)
    stop_daemon(runtime)
    deadline = time.monotonic() + timeout_s
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


class Server:
    """``scriptorium serve`` on a free port over the state; the owner's client and a signed-in page cookie."""

    def __init__(self, state: Path, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.log = log.open("ab")
        self.proc = subprocess.Popen(
            [*CLI, "serve", "--state", str(state), "--port", str(self.port)],
            env=env,
            stdout=self.log,
            stderr=self.log,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 300
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"scriptorium serve exited ({self.proc.returncode}): see {log.name}")
            try:
                if httpx.get(f"{self.url}/openapi.json", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("scriptorium serve did not answer within 300 s")
            time.sleep(0.1)
        self.owner = (state / "owner-token").read_text().strip()
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.owner}"}, timeout=600)
        self._cookie: str | None = None

    def cookie(self) -> str:
        """The page's session cookie, signed in with the owner token as the sign-in form posts it."""
        if self._cookie is None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            try:
                body = "token=" + self.owner
                conn.request("POST", "/memory/login", body, {"Content-Type": "application/x-www-form-urlencoded"})
                response = conn.getresponse()
                response.read()
            finally:
                conn.close()
            jar: SimpleCookie = SimpleCookie()
            for header in response.headers.get_all("Set-Cookie") or []:
                jar.load(header)
            if response.status != 303 or not jar:
                raise RuntimeError(f"sign-in answered {response.status} without a session cookie")
            self._cookie = "; ".join(f"{key}={morsel.value}" for key, morsel in jar.items())
        return self._cookie

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.log.close()


# -- sizes --------------------------------------------------------------------------------------------


def du(path: Path) -> int:
    """Bytes of disk in use under ``path``, as ``du`` counts them (allocated blocks, each inode once)."""
    seen: set[tuple[int, int]] = set()
    total, stack = 0, [str(path)]
    while stack:
        folder = stack.pop()
        try:
            st = os.lstat(folder)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
        if not stat.S_ISDIR(st.st_mode):
            continue
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def git(memory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(memory), *args], capture_output=True, text=True, check=True).stdout


def git_objects(memory: Path) -> dict[str, Any]:
    """Where the workspace's git keeps its objects, how many are loose, and whether ``gc --auto`` would pack."""
    git_dir = Path(git(memory, "rev-parse", "--absolute-git-dir").strip())
    counts: dict[str, int] = {}
    for line in git(memory, "count-objects", "-v").splitlines():
        key, _, value = line.partition(":")
        with contextlib.suppress(ValueError):
            counts[key.strip()] = int(value.strip())

    def setting(name: str, default: int) -> int:
        try:
            value = int(git(memory, "config", "--get", name).strip())
        except (subprocess.CalledProcessError, ValueError):
            return default
        return value if value > 0 else default  # 0 turns git's own gc off: the default threshold still says

    loose, packs = counts.get("count", 0), counts.get("packs", 0)
    packed = loose <= setting("gc.auto", GC_AUTO) and packs <= setting("gc.autoPackLimit", GC_AUTO_PACK_LIMIT)
    return {"dir": git_dir, "loose": loose, "in_pack": counts.get("in-pack", 0), "packs": packs, "packed": packed}


# -- one month's figures --------------------------------------------------------------------------------


@dataclass(slots=True)
class Row:
    month: int
    written: Month | None = None
    raw_bytes: int = 0
    """Raw transcripts written so far (bytes)."""
    import_s: float | None = None
    import_cpu_s: float | None = None
    import_peak_mb: float | None = None
    sources: int | None = None
    records: int | None = None
    failed: int | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    git: dict[str, Any] = field(default_factory=dict)
    cold_ms: float | None = None
    cold_recall: bool | None = None
    prompt: list[float] = field(default_factory=list)
    prompt_recall: list[bool] = field(default_factory=list)
    http: list[float] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    status_ms: float | None = None
    change_ms: float | None = None
    timeline_ttfb_ms: float | None = None
    timeline_kb: float | None = None
    errors: list[str] = field(default_factory=list)
    spent: dict[str, float] = field(default_factory=dict)
    """Seconds each step took, measuring included (where a run's time goes)."""

    def step(self, name: str, call: Callable[[], None]) -> None:
        """Run one measurement; a failure is noted with its reason and the month goes on."""
        t0 = time.monotonic()
        try:
            call()
        except Exception as exc:
            self.errors.append(f"{name}: {type(exc).__name__}: {str(exc).strip()[:300]}")
        finally:
            self.spent[name] = self.spent.get(name, 0.0) + time.monotonic() - t0


def p50(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def sample(call: Callable[[], float], repeats: int, warm: int = 1, budget_s: float = 120.0) -> list[float]:
    """``call()``'s figures over ``repeats`` timed runs after ``warm`` untimed ones; a slow call (one past the
    budget's tenth) skips the rest of the warm-up, and the runs stop once ``budget_s`` is spent (one at least)."""
    started = time.monotonic()
    for _ in range(warm):
        t0 = time.monotonic()
        call()
        if time.monotonic() - t0 > budget_s / 10:
            break
    values: list[float] = []
    while len(values) < repeats:
        values.append(call())
        if time.monotonic() - started > budget_s:
            break
    return values


class Bench:
    """The run: the corpus, the state, and the processes measured against it."""

    def __init__(self, work: Path, args: argparse.Namespace) -> None:
        self.args = args
        self.work = work
        self.corpus = YearCorpus(work / "claude", args.seed, args.sessions)
        self.state = work / "state"
        self.runtime = Path(tempfile.mkdtemp(prefix="sr-"))  # the daemon's socket folder (short: a path limit)
        clean = {k: v for k, v in os.environ.items() if not k.startswith("SCRIPTORIUM_")}
        self.env = {
            **from_bytecode(clean, work / "pycache"),  # timed commands start as an installed package's do
            "SCRIPTORIUM_LOG_LEVEL": "WARNING",
            "SCRIPTORIUM_WATCH": "false",
            "XDG_RUNTIME_DIR": str(self.runtime),
        }
        self.runtime_token = ""
        self.warm = 0 if args.smoke else 1
        """Untimed runs before status, a change and the timeline are timed (the hooks: three rounds, the smoke one)."""
        self.changes = 1 if args.smoke else max(args.samples, 9)
        """Timed REST changes a month: each is a commit with its fsync, whose time varies by tens of percent from
        one to the next on a shared disk (month 12 over month 1 read 1.43 with five and 0.8 in process)."""
        self.prompts: list[dict[str, Any]] = []
        self.start_payload: dict[str, Any] = {}
        self.server: Server | None = None

    # -- setup ----------------------------------------------------------------------------------------

    def setup(self) -> None:
        """An empty workspace (so the first month's import does not make it) and the hooks' runtime token, as
        ``scriptorium memory init`` and ``scriptorium token create --scope runtime`` make them."""
        from scriptorium.access.tokens import TokenStore
        from scriptorium.workspace import MemoryWorkspace

        MemoryWorkspace.init(self.state / "memory").close()
        _record, self.runtime_token = TokenStore(self.state).create("runtime", None, None, [])

    def choose_payloads(self) -> None:
        """Prompts about the first month's subjects (each month asks the same), and a SessionStart in the
        busiest project."""
        self.prompts = [
            {"hook_event_name": "UserPromptSubmit", "session_id": "year-bench", "cwd": cwd, "prompt": prompt}
            for cwd, prompt in self.corpus.prompts(8)
        ]
        self.start_payload = {
            "hook_event_name": "SessionStart",
            "session_id": "year-bench-start",
            "cwd": project_cwd(PROJECTS[0]),
            "source": "startup",
        }

    # -- the steps of a month -------------------------------------------------------------------------

    def ingest(self, row: Row) -> None:
        command = [*CLI, "ingest", str(self.corpus.projects), "--state", str(self.state), "--json"]
        run = measured(command, self.env, self.args.step_timeout)
        row.import_s, row.import_cpu_s, row.import_peak_mb = run.wall_s, run.tree_cpu_s, run.tree_peak_mb
        try:
            payload = json.loads(run.out)
        except json.JSONDecodeError:
            raise RuntimeError(f"exit {run.code}: {tail(run.err) or tail(run.out)}") from None
        row.sources, row.records, row.failed = payload.get("sources"), payload.get("records"), payload.get("failed")
        for failure in payload.get("failures") or []:
            row.errors.append(f"import: {failure.get('session')}: {failure.get('reason')}: {failure.get('message')}")
        if run.code != 0 and not payload.get("failures"):
            row.errors.append(f"import: exit {run.code}: {tail(run.err)}")

    def measure_sizes(self, row: Row) -> None:
        memory = self.state / "memory"
        row.git = git_objects(memory)
        parts = {
            "sessions": du(self.state / "sessions"),
            "sources": du(memory / "sources"),
            "topics": du(memory / "topics"),
            "git": du(row.git["dir"]),
            "state": du(self.state),
        }
        parts["other"] = parts["state"] - sum(v for k, v in parts.items() if k != "state")
        row.sizes = parts

    def hook(self, payload: dict[str, Any]) -> tuple[float, str]:
        """One ``scriptorium hook`` (ms, the additionalContext it answered)."""
        t0 = time.perf_counter()
        done = subprocess.run(
            [*CLI, "hook", "--state", str(self.state)],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
        )
        ms = (time.perf_counter() - t0) * 1000
        if done.returncode != 0:
            raise RuntimeError(f"hook exit {done.returncode}: {tail(done.stderr)}")
        return ms, context_of(json.loads(done.stdout) if done.stdout.strip() else {})

    def http_hook(self, payload: dict[str, Any]) -> tuple[float, str]:
        """The same payload posted to ``/api/hooks``, a new connection each time (as a runtime's http hook)."""
        assert self.server is not None
        body = json.dumps(payload)
        headers = {"Authorization": f"Bearer {self.runtime_token}", "Content-Type": "application/json"}
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=120)
        try:
            conn.request("POST", "/api/hooks", body, headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        ms = (time.perf_counter() - t0) * 1000
        if response.status != 200:
            raise RuntimeError(f"/api/hooks answered {response.status}: {raw[:200]!r}")
        return ms, context_of(json.loads(raw) if raw.strip() else {})

    def cold_prompt(self) -> tuple[float, bool]:
        """With no hook daemon up: the first prompt's time, and whether its answer carried recall."""
        stop_daemon_and_wait(self.runtime)
        ms, context = self.hook(self.prompts[0])
        return ms, 'kind="recall"' in context

    def hooks(self, row: Row) -> None:
        repeats = self.args.repeats
        row.step("cold prompt", lambda: self._cold(row))
        if not wait_daemon(self.runtime):
            row.errors.append("hooks: the hook daemon did not start within 60 s (hooks answered in process)")
        for _ in range(
            1 if self.args.smoke else 3
        ):  # every side warmed alike: the daemon's and the server's index, the page cache
            for n, payload in enumerate(self.prompts[:3]):
                self.hook(payload)
                with contextlib.suppress(Exception):
                    self.http_hook(self.prompts[n])
            self.hook(self.start_payload)
        sides: dict[str, Callable[[int], None]] = {
            "prompt hook": lambda i: self._prompt(row, i),
            "http hook": lambda i: row.http.append(self.http_hook(self.prompts[i % len(self.prompts)])[0]),
            "SessionStart": lambda i: row.start.append(self.hook(self.start_payload)[0]),
        }
        failed: set[str] = set()
        for i in range(repeats):
            for name, side in sides.items():
                if name in failed:
                    continue
                try:
                    side(i)
                except Exception as exc:
                    failed.add(name)
                    row.errors.append(f"{name}: {type(exc).__name__}: {str(exc).strip()[:300]}")

    def _cold(self, row: Row) -> None:
        row.cold_ms, row.cold_recall = self.cold_prompt()

    def _prompt(self, row: Row, i: int) -> None:
        ms, context = self.hook(self.prompts[i % len(self.prompts)])
        row.prompt.append(ms)
        row.prompt_recall.append('kind="recall"' in context)

    def status(self, row: Row) -> None:
        def once() -> float:
            t0 = time.perf_counter()
            done = subprocess.run(
                [*CLI, "memory", "status", "--state", str(self.state)],
                capture_output=True,
                text=True,
                env=self.env,
                timeout=self.args.step_timeout,
            )
            ms = (time.perf_counter() - t0) * 1000
            if done.returncode != 0:
                raise RuntimeError(f"exit {done.returncode}: {tail(done.stderr)}")
            return ms

        row.status_ms = p50(sample(once, self.args.samples, self.warm))

    def change(self, row: Row) -> None:
        """One structured change through the live server's REST API, citing a source of this month, into a
        topic of this month's (each month's changes meet a topic of the same size)."""
        assert self.server is not None and row.written is not None and row.written.cited is not None
        session, message = row.written.cited
        counter = [0]

        def once() -> float:
            counter[0] += 1
            body = {
                "memory_changes": [
                    {
                        "op": "create_record",
                        "content": f"Year benchmark fact {row.month}.{counter[0]}: the nightly reorganize runs at "
                        "three.",
                        "time": f"{YEAR + (row.month - 1) // 12}-{(row.month - 1) % 12 + 1:02d}-28",
                        "sources": [{"source": f"claude-code/{session}/{message}", "label": "reorganize"}],
                        # A topic of the month's own: a change costs its topic's parse, so one topic taking every
                        # month's changes would grow twelvefold and be timed as the memory's growth.
                        "destination": {"topic_path": f"topics/bench/month-{row.month:02d}.md", "headings": ["Facts"]},
                    }
                ],
                "message": f"year benchmark change {row.month}.{counter[0]}",
            }
            assert self.server is not None
            t0 = time.perf_counter()
            response = self.server.client.post("/api/memory/changes", json=body)
            ms = (time.perf_counter() - t0) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"answered {response.status_code}: {response.text[:300]}")
            return ms

        row.change_ms = p50(sample(once, self.changes, self.warm))

    def timeline(self, row: Row) -> None:
        """``GET /memory?section=timeline`` as a signed-in browser asks for it: time to the first byte (the
        status line and headers), and the page's size."""
        assert self.server is not None
        cookie = self.server.cookie()
        headers = {
            "Cookie": cookie,
            "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
            "Accept-Encoding": "identity",
            "User-Agent": "Mozilla/5.0 (scriptorium year benchmark)",
        }
        sizes: list[int] = []

        def once() -> float:
            assert self.server is not None
            conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=self.args.step_timeout)
            try:
                t0 = time.perf_counter()
                conn.request("GET", "/memory?section=timeline", headers=headers)
                response = conn.getresponse()
                ttfb = (time.perf_counter() - t0) * 1000
                page = response.read()
            finally:
                conn.close()
            if response.status != 200:
                raise RuntimeError(f"answered {response.status}: {page[:200]!r}")
            sizes.append(len(page))
            return ttfb

        row.timeline_ttfb_ms = p50(sample(once, self.args.samples, self.warm))
        row.timeline_kb = sizes[-1] / KB if sizes else None

    def month(self, month: int, raw_so_far: int) -> Row:
        row = Row(month)
        written = self.corpus.write_month(month)
        row.written, row.raw_bytes = written, raw_so_far + written.bytes
        if month == 1:
            self.choose_payloads()
        os.sync()  # the transcripts on disk before the import is timed, as the runtime wrote them long before
        print(
            f"month {month}: {written.new_sessions} new sessions, {written.resumed} resumed, {written.forks} forks, "
            f"{written.subagents} subagents: {written.messages:,} messages, {written.bytes / MB:.1f} MB",
            flush=True,
        )
        row.step("import", lambda: self.ingest(row))
        print(
            f"  imported in {fmt(row.import_s, '.1f')} s ({fmt(row.import_cpu_s, '.1f')} s CPU); measuring", flush=True
        )
        row.step("settle", self.settle)
        row.step("sizes", lambda: self.measure_sizes(row))
        row.step("serve", self.start_server)
        try:
            row.step("hooks", lambda: self.hooks(row))
            row.step("status", lambda: self.status(row))
            if self.server is not None:
                row.step("change", lambda: self.change(row))
                row.step("timeline", lambda: self.timeline(row))
        finally:
            if self.server is not None:
                self.server.close()
                self.server = None
            stop_daemon_and_wait(self.runtime)
        spent = ", ".join(f"{name} {seconds:.1f}" for name, seconds in row.spent.items() if name != "import")
        print(f"  measured (s: {spent})", flush=True)
        return row

    def settle(self) -> None:
        """The maintenance the import left due, done before anything is measured: the background repack an
        install set off is waited for, and one that is due but not started (the loose objects past the
        threshold after the last install) runs now. Otherwise a month whose import ended just under the
        threshold has its repack set off by the first timed change, and every latency of that month is taken
        beside it (its time is the ``settle`` step's, printed with the others)."""
        git_dir = self.state / "memory" / ".git"
        if loose_estimate(git_dir / "objects") > DEFAULT_REPACK_LOOSE_OBJECTS or is_repacking(git_dir):
            repack_now(git_dir)  # waits for a running one first, then packs what is left loose

    def start_server(self) -> None:
        self.server = Server(self.state, self.env, self.work / "serve.log")

    def purge(self) -> dict[str, Any]:
        """``forget --session <the first month's first session> --purge-history``: time, peak memory, commits."""
        first = (self.corpus.by_month.get(1) or self.corpus.sessions)[0]
        command = [
            *CLI,
            "memory",
            "forget",
            "--session",
            first.id,
            "--purge-history",
            "--why",
            "year benchmark",
            "--state",
            str(self.state),
            "--json",
        ]
        run = measured(command, self.env, self.args.step_timeout)
        if run.code != 0:
            raise RuntimeError(f"exit {run.code}: {tail(run.err) or tail(run.out)}")
        payload = json.loads(run.out)
        purge = payload.get("purge") or {}
        return {
            "session": first.id,
            "s": run.wall_s,
            "cpu_s": run.tree_cpu_s,
            "peak_mb": run.peak_mb,
            "tree_peak_mb": run.tree_peak_mb,
            "commits": purge.get("commits_rewritten"),
            "deleted": len(payload.get("deleted") or []),
            "sources": len(payload.get("sources") or []),
        }

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
        stop_daemon_and_wait(self.runtime)
        shutil.rmtree(self.runtime, ignore_errors=True)


def context_of(answer: dict[str, Any]) -> str:
    output = answer.get("hookSpecificOutput") if isinstance(answer, dict) else None
    return str(output.get("additionalContext") or "") if isinstance(output, dict) else ""


# -- the report -----------------------------------------------------------------------------------------


def fmt(value: float | int | None, spec: str = ".0f") -> str:
    return "—" if value is None else format(value, spec)


def ratio(last: float | None, first: float | None) -> float | None:
    return None if last is None or not first else last / first


def print_tables(rows: list[Row]) -> None:
    print()
    print("import (CPU and peak of its processes, git's included) and storage (MB as du counts them; loose objects)")
    head = (
        f"{'month':>5} {'msgs':>6} {'import s':>9} {'msg/s':>7} {'cpu s':>7} {'peak MB':>8} {'failed':>6} "
        f"{'store':>7} {'sources':>8} {'topics':>7} {'.git':>7} {'loose':>7} {'packs':>5} {'other':>7} "
        f"{'state':>7} {'raw':>6} {'x raw':>6}"
    )
    print(head)
    for r in rows:
        msgs = r.sources if r.sources is not None else (r.written.messages if r.written else None)
        rate = msgs / r.import_s if msgs and r.import_s else None
        size = {k: v / MB for k, v in r.sizes.items()}
        print(
            f"{r.month:>5} {fmt(msgs, ','):>6} {fmt(r.import_s, '.1f'):>9} {fmt(rate, '.0f'):>7} "
            f"{fmt(r.import_cpu_s, '.1f'):>7} {fmt(r.import_peak_mb, '.0f'):>8} {fmt(r.failed):>6} "
            f"{fmt(size.get('sessions'), '.1f'):>7} {fmt(size.get('sources'), '.1f'):>8} "
            f"{fmt(size.get('topics'), '.1f'):>7} {fmt(size.get('git'), '.1f'):>7} {fmt(r.git.get('loose'), ','):>7} "
            f"{fmt(r.git.get('packs')):>5} {fmt(size.get('other'), '.1f'):>7} {fmt(size.get('state'), '.1f'):>7} "
            f"{r.raw_bytes / MB:>6.1f} {fmt(ratio(r.sizes.get('state'), r.raw_bytes), '.2f'):>6}"
        )
    print()
    print("latency (ms; prompt and SessionStart hooks through the daemon, http: POST /api/hooks)")
    print(
        f"{'month':>5} {'cold':>7} {'recall':>6} {'prompt p50':>10} {'p95':>6} {'recall':>6} {'http p50':>8} "
        f"{'p95':>6} {'start p50':>9} {'p95':>6} {'status':>7} {'change':>7} {'timeline':>9} {'page KB':>8}"
    )
    for r in rows:
        recall = f"{sum(r.prompt_recall)}/{len(r.prompt_recall)}" if r.prompt_recall else "—"
        cold = "—" if r.cold_recall is None else ("yes" if r.cold_recall else "no")
        print(
            f"{r.month:>5} {fmt(r.cold_ms):>7} {cold:>6} {fmt(p50(r.prompt), '.1f'):>10} {fmt(p95(r.prompt)):>6} "
            f"{recall:>6} {fmt(p50(r.http), '.1f'):>8} {fmt(p95(r.http)):>6} {fmt(p50(r.start), '.1f'):>9} "
            f"{fmt(p95(r.start)):>6} {fmt(r.status_ms):>7} {fmt(r.change_ms, '.1f'):>7} "
            f"{fmt(r.timeline_ttfb_ms):>9} {fmt(r.timeline_kb, ',.0f'):>8}"
        )
    errors = [(r.month, e) for r in rows for e in r.errors]
    if errors:
        print()
        print("failed steps:")
        for month, error in errors:
            print(f"  month {month}: {error}")


def summary(rows: list[Row], purge: dict[str, Any], cold: tuple[float | None, bool | None]) -> dict[str, Any]:
    first, last = rows[0], rows[-1]
    raw = last.raw_bytes

    def r3(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    state = last.sizes.get("state")
    colds = [bool(r.cold_recall) for r in rows]
    return {
        "import_growth_m12_over_m1": r3(ratio(last.import_s, first.import_s)),
        "state_disk_over_raw": r3(ratio(state, raw)),
        "git_packed": last.git.get("packed"),
        "timeline_ttfb_ms_m12": r3(last.timeline_ttfb_ms),
        "status_ms_m12": r3(last.status_ms),
        "session_start_ms_m12": r3(p50(last.start)),
        "change_ms_m12": r3(last.change_ms),
        "prompt_hook_p50_ms_m12": r3(p50(last.prompt)),
        "purge_s_m12": r3(purge.get("s")),
        "purge_peak_mb": r3(purge.get("tree_peak_mb")),
        "cold_first_prompt_has_recall": None if cold[1] is None else cold[1] and all(colds),
        "import_s_m1": r3(first.import_s),
        "import_s_m12": r3(last.import_s),
        "import_cpu_s_m1": r3(first.import_cpu_s),
        "import_cpu_s_m12": r3(last.import_cpu_s),
        "import_cpu_growth_m12_over_m1": r3(ratio(last.import_cpu_s, first.import_cpu_s)),
        "session_start_ms_m1": r3(p50(first.start)),
        "change_ms_m1": r3(first.change_ms),
        "prompt_hook_p50_ms_m1": r3(p50(first.prompt)),
        "prompt_hook_http_p50_ms_m1": r3(p50(first.http)),
        "prompt_hook_http_p50_ms_m12": r3(p50(last.http)),
        "status_ms_m1": r3(first.status_ms),
        "timeline_ttfb_ms_m1": r3(first.timeline_ttfb_ms),
        "session_start_m12_over_m1": r3(ratio(p50(last.start), p50(first.start))),
        "change_m12_over_m1": r3(ratio(last.change_ms, first.change_ms)),
        "prompt_hook_m12_over_m1": r3(ratio(p50(last.prompt), p50(first.prompt))),
        "cold_first_prompt_ms": r3(cold[0]),
        "cold_first_prompt_final_has_recall": cold[1],
        "cold_first_prompts_after_import_with_recall": f"{sum(colds)}/{len(colds)}",
        "import_failed_sessions_m12": last.failed,
        "last_month": last.month,
        "messages": sum(r.written.messages for r in rows if r.written),
        "raw_mb": r3(raw / MB),
        "state_mb": r3(state / MB if state is not None else None),
        "errors": sum(len(r.errors) for r in rows) + int("error" in purge),
    }


def print_targets(result: dict[str, Any], last: int) -> None:
    def check(name: str, value: Any, ok: bool | None, target: str) -> None:
        verdict = "—" if ok is None else ("met" if ok else "MISSED")
        print(
            f"  {name:<34} {fmt(value, '.3f') if isinstance(value, float) else str(value):>10}  {target:<28} {verdict}"
        )

    def at_most(value: float | None, limit: float | None) -> bool | None:
        return None if value is None or limit is None else value <= limit

    def times(key: str, factor: float) -> float | None:
        first = result.get(key.replace("_m12", "_m1"))
        return None if first is None else factor * first

    print()
    print(f"targets (issue 55; m12 is month {last} of this run)")
    growth = result["import_growth_m12_over_m1"]
    check(f"import m{last} / m1", growth, at_most(growth, 1.5), "<= 1.5")
    check(f"  (its CPU m{last} / m1)", result["import_cpu_growth_m12_over_m1"], None, "(beside it)")
    check("state on disk / raw", result["state_disk_over_raw"], at_most(result["state_disk_over_raw"], 3), "<= 3")
    check("git packed", result["git_packed"], result["git_packed"], "true")
    for key, limit in (("timeline_ttfb_ms_m12", 500.0), ("status_ms_m12", 300.0)):
        check(key, result[key], at_most(result[key], limit), f"<= {limit:.0f} ms")
    for key, factor in (("session_start_ms_m12", 1.3), ("change_ms_m12", 1.3), ("prompt_hook_p50_ms_m12", 1.2)):
        limit = times(key, factor)
        check(key, result[key], at_most(result[key], limit), f"<= {factor} x m1 ({fmt(limit, '.1f')} ms)")
    check("purge_s_m12", result["purge_s_m12"], at_most(result["purge_s_m12"], 30), "<= 30 s")
    check("purge_peak_mb", result["purge_peak_mb"], at_most(result["purge_peak_mb"], 300), "<= 300 MB")
    recall = result["cold_first_prompt_has_recall"]
    after = result["cold_first_prompts_after_import_with_recall"]
    check("cold_first_prompt_has_recall", recall, recall, f"true (after imports: {after})")


@contextlib.contextmanager
def work_folder(keep: Path | None) -> Iterator[Path]:
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="scriptorium-year-") as tmp:
            yield Path(tmp)
        return
    keep = keep.expanduser().resolve()
    if keep.exists() and any(keep.iterdir()):
        raise SystemExit(f"--keep {keep}: not empty (the run writes a new year there)")
    keep.mkdir(parents=True, exist_ok=True)
    yield keep


def main() -> None:
    os.umask(0o077)  # as the command: the state is the user's alone
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--months", type=int, default=12, help="months to generate and import (default 12)")
    parser.add_argument(
        "--sessions", type=int, default=2000, help="sessions a year (default 2,000); each month gets a twelfth"
    )
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument("--repeats", type=int, default=20, help="timed rounds of the hooks each month")
    parser.add_argument("--samples", type=int, default=3, help="timed runs of status, change and the timeline")
    parser.add_argument("--step-timeout", type=float, default=3600.0, help="seconds before a step is killed")
    parser.add_argument("--keep", type=Path, default=None, help="work in DIR (transcripts and state) and keep it")
    parser.add_argument("--smoke", action="store_true", help="the smallest size: 2 months of 2 sessions (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.months, args.sessions, args.repeats, args.samples = 2, 24, 3, 1
    if args.months < 1 or args.sessions < 1:
        raise SystemExit("--months and --sessions take a positive number")
    rows: list[Row] = []
    purge: dict[str, Any] = {}
    cold: tuple[float | None, bool | None] = (None, None)
    started = time.monotonic()
    with work_folder(args.keep) as work:
        bench = Bench(work, args)
        try:
            bench.setup()
            per_month = bench.corpus.per_month
            print(
                f"{args.months} month(s) of {per_month} sessions ({args.sessions} a year), seed {args.seed}: "
                f"{bench.corpus.messages_per_month:,} messages a month; working in "
                f"{'a temporary folder' if args.keep is None else work}",
                flush=True,
            )
            raw = 0
            for month in range(1, args.months + 1):
                row = bench.month(month, raw)
                raw = row.raw_bytes
                rows.append(row)
            print("the end: a cold first prompt, then a purge of one session", flush=True)
            try:
                cold = bench.cold_prompt()
            except Exception as exc:
                rows[-1].errors.append(f"cold first prompt: {type(exc).__name__}: {str(exc).strip()[:300]}")
            wait_daemon(bench.runtime, 10)
            stop_daemon_and_wait(bench.runtime)
            try:
                purge = bench.purge()
            except Exception as exc:
                purge = {"error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
        finally:
            bench.close()
        git_after = None
        with contextlib.suppress(Exception):
            git_after = du(git_objects(bench.state / "memory")["dir"]) / MB
    print_tables(rows)
    print()
    if "error" in purge:
        print(f"purge: failed: {purge['error']}")
    else:
        print(
            f"forget --purge-history of session {purge['session']} (month 1): {purge['s']:.1f} s, "
            f"{purge['cpu_s']:.1f} s CPU, peak {purge['peak_mb']:.0f} MB (its process), "
            f"{purge['tree_peak_mb']:.0f} MB (the largest of its tree); {purge['commits']} commit(s) rewritten, "
            f"{purge['deleted']} record(s), {purge['sources']} source(s); .git after: {fmt(git_after, '.1f')} MB"
        )
    print(
        f"cold first prompt (hook daemon stopped): {fmt(cold[0])} ms, "
        f"{'with recall' if cold[1] else 'WITHOUT recall' if cold[1] is False else 'failed'}"
    )
    result = summary(rows, purge, cold)
    print_targets(result, rows[-1].month)
    print(f"\n{len(rows)} month(s) in {time.monotonic() - started:.0f} s")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
