"""Mutation testing of the modules that carry the guarantees, with cosmic-ray (not in CI: it is slow).

Each module is mutated in place, one mutant at a time, in a scratch copy of the project with a virtual
environment of its own (so the CLI the tests start imports the mutated copy, not this checkout), and the
tests that carry its guarantees are run against every mutant: a mutant the tests fail on is killed, one
they pass on survives (a timeout counts as killed).

Each mutant runs only the tests that execute the line it changes, fastest first, stopping at the first
failure (as mutmut does): before a module's mutants run, each of its tests is run once alone under
coverage.py, subprocesses included (the CLI, the Celery workers), and the lines of the module it executes are
recorded. A mutant on a line no test executes survives without a run; a line whose statement cannot be
located runs every test (``mutation_coverage.py``, beside this script).

Prints one row per module, every survivor (file, line, operator) and every survivor triaged as equivalent
(:data:`EQUIVALENT`, with why), then as its last line one JSON object: ``mutants`` (the equivalent ones left
out), ``killed``, ``killed_share``, ``equivalent``, ``modules`` and ``survivors``.

Usage: python scripts/mutation.py [--modules selection,lock,...] [--keep DIR]
(``--keep DIR`` again resumes: the copy and each module's session are reused, and only the mutants not run
yet are run; ``--keep DIR --report`` only reports what the kept sessions hold, the mutants not run yet left
out, and ``--keep`` may be given once per folder there, so modules run side by side in folders of their own
are reported together, each from the folder that holds its session; ``--keep DIR --rerun-survivors`` first
brings the copy up to this checkout's commit — refused when a mutated module changed, since its session's
mutants are positions in the old file — and runs every survivor again against the new tests)
(needs ``pip install -e '.[mutation]'`` for cosmic-ray; the copy installs ``.[test,mutation]`` from the cache)
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mutation_coverage import coverage_map, tests_for_mutant  # beside this script, whose folder is on the path
from mutation_equivalent import EQUIVALENT

ROOT = Path(__file__).resolve().parents[1]

MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "install": (
        "scriptorium/workspace/install.py",
        (
            "tests/workspace/test_install.py",
            "tests/workspace/test_durability.py",
            "tests/workspace/test_crash.py",
            "tests/workspace/test_transaction.py",
        ),
    ),
    "transaction": (
        "scriptorium/workspace/transaction.py",
        (
            "tests/workspace/test_transaction.py",
            "tests/changes/test_structured.py",  # the dry run's preview and diff
            "tests/changes/test_forget.py",  # forgotten sources, and what may not cite them
            "tests/security/test_redaction.py",  # redacted sources
            "tests/workspace/test_properties.py",
        ),
    ),
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
    "guard": (
        "scriptorium/access/guard.py",
        ("tests/access/test_guard.py", "tests/security/test_scope_attacks.py", "tests/web/test_requesters.py"),
    ),
    "forget": (
        "scriptorium/changes/forget.py",
        ("tests/changes/test_forget_records.py", "tests/changes/test_forget.py", "tests/security/test_erasure.py"),
    ),
}
"""A short name → (the module, the test files that carry its guarantees)."""


def copy_project(target: Path) -> Path:
    """This checkout's committed files in ``target``, with a virtual environment of their own."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True)
    python = target / ".venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "venv", str(target / ".venv")], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-e", f"{target}[test,mutation]"], check=True, cwd=target
    )
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


def update_copy(copy: Path, names: list[str]) -> None:
    """The copy at this checkout's committed HEAD, unless a module of ``names`` differs there (SystemExit)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True)
    subprocess.run(["git", "fetch", "-q", str(ROOT), head.stdout.strip()], cwd=copy, check=True)
    changed = subprocess.run(
        ["git", "diff", "--name-only", "HEAD", "FETCH_HEAD", "--", *(MODULES[n][0] for n in names)],
        cwd=copy,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    if changed:
        raise SystemExit(f"the mutated modules changed since the kept sessions began ({changed}): start afresh")
    subprocess.run(["git", "checkout", "-q", "FETCH_HEAD"], cwd=copy, check=True)


def test_mutant(name: str, copy: Path, work: Path) -> int:
    """cosmic-ray's test command: run the current mutant's tests; 0 when they pass (it survives)."""
    found = json.loads((work / f"{name}.coverage.json").read_text())
    chosen = tests_for_mutant(name, MODULES[name][0], copy, work)
    if chosen is None:
        chosen = sorted(found, key=lambda test: found[test]["seconds"])
    if not chosen:
        print("no test executes the mutated lines")
        return 0
    budget = 60 + 3 * sum(found[test]["seconds"] for test in chosen)
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *chosen]
    process = subprocess.Popen(command, cwd=copy, start_new_session=True)
    try:
        return process.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        print(f"timed out after {budget:.0f} s: killed")
        return 1


def forget_survivors(session: Path) -> int:
    """Make the session's surviving mutants pending again (:func:`run_module` runs them next); how many."""
    import sqlite3

    with sqlite3.connect(session) as db:
        return db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'").rowcount


def has_session(work: Path, name: str) -> bool:
    """Whether ``work`` keeps a session of the module ``name``: an empty file (opened by sqlite3 before any
    ``cosmic-ray init``) is none."""
    session = work / f"{name}.sqlite"
    return session.exists() and session.stat().st_size > 0


