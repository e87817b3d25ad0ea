"""The README's quick start and .ci/run run the tests with one command, written once: scripts/test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quick_start() -> list[str]:
    """The command lines of the first fenced block under the README's ``## Quick start``."""
    section = (ROOT / "README.md").read_text().split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```[a-z]*\n(.*?)^```", section, re.S | re.M)
    assert block is not None
    return block[1].splitlines()


def test_the_quick_start_and_ci_run_the_tests_through_one_script() -> None:
    lines = quick_start()
    assert len(lines) == 2, lines
    assert lines[1] == "pip install '.[test]' && scripts/test"
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert commands[-1] == "scripts/test", "CI ends by running the quick start's test command"
    assert "README" not in "".join(commands), "CI reads no command out of the README"


def test_the_script_runs_pytest_in_parallel_workers_with_the_arguments_given() -> None:
    script = ROOT / "scripts" / "test"
    assert os.access(script, os.X_OK)
    done = subprocess.run(
        [str(script), "-p", "no:cacheprovider", "tests/test_ci.py", "-k", "quick_start"],
        capture_output=True,
        text=True,
        timeout=300,
        # The script runs python3 from PATH, as in CI's activated venv: this test's interpreter comes first.
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "SCRIPTORIUM_TEST_WORKERS": "2",
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "created: 2/2 workers" in done.stdout and "1 passed in" in done.stdout, done.stdout
