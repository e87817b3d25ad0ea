"""Under CI=true Hypothesis runs its CI profile (tests/conftest.py): the same examples every run, no deadline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOW = "import tests.conftest; from hypothesis import settings; s = settings.default; print(s.derandomize, s.deadline)"


def _default_settings(ci: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({} if ci is None else {"CI": ci})
    done = subprocess.run([sys.executable, "-c", SHOW], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_under_ci_examples_are_derandomized_and_have_no_deadline() -> None:
    assert _default_settings("true") == ["True", "None"]
    assert _default_settings(None) == ["False", "0:00:00.200000"]