def run_module(copy: Path, python: Path, name: str, work: Path, report_only: bool = False) -> Row:
    """One module's row: its mutants run against the tests that carry its guarantees."""
    module, _ = MODULES[name]
    config = work / f"{name}.toml"
    session = work / f"{name}.sqlite"
    if not report_only:
        # A run stopped mid-mutant leaves that mutant applied: start from the committed module again.
        subprocess.run(["git", "checkout", "-q", "--", module], cwd=copy, check=True)
        coverage_map(copy, python, name, module, MODULES[name][1], work)
    command = f"{python} {copy / 'scripts' / 'mutation.py'} --mutant {name} --work {work}"
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{copy / module}"\n'
        "timeout = 3600.0\n"  # test_mutant keeps its own, from the tests' times
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n"
        "[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )
    cosmic = [sys.executable, "-m", "cosmic_ray.cli"]
    if session.exists() and not has_session(work, name):
        session.unlink()
    if not session.exists():  # else a kept session: exec runs what it has not run yet
        subprocess.run([*cosmic, "init", str(config), str(session)], check=True, cwd=copy)
        skip_annotations(session, copy / module)
    if not report_only:
        subprocess.run([*cosmic, "exec", str(config), str(session)], check=True, cwd=copy)
    dump = subprocess.run([*cosmic, "dump", str(session)], check=True, cwd=copy, capture_output=True, text=True)
    lines = (copy / module).read_text().splitlines()
    row = Row()
    for line in dump.stdout.splitlines():
        item, result = json.loads(line)
        if result is None or result.get("worker_outcome") == "skipped":
            continue  # not run, or an annotation (see skip_annotations)
        (mutation,) = item["mutations"]
        where = f"{module}:{mutation['start_pos'][0]} {mutation['operator_name']} in {mutation['definition_name']}"
        if result.get("test_outcome") != "survived" or result.get("worker_outcome") != "normal":
            row.mutants += 1
            row.killed += 1
            continue
        key = (name, lines[mutation["start_pos"][0] - 1].strip(), mutation["operator_name"], mutation["occurrence"])
        if key in EQUIVALENT:
            row.equivalent.append(f"{where}: {EQUIVALENT[key]}")
        else:
            row.mutants += 1
            row.survivors.append(where)
    return row


@dataclass
class Row:
    """One module's mutants (the equivalent ones left out), how many the tests killed, the survivors, and the
    survivors triaged as equivalent (:data:`EQUIVALENT`)."""

    mutants: int = 0
    killed: int = 0
    survivors: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", default=",".join(MODULES), help=f"some of: {', '.join(MODULES)}")
    parser.add_argument(
        "--keep",
        type=Path,
        action="append",
        help="make the scratch copy here and keep it (with --report, again for each folder to read)",
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="with --keep: report the kept sessions as they are, run nothing; each module from the folder "
        "that holds its session",
    )
    parser.add_argument(
        "--rerun-survivors",
        action="store_true",
        help="with --keep: update the copy to this checkout's commit and run the survivors again",
    )
    parser.add_argument("--mutant", help=argparse.SUPPRESS)  # cosmic-ray's test command (see test_mutant)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mutant:
        raise SystemExit(test_mutant(args.mutant, Path.cwd(), args.work))
    names = [n for n in args.modules.split(",") if n]
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        parser.error(f"unknown modules {unknown}; choose from {', '.join(MODULES)}")
    if (args.report or args.rerun_survivors) and args.keep is None:
        parser.error("--report and --rerun-survivors read kept sessions: name them with --keep DIR")
    if args.report:
        assert args.keep is not None
        missing = [name for name in names if not any(has_session(d, name) for d in args.keep)]
        if missing:
            parser.error(f"no kept session of {missing} in {', '.join(map(str, args.keep))}")
        rows = {}
        for name in names:
            kept = next(d for d in args.keep if has_session(d, name))
            rows[name] = run_module(kept / "project", kept / "project" / ".venv" / "bin" / "python", name, kept, True)
        report(rows)
        return
    if args.keep is not None and len(args.keep) > 1:
        parser.error("--keep names one folder, except with --report")
    scratch = args.keep[0] if args.keep else Path(tempfile.mkdtemp(prefix="scriptorium-mutation-"))
    try:
        copy = scratch / "project"
        python = copy_project(copy) if not copy.exists() else copy / ".venv" / "bin" / "python"
        if args.rerun_survivors:
            update_copy(copy, names)
            for name in names:
                (scratch / f"{name}.coverage.json").unlink(missing_ok=True)  # the tests changed: map them again
                if (scratch / f"{name}.sqlite").exists():
                    print(f"{name}: {forget_survivors(scratch / f'{name}.sqlite')} survivors to run again")
        rows = {name: run_module(copy, python, name, scratch) for name in names}
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    report(rows)


def report(rows: dict[str, Row]) -> None:
    """A row per module, every survivor and every triaged one, then the last line's JSON."""
    print(f"{'module':>12} {'mutants':>8} {'killed':>7} {'share':>6} {'equivalent':>11}")
    for name, row in rows.items():
        share = row.killed / row.mutants if row.mutants else 0
        print(f"{name:>12} {row.mutants:>8} {row.killed:>7} {share:>6.1%} {len(row.equivalent):>11}")
    survivors = [s for row in rows.values() for s in row.survivors]
    for survivor in survivors:
        print(f"survived: {survivor}")
    for triaged in (e for row in rows.values() for e in row.equivalent):
        print(f"equivalent: {triaged}")
    mutants, killed = sum(r.mutants for r in rows.values()), sum(r.killed for r in rows.values())
    share = round(killed / mutants, 4) if mutants else 0.0
    equivalent = sum(len(r.equivalent) for r in rows.values())
    figures = {"mutants": mutants, "killed": killed, "killed_share": share, "equivalent": equivalent}
    print(json.dumps({**figures, "modules": list(rows), "survivors": survivors}))


if __name__ == "__main__":
    main()
