"""The ``scriptorium`` command line as the tests drive it: in this process (:func:`run`), or as the installed
console script in a process of its own (:func:`run_process`), for the tests of the process boundary."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.edge import console

REPO = Path(__file__).resolve().parents[2]
"""The repository: commands run here, so the examples' relative paths resolve."""
EXE = shutil.which("scriptorium") or ""


def run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``scriptorium ARGS`` in this process, from the repository's folder."""
    return console(list(args), env=env, stdin=stdin, cwd=REPO)


def run_process(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``scriptorium ARGS`` as the installed console script (else ``python -m``), from the repository's folder."""
    command = [EXE] if EXE else [sys.executable, "-m", "scriptorium.cli.main"]
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        input=stdin,
        env={**os.environ, **(env or {})},
        cwd=REPO,
        timeout=60,
    )
