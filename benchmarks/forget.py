"""Forgetting at scale: a forget beside a bare delete transaction, and a history purge beside ``git gc``.

Builds a 10,000-record workspace over 100,000 archived sources and a copy of it, then, each round on a
thread of its own (the order of the two alternating between rounds):

* ``forget``: ``scriptorium.changes.forget.forget`` of one thread (100 sources; the 100 records citing them
  deleted, the sources redacted to tombstones, the recall cache and vectors let go) — no purge;
* ``bare delete``: the same 100 records deleted by one structured ``delete_record`` transaction on another
  copy — the floor: a forget is that transaction plus the tombstones and the derived state;
* and once at the end, ``purge``: ``scriptorium.workspace.purge.purge_history`` of every forgotten thread
  (rewriting main, expiring reflogs, ``git gc --prune=now``) beside ``git gc --prune=now`` of the copy.

Targets: ``forget_p50_ms / bare_delete_p50_ms`` ≤ 2 (``forget_ratio``); the purge is reported beside the
gc (``purge_vs_gc_ratio``).

Then a purge of a long history (issue 55): ``--history-commits`` commits (2,000) over ``--history-sessions``
conversations (500), in the shapes a year of imports leaves (:mod:`tests.workspace.history`: one flat folder
of every session's sources, one of every conversation topic, day files, project topics citing two
conversations), the second conversation forgotten (so every later commit is rewritten), then
``purge_history`` run in a process of its own: its wall and CPU time (and the CPU time of the git processes
it ran: ``git log``, ``cat-file``, ``fast-import``, the closing ``gc``), the peak resident memory of that
process and what it was before the purge (the imports and the installed state). ``--history-only`` runs that
arm alone. Before issue 55 the same purge took 86 s (30 s of CPU) and its process peaked 280 MB above where
it started; after, 6 s (1.2 s of CPU) and nothing measurable above it.

Prints a table, then one JSON line.

Usage: python benchmarks/forget.py [--records 10000] [--sources 100000] [--rounds 9]
       [--history-commits 2000] [--history-sessions 500] [--history-only]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workspace_fixture import build_workspace, scratch

from scriptorium.changes.forget import Selection, forget
from scriptorium.changes.structured import DeleteRecord, update_records
from scriptorium.workspace import MemoryWorkspace, SourceMessage
from scriptorium.workspace.purge import purge_history
from tests.workspace.history import build_history, session_id

THREAD = "bench/thread-00005"


def _citing(ws: MemoryWorkspace, thread: str) -> list[str]:
    """The records citing a source of ``thread`` (what the forget deletes: each cites one source)."""
    provider, name = thread.split("/")
    folder = SourceMessage(provider, name, "msg-000", "user", "", "").path.rsplit("/", 1)[0] + "/"  # sharded
    snap = ws.snapshot()
    return sorted(
        r.memory_id
        for t in snap.topics.values()
        for r in t.records
        if any(p.startswith(folder) for p in t.cited_paths(r))
    )


def _purge_child(root: str, paths_file: str) -> None:
    """The purge of the long history, in this process alone: one JSON line of what it cost."""
    paths = json.loads(Path(paths_file).read_text())
    ws = MemoryWorkspace(Path(root))
    ws.snapshot()  # the installed state, as the forget before it left it read
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, cpu0 = time.perf_counter(), time.process_time()
    done = purge_history(ws, paths)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    ws.close()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "s": wall,
                "cpu_s": cpu,
                "children_cpu_s": children.ru_utime + children.ru_stime,
                "before_mb": before,
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "commits": done["commits_rewritten"],
            }
        )
    )


def long_history(commits: int, sessions: int) -> dict[str, float]:
    """Build the long history, forget its second conversation, and purge it in a child process."""
    with scratch("scriptorium-forget-history-") as scratch_dir:
        tmp_name = str(scratch_dir)
        root = Path(tmp_name) / "memory"
        t0 = time.perf_counter()
        build_history(root, commits, sessions)
        built = time.perf_counter() - t0
        with MemoryWorkspace(root) as ws:
            paths = forget(ws, Selection(thread=f"claude-code/{session_id(1)}"), why="benchmark")["paths"]
        (Path(tmp_name) / "paths.json").write_text(json.dumps(paths))
        os.sync()
        child = subprocess.run(
            [sys.executable, __file__, "--purge-child", str(root), str(Path(tmp_name) / "paths.json")],
            capture_output=True,
            text=True,
            check=True,
        )
        cost: dict[str, float] = json.loads(child.stdout.strip().splitlines()[-1])
        git_mb = sum(f.stat().st_size for f in (root / ".git").rglob("*") if f.is_file()) / 1e6
    print(
        f"long history: {commits} commits, {sessions} conversations (built in {built:.1f} s), one forgotten: "
        f"purge {cost['s']:.2f} s ({cost['cpu_s']:.2f} s CPU, git {cost['children_cpu_s']:.2f} s), "
        f"{cost['commits']:.0f} commit(s) rewritten; its process peaked at {cost['peak_mb']:.0f} MB "
        f"({cost['before_mb']:.0f} MB before it); "
        f".git after {git_mb:.1f} MB"
    )
    return {
        "history_commits": commits,
        "history_purge_s": round(cost["s"], 2),
        "history_purge_cpu_s": round(cost["cpu_s"], 2),
        "history_purge_rss_before_mb": round(cost["before_mb"], 1),
        "history_purge_peak_mb": round(cost["peak_mb"], 1),
        "history_commits_rewritten": int(cost["commits"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--sources", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--history-commits", type=int, default=2_000)
    parser.add_argument("--history-sessions", type=int, default=500)
    parser.add_argument("--history-only", action="store_true", help="only the purge of a long history")
    parser.add_argument("--purge-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="200 records, one round, a 40-commit history: that it runs, not its figures (CI)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.records, args.sources, args.rounds = 200, 1_000, 1
        args.history_commits, args.history_sessions = 40, 10
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.purge_child:
        _purge_child(*args.purge_child)
        return
    history = long_history(args.history_commits, args.history_sessions)
    if args.history_only:
        print(json.dumps(history))
        return
    times: dict[str, list[float]] = {"forget": [], "bare": [], "purge": [], "gc": []}
    deleted = 0
    with scratch("scriptorium-forget-") as tmp:
        build_workspace(tmp / "forget", args.records, args.sources).close()
        shutil.copytree(tmp / "forget", tmp / "delete", symlinks=True)
        ws, bare = MemoryWorkspace(tmp / "forget"), MemoryWorkspace(tmp / "delete")
        ws.snapshot(), bare.snapshot()  # both parsed before either is timed
        forgotten: list[str] = []
        for round_ in range(args.rounds):
            thread = f"bench/thread-{round_ + 1:05d}"  # a thread of its own each round, on both copies
            ids = _citing(bare, thread)
            os.sync()  # earlier rounds' dirty pages flushed now, not by whichever transaction syncs first

            def run_forget(thread: str, ids: list[str]) -> None:
                t0 = time.perf_counter()
                payload = forget(ws, Selection(thread=thread), why="benchmark")
                times["forget"].append((time.perf_counter() - t0) * 1000)
                assert sorted(payload["deleted"]) == ids and payload["transaction"]["git_committed"]
                forgotten.extend(payload["paths"])

            def run_bare(thread: str, ids: list[str]) -> None:
                t0 = time.perf_counter()
                result = update_records(bare, [DeleteRecord(m) for m in ids], message="bare delete")
                times["bare"].append((time.perf_counter() - t0) * 1000)
                assert result.git_committed and result.changed_files

            for step in (run_forget, run_bare) if round_ % 2 == 0 else (run_bare, run_forget):  # alternate order
                step(thread, ids)
            deleted += len(ids)
        os.sync()
        t0 = time.perf_counter()
        purged = purge_history(ws, forgotten)
        times["purge"].append((time.perf_counter() - t0) * 1000)
        assert purged["commits_rewritten"] >= args.rounds
        os.sync()
        t0 = time.perf_counter()
        subprocess.run(["git", "-C", str(tmp / "delete"), "gc", "--prune=now", "--quiet"], check=True)
        times["gc"].append((time.perf_counter() - t0) * 1000)
        ws.close()
        bare.close()
    p50 = {key: statistics.median(values) for key, values in times.items()}
    labels = {
        "forget": "forget (no purge)",
        "bare": "bare delete transaction",
        "purge": "purge history",
        "gc": "git gc",
    }
    print(f"{'step':>26} {'p50 ms':>10} {'min ms':>10} {'max ms':>10}")
    for key, label in labels.items():
        print(f"{label:>26} {p50[key]:>10.1f} {min(times[key]):>10.1f} {max(times[key]):>10.1f}")
    forget_ratio, purge_ratio = p50["forget"] / p50["bare"], p50["purge"] / p50["gc"]
    print(
        f"forget / bare delete = {forget_ratio:.3f} (target <= 2); purge / git gc = {purge_ratio:.3f}; "
        f"{args.records} records, {args.sources} sources; {args.rounds} rounds, each forgetting one thread "
        f"(100 sources, {deleted // max(args.rounds, 1)} records)"
    )
    print(
        json.dumps(
            {
                "forget_p50_ms": round(p50["forget"], 1),
                "bare_delete_p50_ms": round(p50["bare"], 1),
                "forget_ratio": round(forget_ratio, 3),
                "purge_p50_ms": round(p50["purge"], 1),
                "git_gc_p50_ms": round(p50["gc"], 1),
                "purge_vs_gc_ratio": round(purge_ratio, 3),
                **history,
            }
        )
    )


if __name__ == "__main__":
    main()
