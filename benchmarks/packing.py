"""Git objects packed as they accumulate: ``.git`` on disk and install time, with and without the packing.

Builds the same workspace twice — COMMITS write passes, each archiving six sources of about 800 bytes in a
session's thread and appending to that session's conversation topic (so each commit rewrites the growing
``sources/<provider>/`` and ``topics/conversations/`` folders' trees, as the embedded writer does) — once with
the background repack off (``repack_loose_objects=0``: each install's pack stays, never rolled up; before
installs wrote packs, every object stayed loose) and once with the default. Prints, for each: ``.git``'s
blocks on disk (``du -sk``), loose objects and packs, and
the install's median and 95th-percentile time; then what a one-off repack of the unpacked copy costs and
leaves (the first repack of a workspace written before the packing). Ends with one JSON line.

Both are written in lockstep (a pass to one, then the same pass to the other), so that whatever else the
machine runs weighs on both alike; installs that began while a repack ran are also counted apart.

Usage: python benchmarks/packing.py [--commits N] [--threshold LOOSE_OBJECTS]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scriptorium.defaults import DEFAULT_REPACK_LOOSE_OBJECTS
from scriptorium.workspace import MemoryWorkspace, SourceMessage, WorkspaceConfig, packing

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "tea",
    "coffee",
    "postgres",
    "redis",
    "celery",
    "git",
    "topic",
    "memory",
    "record",
    "source",
    "branch",
    "merge",
    "deploy",
    "test",
    "fix",
    "bug",
    "release",
    "schema",
    "index",
    "query",
    "cache",
    "worker",
    "queue",
    "token",
    "prompt",
    "hook",
    "session",
]
PER_PASS = 6
PASSES_PER_SESSION = 8


def du_kib(path: Path) -> int:
    return int(subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def count_objects(git_dir: Path) -> dict[str, int]:
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", "count-objects", "-v"], capture_output=True, text=True, check=True
    ).stdout
    return {key: int(value) for key, value in (line.split(": ") for line in out.splitlines())}


class Variant:
    """One workspace written pass by pass, with the background repack at ``threshold`` (0: off)."""

    def __init__(self, root: Path, threshold: int) -> None:
        self.root = root
        self.threshold = threshold
        self.rnd = random.Random(55)  # every variant archives the same text
        self.ws = MemoryWorkspace.init(root, WorkspaceConfig(repack_loose_objects=threshold))
        self.times: list[tuple[float, bool]] = []  # (seconds, whether a repack ran as the install began)
        self.checks: list[float] = []
        self.repacks: list[float] = []  # when each repack this variant set off started
        self.repack_s: list[float] = []  # how long each ran (seen from the installs that follow it)

    def step(self, n: int) -> None:
        session = n // PASSES_PER_SESSION
        thread = f"session-{session:05d}"
        messages = [
            SourceMessage(
                "claude-code",
                thread,
                f"m{n * PER_PASS + k:07d}",
                "user" if k % 2 == 0 else "assistant",
                "2026-11-01T00:00:00Z",
                " ".join(self.rnd.choice(WORDS) for _ in range(110)),
            )
            for k in range(PER_PASS)
        ]
        topic = f"topics/conversations/{thread}.md"
        ws = self.ws
        repacking = packing.is_repacking(self.root / ".git")
        if self.repacks and not repacking and len(self.repack_s) < len(self.repacks):
            self.repack_s.append(time.perf_counter() - self.repacks[-1])
        begun = time.perf_counter()
        with ws.lock():
            paths = ws.archive_sources(messages)
        text = ws.read_topic(topic) if topic in ws.snapshot().topic_shas else f"# Session {session}\n"
        text += "".join(
            f"\n2026-11-01: {self.rnd.choice(WORDS)} {m.message} [k](claude-code/{thread}/{m.message}).\n"
            for m in messages[:2]
        )
        ws.transact(lambda stage: stage.write(topic, text), message=f"pass {n}", appended_sources=paths)
        self.times.append((time.perf_counter() - begun, repacking))
        if packing.is_repacking(self.root / ".git") and not repacking:
            self.repacks.append(begun)
        check = time.perf_counter()
        ws.packer.after_install()  # the trigger's cost when nothing is due (the install called it already)
        self.checks.append(time.perf_counter() - check)

    def finish(self) -> dict[str, object]:
        waited = time.perf_counter()
        with packing.holding_lock(self.root / ".git"):
            pass
        wait_s = time.perf_counter() - waited
        self.ws.close()
        objects = count_objects(self.root / ".git")
        every = sorted(t for t, _ in self.times)
        during = sorted(t for t, repacking in self.times if repacking)
        outside = sorted(t for t, repacking in self.times if not repacking)
        return {
            "git_kib": du_kib(self.root / ".git"),
            "loose": objects["count"],
            "packs": objects["packs"],
            "in_pack": objects["in-pack"],
            "size_pack_kib": objects["size-pack"],
            "repacks_started": len(self.repacks),
            "repack_s_median": round(statistics.median(self.repack_s), 1) if self.repack_s else 0,
            "wait_for_last_repack_s": round(wait_s, 2),
            "install_ms_p50": round(statistics.median(every) * 1000, 1),
            "install_ms_p95": round(every[int(len(every) * 0.95)] * 1000, 1),
            "install_ms_p50_no_repack": round(statistics.median(outside) * 1000, 1) if outside else 0,
            "install_ms_p50_repacking": round(statistics.median(during) * 1000, 1) if during else 0,
            "installs_during_repack": len(during),
            "install_s_total": round(sum(every), 1),
            "trigger_check_us_p50": round(statistics.median(self.checks) * 1e6, 1),
            "sources_kib_on_disk": du_kib(self.root / "sources"),
            "sources_kib_apparent": int(
                subprocess.run(
                    ["du", "-sk", "--apparent-size", str(self.root / "sources")], capture_output=True, text=True
                ).stdout.split()[0]
            ),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=3000)
    parser.add_argument("--threshold", type=int, default=DEFAULT_REPACK_LOOSE_OBJECTS)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="60 commits, repacked past 100 loose objects: that it runs, not its figures (CI)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.commits, args.threshold = 60, 100
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory(prefix="scriptorium-packing-") as scratch:
        base = Path(scratch)
        # Written in lockstep, a pass to each in turn: both see the same machine, whatever else runs on it.
        variants = [Variant(base / "unpacked" / "memory", 0), Variant(base / "packed" / "memory", args.threshold)]
        for n in range(args.commits):
            for variant in variants:
                variant.step(n)
        unpacked, packed = (variant.finish() for variant in variants)
        git_dir = base / "unpacked" / "memory" / ".git"
        begun = time.perf_counter()
        packing.repack_now(git_dir)
        first_repack_s = time.perf_counter() - begun
        after = count_objects(git_dir)
        one_off = {"seconds": round(first_repack_s, 1), "git_kib": du_kib(git_dir), "packs": after["packs"]}
        begun = time.perf_counter()
        state = packing.pack_state(base / "packed" / "memory" / ".git")
        status_ms = (time.perf_counter() - begun) * 1000
    print(f"{'':28} {'unpacked':>12} {'packed':>12}")
    for key in unpacked:
        print(f"{key:28} {unpacked[key]!s:>12} {packed[key]!s:>12}")
    print(f"one-off repack of the unpacked copy: {one_off}")
    print(f"pack_state (memory status): {status_ms:.1f} ms, {state.to_dict()}")
    print(
        json.dumps(
            {
                "commits": args.commits,
                "threshold": args.threshold,
                "git_kib_unpacked": unpacked["git_kib"],
                "git_kib_packed": packed["git_kib"],
                "install_ms_p50_unpacked": unpacked["install_ms_p50"],
                "install_ms_p50_packed": packed["install_ms_p50"],
                "install_ms_p95_unpacked": unpacked["install_ms_p95"],
                "install_ms_p95_packed": packed["install_ms_p95"],
                "install_ms_p50_packed_outside_repacks": packed["install_ms_p50_no_repack"],
                "install_ms_p50_packed_during_repacks": packed["install_ms_p50_repacking"],
                "repacks_started": packed["repacks_started"],
                "repack_s_median": packed["repack_s_median"],
                "loose_packed": packed["loose"],
                "packs_packed": packed["packs"],
                "one_off_repack_s": one_off["seconds"],
                "git_kib_after_one_off_repack": one_off["git_kib"],
                "status_pack_state_ms": round(status_ms, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
