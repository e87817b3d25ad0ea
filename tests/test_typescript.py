"""The TypeScript this project ships — the pi extension and the OpenClaw plugin, each loaded by its runtime as it
is — type-checks under the pinned compiler (``tests/runtimes/clis``), strict, against the pinned runtime's own
declarations."""

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


def test_the_openclaw_plugin_type_checks_against_the_pinned_openclaw() -> None:
    require("runtime-clis")
    require("openclaw")
    done = subprocess.run(
        [str(cli("tsc")), "-p", str(ROOT / "tests" / "typescript" / "openclaw")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
