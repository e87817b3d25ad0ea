"""``benchmarks/year.py --smoke``: the heavy-year benchmark at its smallest size, end to end (issue 55).

Two months of two sessions each (a fork, a subagent and a resumed session among them), imported a month at
a time, every figure measured; the last line is the JSON object with the issue's keys.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "year.py"
KEYS = {
    "import_growth_m12_over_m1",
    "state_disk_over_raw",
    "git_packed",
    "timeline_ttfb_ms_m12",
    "status_ms_m12",
    "session_start_ms_m12",
    "change_ms_m12",
    "prompt_hook_p50_ms_m12",
    "purge_s_m12",
    "purge_peak_mb",
    "cold_first_prompt_has_recall",
    "session_start_ms_m1",
    "change_ms_m1",
    "prompt_hook_p50_ms_m1",
    "import_s_m1",
    "import_s_m12",
}


def test_the_smoke_size_runs_every_step_and_ends_with_the_issue_keys(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCRIPTORIUM_")}
    out = subprocess.run(
        [sys.executable, str(BENCH), "--smoke", "--keep", str(tmp_path / "year")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=clean,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    last = json.loads(lines[-1])
    assert not KEYS - set(last), KEYS - set(last)
    assert last["errors"] == 0, out.stdout[-3000:]
    assert last["last_month"] == 2 and last["messages"] > 0
    assert all(last[key] is not None for key in KEYS), {k: last[k] for k in KEYS if last[k] is None}
    assert isinstance(last["git_packed"], bool) and isinstance(last["cold_first_prompt_has_recall"], bool)
    assert last["import_s_m1"] > 0 and last["import_growth_m12_over_m1"] > 0 and last["state_disk_over_raw"] > 0
    projects = tmp_path / "year" / "claude" / "projects"
    assert list(projects.glob("*/agent-*.jsonl")), "a subagent's own transcript, beside its session's"
    assert any("month 1:" in line and "1 resumed" in line and "1 forks" in line for line in lines), lines[:6]
