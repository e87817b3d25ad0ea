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
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))

from startup_env import from_bytecode
from year_corpus import PROJECTS, YEAR, YearCorpus, project_cwd
from year_processes import CLI, KB, MB, Server, du, git_objects, measured, stop_daemon_and_wait, tail, wait_daemon
from year_report import Row, fmt, p50, print_tables, print_targets, summary

from scriptorium.defaults import DEFAULT_REPACK_LOOSE_OBJECTS
from scriptorium.workspace.packing import is_repacking, loose_estimate, repack_now

# -- one month's figures --------------------------------------------------------------------------------


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
