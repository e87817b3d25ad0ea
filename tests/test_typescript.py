"""The TypeScript this project ships — the pi extension, loaded by pi as it is — type-checks under the pinned
compiler (``tests/runtimes/clis``), strict, against the pinned pi's own declarations."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.requirements import cli, require

ROOT = Path(__file__).resolve().parents[1]


def test_the_pi_extension_type_checks_against_the_pinned_pi() -> None:
    require("runtime-clis")
    done = subprocess.run(
        [str(cli("tsc")), "-p", str(ROOT / "tests" / "typescript")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
