"""Mutation testing of the modules that carry the guarantees, with cosmic-ray (not in CI: it is slow).

Each module is mutated in place, one mutant at a time, in a scratch copy of the project with a virtual
environment of its own (so the CLI the tests start imports the mutated copy, not this checkout), and the
tests that carry its guarantees are run against every mutant: a mutant the tests fail on is killed, one
they pass on survives (a timeout counts as killed).

Prints one row per module, every survivor (file, line, operator), then as its last line one JSON object:
``mutants``, ``killed``, ``killed_share`` and ``survivors``.

Usage: python scripts/mutation.py [--modules selection,lock,...] [--keep DIR]
(needs ``pip install -e '.[mutation]'`` for cosmic-ray; the copy installs ``.[test]`` from the cache)
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "install": (
        "scriptorium/workspace/install.py",
        ("tests/workspace/test_durability.py", "tests/workspace/test_crash.py", "tests/workspace/test_transaction.py"),
    ),
    "transaction": ("scriptorium/workspace/transaction.py", ("tests/workspace/test_transaction.py",)),
    "selection": (
        "scriptorium/writing/selection.py",
        (
            "tests/writing/test_write_pass.py",
            "tests/writing/test_spawned_sessions.py",
            "tests/recall/test_branches.py",
            "tests/runtimes/test_watcher.py",
        ),
    ),
    "lock": (
        "workers/lock.py",
        ("tests/cluster/test_fencing.py", "tests/cluster/test_handover_lock.py", "tests/cluster/test_faults.py"),
    ),
    "scope": (
        "scriptorium/access/scope.py",
        ("tests/security/test_scope_attacks.py", "tests/recall/test_audience.py", "tests/web/test_requesters.py"),
    ),
    "guard": ("scriptorium/access/guard.py", ("tests/security/test_scope_attacks.py", "tests/web/test_requesters.py")),
    "forget": ("scriptorium/changes/forget.py", ("tests/changes/test_forget.py", "tests/security/test_erasure.py")),
}
"""A short name → (the module, the test files that carry its guarantees)."""


def copy_project(target: Path) -> Path:
    """This checkout's committed files in ``target``, with a virtual environment of their own."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True)
    python = target / ".venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(target / ".venv")], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", f"{target}[test]"], check=True, cwd=target)
    return python


def annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where ``path``'s type annotations are (parameters, returns, annotated names): ((line, column) of the
    start, of the end) each, lines from 1 and columns from 0, as cosmic-ray gives a mutation's."""
    spans = []
    for node in ast.walk(ast.parse(path.read_text())):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            annotations += [a.annotation for a in every if a is not None]
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
        for a in annotations:
            if a is not None and a.end_lineno is not None and a.end_col_offset is not None:
                spans.append(((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)))
    return spans


def skip_annotations(session: Path, module: Path) -> int:
    """Mark the mutants that change only a type annotation as skipped: under ``from __future__ import
    annotations`` an annotation is a string no code evaluates, so they are equivalent (``X | None`` to
    ``X & None``). Returns how many."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    if "from __future__ import annotations" not in module.read_text():
        return 0
    spans = annotation_spans(module)
    skipped = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            (mutation,) = item.mutations
            start, end = tuple(mutation.start_pos), tuple(mutation.end_pos)
            if any(first <= start and end <= last for first, last in spans):
                db.set_result(item.job_id, WorkResult(WorkerOutcome.SKIPPED, output="equivalent: an annotation"))
                skipped += 1
    return skipped


def run_module(copy: Path, python: Path, name: str, work: Path) -> tuple[int, int, list[str]]:
    """(mutants, killed, survivors) of one module."""
    module, tests = MODULES[name]
    config = work / f"{name}.toml"
    session = work / f"{name}.sqlite"
    command = f"{python} -m pytest -x -q -p no:cacheprovider -p no:randomly {' '.join(tests)}"
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{copy / module}"\n'
        "timeout = 300.0\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n"
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
    subprocess.run([*cosmic, "init", str(config), str(session)], check=True, cwd=copy)
    skip_annotations(session, copy / module)
    subprocess.run([*cosmic, "exec", str(config), str(session)], check=True, cwd=copy)
    dump = subprocess.run([*cosmic, "dump", str(session)], check=True, cwd=copy, capture_output=True, text=True)
    mutants = killed = 0
    survivors: list[str] = []
    for line in dump.stdout.splitlines():
        item, result = json.loads(line)
        if result is None or result.get("worker_outcome") == "skipped":
            continue  # not run, or an equivalent mutant (see skip_annotations)
        mutants += 1
        if result.get("test_outcome") == "survived" and result.get("worker_outcome") == "normal":
            (mutation,) = item["mutations"]
            where = f"{module}:{mutation['start_pos'][0]} {mutation['operator_name']} in {mutation['definition_name']}"
            survivors.append(where)
        else:
            killed += 1
    return mutants, killed, survivors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", default=",".join(MODULES), help=f"some of: {', '.join(MODULES)}")
    parser.add_argument("--keep", type=Path, help="make the scratch copy here and keep it")
    args = parser.parse_args()
    names = [n for n in args.modules.split(",") if n]
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        parser.error(f"unknown modules {unknown}; choose from {', '.join(MODULES)}")
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="scriptorium-mutation-"))
    try:
        copy = scratch / "project"
        python = copy_project(copy)
        rows = {name: run_module(copy, python, name, scratch) for name in names}
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"{'module':>12} {'mutants':>8} {'killed':>7} {'share':>6}")
    for name, (mutants, killed, _survivors) in rows.items():
        print(f"{name:>12} {mutants:>8} {killed:>7} {killed / mutants if mutants else 0:>6.1%}")
    survivors = [s for _m, _k, found in rows.values() for s in found]
    for survivor in survivors:
        print(f"survived: {survivor}")
    mutants, killed = sum(r[0] for r in rows.values()), sum(r[1] for r in rows.values())
    share = round(killed / mutants, 4) if mutants else 0.0
    print(json.dumps({"mutants": mutants, "killed": killed, "killed_share": share, "survivors": survivors}))


if __name__ == "__main__":
    main()
