"""Every benchmark runs in CI at its smoke size, so none rots unseen (issue "a newcomer's first hour").

Each script in ``benchmarks/`` with a ``__main__`` guard is a benchmark; the rest are its helpers. Each runs
``--smoke`` (its smallest size: a few seconds) as a subprocess, as a user runs it, and must exit 0 with its
last stdout line a JSON object holding the keys docs/benchmarks.md names for it. The figures are not
checked: a smoke size measures nothing worth a target. A new benchmark without an entry in :data:`SMOKE`
fails :func:`test_every_benchmark_has_a_smoke_run`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.bench_keys import CODING_KEYS
from tests.requirements import SHARED_DATA, require

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"


@dataclass(frozen=True, slots=True)
class Smoke:
    keys: frozenset[str]
    """The last line's keys, as docs/benchmarks.md (or the script's docstring) names them."""
    args: tuple[str, ...] = ("--smoke",)


def keys(*names: str) -> frozenset[str]:
    return frozenset(names)


LOCOMO = SHARED_DATA / "locomo-dev" / "locomo-dev2.json"
CODING = SHARED_DATA / "coding-dev"
CODING_QUESTIONS = BENCHMARKS / "data" / "coding-dev-questions.jsonl"
SMOKE: dict[str, Smoke] = {
    "agent_writer": Smoke(
        keys(
            "agent_pass_p50_ms",
            "agent_floor_p50_ms",
            "verbatim_pass_p50_ms",
            "agent_overhead_ms",
            "agent_overhead_ratio",
        )
    ),
    "changes": Smoke(
        keys(
            "api_p50_ms",
            "bare_txn_p50_ms",
            "api_overhead_ratio",
            "api_token_overhead_ratio",
            "held_p50_ms",
            "bare_dry_run_p50_ms",
            "held_ratio",
        )
    ),
    "cli_start": Smoke(keys("help_ms", "help_over_floor", "command_help_max_over_floor", "status_ms", "floor_ms")),
    "cluster": Smoke(
        keys(
            "e2e_p50_ms",
            "e2e_p95_ms",
            "bare_pass_p50_ms",
            "noop_roundtrip_p50_ms",
            "passes_per_s",
            "noop_tasks_per_s",
        )
    ),
    "coding": Smoke(
        keys(*CODING_KEYS),
        args=(str(CODING), "--questions", str(CODING_QUESTIONS), "--smoke"),
    ),
    "forget": Smoke(
        keys("forget_p50_ms", "bare_delete_p50_ms", "forget_ratio", "purge_vs_gc_ratio", "history_purge_s")
    ),
    "hooks": Smoke(
        keys("prompt_hook_p50_ms", "prompt_hook_http_p50_ms", "python_floor_p50_ms", "session_start_hook_p50_ms")
    ),
    "ingest": Smoke(keys("messages_per_s", "archive_floor_messages_per_s", "ratio_vs_floor", "incremental_fraction")),
    "long_conversation": Smoke(
        keys(
            "pass_ms_first",
            "pass_ms_last",
            "growth_last_over_first",
            "floor_ms_last",
            "last_over_floor",
            "one_file_ms_last",
            "one_file_growth",
            "conversation_mb",
            "parts",
        )
    ),
    "packing": Smoke(keys("git_kib_unpacked", "git_kib_packed", "install_ms_p50_packed", "repacks_started")),
    "pages": Smoke(
        keys(
            "timeline_ttfb_ms",
            "timeline_bytes",
            "timeline_first_ms",
            "timeline_after_write_ms",
            "floor_ms",
            "floor_bytes",
            "pages_max_ms",
            "pages_max_bytes",
        )
    ),
    "pending": Smoke(
        keys("pending_ms_1k", "pending_ms_100k", "growth_100k_over_1k", "ratio_vs_floor_100k", "ratio_vs_walk_100k")
    ),
    "recall": Smoke(keys("recall_at_2000_chars", "p50_query_ms"), args=(str(LOCOMO), "--smoke")),
    "redaction": Smoke(keys("adversarial_ms_100k", "ordinary_mb_per_s", "read_floor_mb_per_s", "ordinary_over_floor")),
    "runtimes": Smoke(
        keys(
            "claude_p_bare_p50_s",
            "claude_p_with_memory_p50_s",
            "mcp_initialize_p50_s",
            "mcp_minimal_initialize_p50_s",
            "mcp_tools_first_request",
            "claude_p_floor_p50_s",
            "claude_p_floor_ratio",
            "claude_p_ratio_vs_floor",
            "claude_p_with_server_p50_s",
            "claude_p_server_ratio",
            "context_first_request",
            "codex_bare_p50_s",
            "codex_with_memory_p50_s",
            "pi_bare_p50_s",
            "pi_with_memory_p50_s",
            "openclaw_bare_p50_s",
            "openclaw_with_memory_p50_s",
        )
    ),
    "search": Smoke(
        keys(
            "p50_ms_1k", "p50_ms_10k", "bm25s_p50_ms_10k", "cold_start_ms_10k", "reindex_fraction_10k", "build_ms_100k"
        )
    ),
    "transaction": Smoke(keys("txn_ms_1k", "floor_ms_1k", "txn_ms_10k", "ratio_vs_floor_1k", "growth_10k_over_1k")),
    "year": Smoke(
        keys(
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
        )
    ),
}


def benchmarks() -> list[str]:
    """The scripts that run as benchmarks: those with a ``__main__`` guard (helpers have none)."""
    return sorted(p.stem for p in BENCHMARKS.glob("*.py") if 'if __name__ == "__main__":' in p.read_text())


def test_every_benchmark_has_a_smoke_run() -> None:
    assert set(benchmarks()) == set(SMOKE), "an entry in SMOKE for each benchmark, and none for a helper"


def run(name: str, args: tuple[str, ...], cwd: Path) -> tuple[list[str], dict[str, object]]:
    """Run ``benchmarks/NAME.py ARGS`` as a user would; its stdout lines and its last line's JSON object."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SCRIPTORIUM_")}
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**clean, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    last = json.loads(lines[-1])
    assert isinstance(last, dict), lines[-1]
    return lines, last


