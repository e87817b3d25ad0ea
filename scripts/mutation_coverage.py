"""Which tests judge a mutant (for ``mutation.py``, beside it): a coverage map of the mutated module per test,
and the tests that execute the lines a mutant changes.

Before a module's mutants run, each of its tests is run once alone under coverage.py, subprocesses included
(the CLI, the Celery workers), and the lines of the module it executes are recorded with how long it took.
A mutant is then judged by the tests that execute the statements it changes, fastest first.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

COVERAGE_RC = """[run]
parallel = true
sigterm = true
patch = subprocess
    _exit
    fork
include = {module}
"""
"""coverage.py's settings for the map: every process's data kept apart, Python subprocesses measured (the CLI,
the Celery workers and their forked children, those that end in ``os._exit``, and servers stopped with SIGTERM,
which uvicorn raises again once it has shut down), only the mutated module. A process killed with SIGKILL
leaves no data: a line only such a process runs counts as run by no test (its mutants survive unrun, which
can only understate the killed share)."""


def collect(python: Path, copy: Path, tests: tuple[str, ...]) -> list[str]:
    """The node IDs of ``tests``, in their order."""
    listing = subprocess.run(
        [str(python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *tests],
        cwd=copy,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [line for line in listing.splitlines() if "::" in line]


def coverage_map(
    copy: Path, python: Path, name: str, module: str, tests: tuple[str, ...], work: Path
) -> dict[str, dict[str, object]]:
    """Each test of the module's set → how long it took alone and the module's lines it executed (cached in
    ``work``; a test that fails on the unmutated code stops the run, since no mutant could be judged by it)."""
    cached = work / f"{name}.coverage.json"
    if cached.exists():
        kept: dict[str, dict[str, object]] = json.loads(cached.read_text())
        return kept
    rc = work / f"{name}.coveragerc"
    rc.write_text(COVERAGE_RC.format(module=copy / module))
    found: dict[str, dict[str, object]] = {}
    for test in collect(python, copy, tests):
        data = work / "coverage" / name
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        environment = {**os.environ, "COVERAGE_FILE": str(data / ".coverage"), "COVERAGE_RCFILE": str(rc)}
        started = time.monotonic()
        done = subprocess.run(
            [
                str(python),
                "-m",
                "coverage",
                "run",
                f"--rcfile={rc}",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:randomly",
                test,
            ],
            cwd=copy,
            env=environment,
            capture_output=True,
            text=True,
        )
        seconds = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(f"{test} fails on the unmutated code:\n{done.stdout[-2000:]}")
        subprocess.run(
            [str(python), "-m", "coverage", "combine", f"--rcfile={rc}", "-q"],
            cwd=copy,
            env=environment,
            check=True,
            capture_output=True,
        )
        lines = subprocess.run(
            [str(python), "-c", EXECUTED, str(data / ".coverage"), str(copy / module)],
            cwd=copy,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        executed = json.loads(lines)
        found[test] = {"seconds": round(seconds, 2), "lines": executed}
        print(f"{name}: {test} {seconds:.1f} s, {len(executed)} lines of {module}", flush=True)
    cached.write_text(json.dumps(found))
    return found


EXECUTED = """import json, sys
from coverage import CoverageData
data = CoverageData(sys.argv[1])
data.read()
import os
target = os.path.realpath(sys.argv[2])
lines = set()
for measured in data.measured_files():
    if os.path.realpath(measured) == target:
        lines |= set(data.lines(measured) or ())
print(json.dumps(sorted(lines)))
"""
"""Run in the copy's environment (coverage is installed there): the executed lines of one file."""


def statement_lines(source: str) -> dict[int, range]:
    """Each line that belongs to a statement → the lines of that statement's own part: a simple statement's
    every line, a compound one's header up to its body (so a mutant on a condition's second line is judged by
    whether the condition ran at all)."""
    own: dict[int, range] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt) or node.end_lineno is None:
            continue
        bodies = [getattr(node, field, None) for field in ("body", "orelse", "finalbody", "handlers", "cases")]
        starts = [block[0].lineno for block in bodies if isinstance(block, list) and block]
        end = min(starts) - 1 if starts else node.end_lineno
        decorated = getattr(node, "decorator_list", [])
        first = min([node.lineno, *(d.lineno for d in decorated)])
        span = range(first, max(end, node.lineno) + 1)
        for line in span:
            if line not in own or len(span) < len(own[line]):
                own[line] = span
    return own


def changed_lines(before: str, after: str) -> set[int]:
    """The lines (from 1) of ``before`` a mutant changes."""
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, first, last, _, _ in matcher.get_opcodes():
        if tag != "equal":
            changed |= set(range(first + 1, max(last, first + 1) + 1))
    return changed


def tests_for_mutant(name: str, module: str, copy: Path, work: Path) -> list[str] | None:
    """The tests that execute the lines the current mutant changes, fastest first; None when a changed line
    lies in no statement (every test is run then)."""
    found = json.loads((work / f"{name}.coverage.json").read_text())
    pristine = subprocess.run(
        ["git", "show", f"HEAD:{module}"], cwd=copy, check=True, capture_output=True, text=True
    ).stdout
    own = statement_lines(pristine)
    wanted: set[int] = set()
    for line in changed_lines(pristine, (copy / module).read_text()):
        if line not in own:
            return None
        wanted |= set(own[line])
    chosen = [test for test, seen in found.items() if wanted & set(seen["lines"])]
    return sorted(chosen, key=lambda test: found[test]["seconds"])
