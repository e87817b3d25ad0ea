"""``benchmarks/year.py``'s figures: a month's row, and the report made of them (the tables, the summary its last
line prints, the issue's targets)."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from year_corpus import Month
from year_processes import MB


@dataclass(slots=True)
class Row:
    month: int
    written: Month | None = None
    raw_bytes: int = 0
    """Raw transcripts written so far (bytes)."""
    import_s: float | None = None
    import_cpu_s: float | None = None
    import_peak_mb: float | None = None
    sources: int | None = None
    records: int | None = None
    failed: int | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    git: dict[str, Any] = field(default_factory=dict)
    cold_ms: float | None = None
    cold_recall: bool | None = None
    prompt: list[float] = field(default_factory=list)
    prompt_recall: list[bool] = field(default_factory=list)
    http: list[float] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    status_ms: float | None = None
    change_ms: float | None = None
    timeline_ttfb_ms: float | None = None
    timeline_kb: float | None = None
    errors: list[str] = field(default_factory=list)
    spent: dict[str, float] = field(default_factory=dict)
    """Seconds each step took, measuring included (where a run's time goes)."""

    def step(self, name: str, call: Callable[[], None]) -> None:
        """Run one measurement; a failure is noted with its reason and the month goes on."""
        t0 = time.monotonic()
        try:
            call()
        except Exception as exc:
            self.errors.append(f"{name}: {type(exc).__name__}: {str(exc).strip()[:300]}")
        finally:
            self.spent[name] = self.spent.get(name, 0.0) + time.monotonic() - t0


def p50(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def p95(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


# -- the report -----------------------------------------------------------------------------------------


def fmt(value: float | int | None, spec: str = ".0f") -> str:
    return "—" if value is None else format(value, spec)


def ratio(last: float | None, first: float | None) -> float | None:
    return None if last is None or not first else last / first


def print_tables(rows: list[Row]) -> None:
    print()
    print("import (CPU and peak of its processes, git's included) and storage (MB as du counts them; loose objects)")
    head = (
        f"{'month':>5} {'msgs':>6} {'import s':>9} {'msg/s':>7} {'cpu s':>7} {'peak MB':>8} {'failed':>6} "
        f"{'store':>7} {'sources':>8} {'topics':>7} {'.git':>7} {'loose':>7} {'packs':>5} {'other':>7} "
        f"{'state':>7} {'raw':>6} {'x raw':>6}"
    )
    print(head)
    for r in rows:
        msgs = r.sources if r.sources is not None else (r.written.messages if r.written else None)
        rate = msgs / r.import_s if msgs and r.import_s else None
        size = {k: v / MB for k, v in r.sizes.items()}
        print(
            f"{r.month:>5} {fmt(msgs, ','):>6} {fmt(r.import_s, '.1f'):>9} {fmt(rate, '.0f'):>7} "
            f"{fmt(r.import_cpu_s, '.1f'):>7} {fmt(r.import_peak_mb, '.0f'):>8} {fmt(r.failed):>6} "
            f"{fmt(size.get('sessions'), '.1f'):>7} {fmt(size.get('sources'), '.1f'):>8} "
            f"{fmt(size.get('topics'), '.1f'):>7} {fmt(size.get('git'), '.1f'):>7} {fmt(r.git.get('loose'), ','):>7} "
            f"{fmt(r.git.get('packs')):>5} {fmt(size.get('other'), '.1f'):>7} {fmt(size.get('state'), '.1f'):>7} "
            f"{r.raw_bytes / MB:>6.1f} {fmt(ratio(r.sizes.get('state'), r.raw_bytes), '.2f'):>6}"
        )
    print()
    print("latency (ms; prompt and SessionStart hooks through the daemon, http: POST /api/hooks)")
    print(
        f"{'month':>5} {'cold':>7} {'recall':>6} {'prompt p50':>10} {'p95':>6} {'recall':>6} {'http p50':>8} "
        f"{'p95':>6} {'start p50':>9} {'p95':>6} {'status':>7} {'change':>7} {'timeline':>9} {'page KB':>8}"
    )
    for r in rows:
        recall = f"{sum(r.prompt_recall)}/{len(r.prompt_recall)}" if r.prompt_recall else "—"
        cold = "—" if r.cold_recall is None else ("yes" if r.cold_recall else "no")
        print(
            f"{r.month:>5} {fmt(r.cold_ms):>7} {cold:>6} {fmt(p50(r.prompt), '.1f'):>10} {fmt(p95(r.prompt)):>6} "
            f"{recall:>6} {fmt(p50(r.http), '.1f'):>8} {fmt(p95(r.http)):>6} {fmt(p50(r.start), '.1f'):>9} "
            f"{fmt(p95(r.start)):>6} {fmt(r.status_ms):>7} {fmt(r.change_ms, '.1f'):>7} "
            f"{fmt(r.timeline_ttfb_ms):>9} {fmt(r.timeline_kb, ',.0f'):>8}"
        )
    errors = [(r.month, e) for r in rows for e in r.errors]
    if errors:
        print()
        print("failed steps:")
        for month, error in errors:
            print(f"  month {month}: {error}")


def summary(rows: list[Row], purge: dict[str, Any], cold: tuple[float | None, bool | None]) -> dict[str, Any]:
    first, last = rows[0], rows[-1]
    raw = last.raw_bytes

    def r3(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    state = last.sizes.get("state")
    colds = [bool(r.cold_recall) for r in rows]
    return {
        "import_growth_m12_over_m1": r3(ratio(last.import_s, first.import_s)),
        "state_disk_over_raw": r3(ratio(state, raw)),
        "git_packed": last.git.get("packed"),
        "timeline_ttfb_ms_m12": r3(last.timeline_ttfb_ms),
        "status_ms_m12": r3(last.status_ms),
        "session_start_ms_m12": r3(p50(last.start)),
        "change_ms_m12": r3(last.change_ms),
        "prompt_hook_p50_ms_m12": r3(p50(last.prompt)),
        "purge_s_m12": r3(purge.get("s")),
        "purge_peak_mb": r3(purge.get("tree_peak_mb")),
        "cold_first_prompt_has_recall": None if cold[1] is None else cold[1] and all(colds),
        "import_s_m1": r3(first.import_s),
        "import_s_m12": r3(last.import_s),
        "import_cpu_s_m1": r3(first.import_cpu_s),
        "import_cpu_s_m12": r3(last.import_cpu_s),
        "import_cpu_growth_m12_over_m1": r3(ratio(last.import_cpu_s, first.import_cpu_s)),
        "session_start_ms_m1": r3(p50(first.start)),
        "change_ms_m1": r3(first.change_ms),
        "prompt_hook_p50_ms_m1": r3(p50(first.prompt)),
        "prompt_hook_http_p50_ms_m1": r3(p50(first.http)),
        "prompt_hook_http_p50_ms_m12": r3(p50(last.http)),
        "status_ms_m1": r3(first.status_ms),
        "timeline_ttfb_ms_m1": r3(first.timeline_ttfb_ms),
        "session_start_m12_over_m1": r3(ratio(p50(last.start), p50(first.start))),
        "change_m12_over_m1": r3(ratio(last.change_ms, first.change_ms)),
        "prompt_hook_m12_over_m1": r3(ratio(p50(last.prompt), p50(first.prompt))),
        "cold_first_prompt_ms": r3(cold[0]),
        "cold_first_prompt_final_has_recall": cold[1],
        "cold_first_prompts_after_import_with_recall": f"{sum(colds)}/{len(colds)}",
        "import_failed_sessions_m12": last.failed,
        "last_month": last.month,
        "messages": sum(r.written.messages for r in rows if r.written),
        "raw_mb": r3(raw / MB),
        "state_mb": r3(state / MB if state is not None else None),
        "errors": sum(len(r.errors) for r in rows) + int("error" in purge),
    }


def print_targets(result: dict[str, Any], last: int) -> None:
    def check(name: str, value: Any, ok: bool | None, target: str) -> None:
        verdict = "—" if ok is None else ("met" if ok else "MISSED")
        print(
            f"  {name:<34} {fmt(value, '.3f') if isinstance(value, float) else str(value):>10}  {target:<28} {verdict}"
        )

    def at_most(value: float | None, limit: float | None) -> bool | None:
        return None if value is None or limit is None else value <= limit

    def times(key: str, factor: float) -> float | None:
        first = result.get(key.replace("_m12", "_m1"))
        return None if first is None else factor * first

    print()
    print(f"targets (issue 55; m12 is month {last} of this run)")
    growth = result["import_growth_m12_over_m1"]
    check(f"import m{last} / m1", growth, at_most(growth, 1.5), "<= 1.5")
    check(f"  (its CPU m{last} / m1)", result["import_cpu_growth_m12_over_m1"], None, "(beside it)")
    check("state on disk / raw", result["state_disk_over_raw"], at_most(result["state_disk_over_raw"], 3), "<= 3")
    check("git packed", result["git_packed"], result["git_packed"], "true")
    for key, limit in (("timeline_ttfb_ms_m12", 500.0), ("status_ms_m12", 300.0)):
        check(key, result[key], at_most(result[key], limit), f"<= {limit:.0f} ms")
    for key, factor in (("session_start_ms_m12", 1.3), ("change_ms_m12", 1.3), ("prompt_hook_p50_ms_m12", 1.2)):
        limit = times(key, factor)
        check(key, result[key], at_most(result[key], limit), f"<= {factor} x m1 ({fmt(limit, '.1f')} ms)")
    check("purge_s_m12", result["purge_s_m12"], at_most(result["purge_s_m12"], 30), "<= 30 s")
    check("purge_peak_mb", result["purge_peak_mb"], at_most(result["purge_peak_mb"], 300), "<= 300 MB")
    recall = result["cold_first_prompt_has_recall"]
    after = result["cold_first_prompts_after_import_with_recall"]
    check("cold_first_prompt_has_recall", recall, recall, f"true (after imports: {after})")
