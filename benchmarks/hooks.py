"""Hook latency on a 10,000-record workspace: the command, the running server, and a bare Python start.

Builds a real workspace (archived sources, 100 topics of 100 records, a core
topic), warms the recall disk cache, starts ``scriptorium serve`` with a
runtime token, then measures, each repeat running all of them back to back:

* ``python_floor``: ``python -c pass`` with the same interpreter — the least any
  Python hook command costs;
* ``prompt_hook``: ``scriptorium hook`` with a UserPromptSubmit payload on stdin
  (what Claude Code's ``command`` hook runs on every prompt), answered as it is in
  use: by the hook daemon the first hook started (:mod:`scriptorium.runtimes.hooks.daemon`);
* ``prompt_hook_in_process``: the same command with no hook daemon
  (``SCRIPTORIUM_HOOK_DAEMON_IDLE_S=0``): settings, numpy and the index loaded each time;
* ``prompt_hook_http``: the same payload posted to ``/api/hooks`` of the running
  server, a new connection each time (what Claude Code's ``http`` hook does);
* ``session_start_hook``: ``scriptorium hook`` with a SessionStart payload (the daemon answering),
  and ``session_start_hook_in_process`` without one.

Targets: prompt_hook_p50 ≤ 6 × python_floor_p50; prompt_hook_http_p50 ≤ 0.25 ×
prompt_hook_p50. Last line: one JSON object (``prompt_hook_p50_ms``,
``prompt_hook_http_p50_ms``, ``python_floor_p50_ms``, ``session_start_hook_p50_ms``, and
``prompt_hook_in_process_p50_ms``, ``session_start_hook_in_process_p50_ms``).

Usage: python benchmarks/hooks.py [--repeats N] [--records N]
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
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import structlog

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange  # noqa: E402

SCRIPT = Path(sys.executable).with_name("scriptorium")
PER_TOPIC = 100
SOURCES = 2_000
WORDS = [f"w{n}" for n in range(5_000)]


def build(state: Path, records: int) -> None:
    rng = np.random.default_rng(7)
    ws = MemoryWorkspace.init(state / "memory")
    sources = [
        SourceMessage("bench", f"t{n // 100:03d}", f"m{n:05d}", "user", "2026-01-01T00:00:00Z", f"source {n}")
        for n in range(SOURCES)
    ]
    with ws.lock():
        paths = ws.archive_sources(sources)
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    changes = [
        TopicChange("topics/core.md", "create", "# Core\n\nReleases ship on Thursdays [k](bench/t000/m00000).\n")
    ]
    for topic in range(records // PER_TOPIC):
        lines = [f"# Topic {topic}", ""]
        for k in range(PER_TOPIC):
            n = topic * PER_TOPIC + k
            text = " ".join(WORDS[int(i)] for i in rng.zipf(1.3, size=int(rng.integers(10, 25))) % len(WORDS))
            source = n % SOURCES
            lines += [f"2025-03-{1 + n % 28:02d}: {text} [ev](bench/t{source // 100:03d}/m{source:05d})", ""]
        changes.append(TopicChange(f"topics/area-{topic % 10}/topic-{topic:05d}.md", "create", "\n".join(lines)))
    ws.apply_changes(changes, message="bench records")
    assert len(ws.snapshot().id_to_topic) == records + 1
    ws.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_command(state: Path, payload: dict[str, object], env: dict[str, str]) -> Callable[[], None]:
    body = json.dumps(payload)

    def call() -> None:
        command = [str(SCRIPT), "hook", "--state", str(state)]
        out = subprocess.run(command, input=body, capture_output=True, text=True, env=env, check=True)
        assert "additionalContext" in out.stdout, out.stderr

    return call


def wait_daemon(runtime: Path) -> None:
    """Until the hook daemon the first hooks started answers (its lock held, its socket bound)."""
    for _ in range(300):
        if list(runtime.glob("scriptorium/*.sock")):
            return
        time.sleep(0.1)
    raise SystemExit("the hook daemon did not start")


def stop_daemon(runtime: Path) -> None:
    for lock in runtime.glob("scriptorium/*.lock"):
        if pid := lock.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
    shutil.rmtree(runtime, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument(
        "--smoke", action="store_true", help="200 records, two rounds: that it runs, not its figures (CI)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.records, args.repeats = 200, 2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "bench", "cwd": "/", "prompt": "w1 w7 w42 w300"}
    start = {"hook_event_name": "SessionStart", "session_id": "bench", "cwd": "/", "source": "startup"}
    with tempfile.TemporaryDirectory(prefix="scriptorium-hooks-") as tmp:
        state = Path(tmp) / "state"
        t0 = time.perf_counter()
        build(state, args.records)
        print(f"workspace of {args.records} records built in {time.perf_counter() - t0:.1f} s")
        runtime = Path(tempfile.mkdtemp(prefix="sr-"))  # the daemon's socket folder (short: a path limit)
        env = {**os.environ, "SCRIPTORIUM_LOG_LEVEL": "WARNING", "XDG_RUNTIME_DIR": str(runtime)}
        alone = {**env, "SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "0"}
        create = [str(SCRIPT), "token", "create", "--scope", "runtime", "--state", str(state)]
        token = subprocess.run(create, capture_output=True, text=True, check=True, env=env).stdout.split()[-1]
        port = free_port()
        serve = [str(SCRIPT), "serve", "--state", str(state), "--port", str(port)]
        server = subprocess.Popen(serve, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        headers = {"Authorization": f"Bearer {token}"}
        try:
            for _ in range(200):
                try:
                    httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)

            body = json.dumps(prompt)

            def http_call() -> None:
                # A new TCP connection per hook, as a runtime's http hook makes; the standard library's
                # client, because a new httpx client builds an SSL context first (~15 ms, even for http).
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                try:
                    conn.request("POST", "/api/hooks", body, {**headers, "Content-Type": "application/json"})
                    answer = json.loads(conn.getresponse().read())
                finally:
                    conn.close()
                assert "additionalContext" in answer["hookSpecificOutput"], answer

            sides: dict[str, Callable[[], None]] = {
                "python_floor": lambda: subprocess.run([sys.executable, "-c", "pass"], check=True),
                "prompt_hook": run_command(state, prompt, env),
                "prompt_hook_in_process": run_command(state, prompt, alone),
                "prompt_hook_http": http_call,
                "session_start_hook": run_command(state, start, env),
                "session_start_hook_in_process": run_command(state, start, alone),
            }
            for call in sides.values():  # warm every side alike: disk cache, page cache, the server's index
                for _ in range(3):
                    call()
            wait_daemon(runtime)
            samples: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(args.repeats):
                for name, call in sides.items():
                    t = time.perf_counter()
                    call()
                    samples[name].append((time.perf_counter() - t) * 1000)
        finally:
            server.terminate()
            server.wait(10)
            stop_daemon(runtime)
    p50 = {name: statistics.median(values) for name, values in samples.items()}
    print(f"{'side':>20} {'p50 ms':>9} {'p95 ms':>9} {'x floor':>8}")
    for name, values in samples.items():
        p95 = sorted(values)[int(0.95 * (len(values) - 1))]
        print(f"{name:>20} {p50[name]:>9.1f} {p95:>9.1f} {p50[name] / p50['python_floor']:>8.2f}")
    print(
        f"in process (no daemon): {p50['prompt_hook_in_process'] / p50['python_floor']:.2f} x floor; "
        f"the daemon's answer takes {p50['prompt_hook'] / p50['prompt_hook_in_process']:.3f} of it"
    )
    print(
        f"targets: prompt hook <= 6 x floor ({p50['prompt_hook'] / p50['python_floor']:.2f}); "
        f"http <= 0.25 x command ({p50['prompt_hook_http'] / p50['prompt_hook']:.3f})"
    )
    print(
        json.dumps(
            {
                "prompt_hook_p50_ms": round(p50["prompt_hook"], 2),
                "prompt_hook_http_p50_ms": round(p50["prompt_hook_http"], 2),
                "python_floor_p50_ms": round(p50["python_floor"], 2),
                "session_start_hook_p50_ms": round(p50["session_start_hook"], 2),
                "prompt_hook_in_process_p50_ms": round(p50["prompt_hook_in_process"], 2),
                "session_start_hook_in_process_p50_ms": round(p50["session_start_hook_in_process"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
