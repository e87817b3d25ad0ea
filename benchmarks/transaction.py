"""One small edit's full transaction vs. a plain ``git add -A && git commit``.

For each size (1,000 records / 10,000 sources and 10,000 records / 100,000
sources) the same run measures, alternating:

* ``txn``: ``MemoryWorkspace.apply_changes`` rewriting one record of one
  topic — stage, normalize, validate, install, views, commit;
* ``floor``: the same one-file change committed by the git CLI in an
  ordinary clone of the same tree (``git add -A && git commit``), and, for
  reference, ``git add -- FILE && git commit`` (no work-tree scan).

Prints a table, then one JSON line with ``floor_ms_1k``, ``txn_ms_1k``,
``txn_ms_10k``, ``ratio_vs_floor_1k`` and ``growth_10k_over_1k`` (medians).

Usage: python benchmarks/transaction.py [--repeats N] [--quick] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workspace_fixture import build_workspace, scratch

from scriptorium.workspace import TopicChange


def _edit(text: str, step: int) -> str:
    marker = "Record "
    start = text.index(marker)
    end = text.index(" says", start)
    return text[:start] + f"Record edited {step}" + text[end:]


def measure(records: int, sources: int, repeats: int, scratch: Path) -> dict[str, float]:
    root = scratch / f"ws-{records}" / "memory"
    started = time.perf_counter()
    workspace = build_workspace(root, records, sources)
    setup_s = time.perf_counter() - started
    floor_repo = scratch / f"floor-{records}"
    subprocess.run(["git", "clone", "-q", str(root / ".git"), str(floor_repo)], check=True)
    for key, value in (("user.name", "bench"), ("user.email", "bench@localhost")):
        subprocess.run(["git", "-C", str(floor_repo), "config", key, value], check=True)
    path = "topics/area-00/topic-00000.md"
    txn_ms: list[float] = []
    floor_ms: list[float] = []
    floor_path_ms: list[float] = []
    for step in range(repeats):
        text = workspace.read_topic(path)
        new = _edit(text, step)
        t0 = time.perf_counter()
        result = workspace.apply_changes([TopicChange(path, "update", new)], message=f"edit {step}")
        txn_ms.append((time.perf_counter() - t0) * 1000)
        assert result.git_committed and path in result.changed_files
        (floor_repo / path).write_text(new)
        t0 = time.perf_counter()
        subprocess.run(f"git add -A && git commit -q -m 'edit {step}'", shell=True, cwd=floor_repo, check=True)
        floor_ms.append((time.perf_counter() - t0) * 1000)
        (floor_repo / path).write_text(new + "\n")
        t0 = time.perf_counter()
        subprocess.run(
            f"git add -- {path} && git commit -q -m 'path edit {step}'", shell=True, cwd=floor_repo, check=True
        )
        floor_path_ms.append((time.perf_counter() - t0) * 1000)
    workspace.close()
    return {
        "records": records,
        "sources": sources,
        "setup_s": setup_s,
        "txn_ms": statistics.median(txn_ms),
        "floor_ms": statistics.median(floor_ms),
        "floor_path_ms": statistics.median(floor_path_ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="smaller workspaces, for smoke runs")
    parser.add_argument(
        "--smoke", action="store_true", help="workspaces of 20 and 200 records, 3 repeats: that it runs (CI)"
    )
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.smoke:
        sizes, args.repeats = [(20, 200), (200, 2_000)], 3
    else:
        sizes = [(100, 1_000), (1_000, 10_000)] if args.quick else [(1_000, 10_000), (10_000, 100_000)]
    with scratch("scriptorium-bench-") as tmp:
        rows = [measure(r, s, args.repeats, tmp) for r, s in sizes]
    print(
        f"{'records':>8} {'sources':>8} {'setup s':>8} {'txn ms':>8} {'floor ms':>9} {'txn/floor':>10}"
        f" {'add-path floor ms':>18} {'txn/add-path':>13}"
    )
    for row in rows:
        print(
            f"{row['records']:>8} {row['sources']:>8} {row['setup_s']:>8.1f} {row['txn_ms']:>8.2f} "
            f"{row['floor_ms']:>9.2f} {row['txn_ms'] / row['floor_ms']:>10.2f} "
            f"{row['floor_path_ms']:>18.2f} {row['txn_ms'] / row['floor_path_ms']:>13.2f}"
        )
    print("floor: git add -A && git commit; add-path floor: git add -- FILE && git commit (medians, ms)")
    small, large = rows
    summary = {
        "floor_ms_1k": round(small["floor_ms"], 3),
        "txn_ms_1k": round(small["txn_ms"], 3),
        "txn_ms_10k": round(large["txn_ms"], 3),
        "ratio_vs_floor_1k": round(small["txn_ms"] / small["floor_ms"], 3),
        "growth_10k_over_1k": round(large["txn_ms"] / small["txn_ms"], 3),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