@pytest.fixture(params=sorted(set(SMOKE) - {"year"}))
def benchmark(request: pytest.FixtureRequest) -> str:
    """A benchmark's name, once what it needs is there (its marker read off the literal require())."""
    if request.param == "cluster":
        require("redis-server")
    if request.param == "pending":  # PostgreSQL is optional to the script; CI has it, so its arm runs there
        require("postgres")
    if request.param == "search":
        require("bm25s")
    if request.param == "runtimes":
        require("runtime-clis")
        require("openclaw")
    if request.param == "recall":
        require("locomo-dev")
    if request.param == "coding":
        require("coding-dev")
    return str(request.param)


@pytest.mark.timeout(360)
def test_the_smoke_size_runs_and_ends_with_the_issue_keys(benchmark: str, tmp_path: Path) -> None:
    smoke = SMOKE[benchmark]
    lines, last = run(benchmark, smoke.args, tmp_path)
    assert not smoke.keys - set(last), sorted(smoke.keys - set(last))
    assert len(lines) > 1, "a readable table before the JSON line"


@pytest.mark.timeout(360)
def test_year_smoke_runs_every_step_and_ends_with_the_issue_keys(tmp_path: Path) -> None:
    """Two months of two sessions each (a fork, a subagent and a resumed session among them), imported a month
    at a time, every figure measured (issue 55)."""
    lines, last = run("year", ("--smoke", "--keep", str(tmp_path / "year")), tmp_path)
    wanted = SMOKE["year"].keys
    assert not wanted - set(last), wanted - set(last)
    assert last["errors"] == 0, lines[-20:]
    assert last["last_month"] == 2 and isinstance(last["messages"], int) and last["messages"] > 0
    assert all(last[key] is not None for key in wanted), {k: last[k] for k in wanted if last[k] is None}
    assert isinstance(last["git_packed"], bool) and isinstance(last["cold_first_prompt_has_recall"], bool)
    for key in ("import_s_m1", "import_growth_m12_over_m1", "state_disk_over_raw"):
        value = last[key]
        assert isinstance(value, int | float) and value > 0, (key, value)
    projects = tmp_path / "year" / "claude" / "projects"
    assert list(projects.glob("*/agent-*.jsonl")), "a subagent's own transcript, beside its session's"
    assert any("month 1:" in line and "1 resumed" in line and "1 forks" in line for line in lines), lines[:6]
