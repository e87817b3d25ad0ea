"""What ``benchmarks/year.py`` drives and weighs: commands run to their end with their time, CPU and peak memory
(their whole process tree's), the hook daemon, the HTTP server, and the state's sizes on disk and git's objects."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hooks import free_port, stop_daemon

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
