"""The coding-memory benchmark's figures (:mod:`coding` runs the questions): how much of a question's evidence
the hook's ranked hits and its injected context hold, whether a stale statement ranks above the current one,
which injected records come from another project, and the table and JSON line they are reported in.

Pure functions of messages (``(session, message ID)`` pairs) and ranks: ``tests/test_bench_coding.py`` works
them out by hand on a tiny data set."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CATEGORIES = ("decision", "command", "convention", "fix", "preference", "changed", "environment", "cross_project")
Message = tuple[str, str]
"""(session ID, node ID): one imported message, as the archived sources name it (thread, message)."""


def share(wanted: Sequence[set[Message]], found: set[Message]) -> float:
    """The share of evidence quotes (each: the messages holding it) whose message is in ``found``."""
    return sum(1 for messages in wanted if messages & found) / len(wanted) if wanted else 0.0


def first_rank(messages: set[Message], ranked: Sequence[set[Message]]) -> float:
    for rank, sources in enumerate(ranked):
        if messages & sources:
            return rank
    return float("inf")


def stale_first(current: Sequence[set[Message]], stale: Sequence[set[Message]], ranked: Sequence[set[Message]]) -> bool:
    """A stale quote's record ranks (in ``ranked``) above every current quote's."""
    best_stale = min((first_rank(m, ranked) for m in stale), default=float("inf"))
    best_current = min((first_rank(m, ranked) for m in current), default=float("inf"))
    return best_stale < best_current


def in_project(sessions: set[str], project: Path, cwd: dict[str, Path]) -> bool:
    return any(s in cwd and (cwd[s] == project or cwd[s].is_relative_to(project)) for s in sessions)


@dataclass(slots=True)
class Scores:
    """The per-question figures, by category."""

    rows: dict[str, dict[str, list[float]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    stale_first: list[bool] = field(default_factory=list)
    injected: int = 0
    foreign: int = 0
    hook_ms: list[float] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    silent: int = 0
    """Prompts the hook answered with no context."""
    misses: list[str] = field(default_factory=list)
    """For each question whose evidence the hook did not inject: where its evidence ranked."""

    def add(self, category: str, **figures: float) -> None:
        for key, value in figures.items():
            self.rows[category][key].append(value)

    def mean(self, key: str, category: str | None = None) -> float:
        values = self.rows[category][key] if category else [v for rows in self.rows.values() for v in rows[key]]
        return statistics.mean(values) if values else 0.0


def report(scores: Scores, mode: str, extra: dict[str, Any], misses: bool = False) -> dict[str, Any]:
    keys = ("recall_at_5", "recall_at_10", "context_recall", "baseline_recall_at_10", "baseline_context_recall")
    heads = ("r@5", "r@10", "context", "raw@10", "raw ctx")
    print(f"{'category':<14} {'questions':>9} " + " ".join(f"{h:>8}" for h in heads))
    ordered = [c for c in CATEGORIES if c in scores.rows] + sorted(set(scores.rows) - set(CATEGORIES))
    for category in ordered:
        count = len(scores.rows[category]["recall_at_10"])
        print(f"{category:<14} {count:>9} " + " ".join(f"{scores.mean(k, category):>8.3f}" for k in keys))
    total = sum(len(rows["recall_at_10"]) for rows in scores.rows.values())
    print(f"{'all':<14} {total:>9} " + " ".join(f"{scores.mean(k):>8.3f}" for k in keys))
    stale_rate = statistics.mean(scores.stale_first) if scores.stale_first else 0.0
    foreign = scores.foreign / scores.injected if scores.injected else 0.0
    p50 = statistics.median(scores.hook_ms) if scores.hook_ms else 0.0
    print(
        f"mode {mode}: stale first in {sum(scores.stale_first)} of {len(scores.stale_first)} changed questions; "
        f"foreign records {scores.foreign} of {scores.injected} injected; hook p50 {p50:.1f} ms; "
        f"{scores.silent} prompt(s) answered with no context; {len(scores.unresolved)} quote(s) not found"
    )
    for line in scores.unresolved:
        print(f"  not found: {line}")
    if misses:
        print("evidence not injected (ranks from 1; - not ranked):")
        for line in scores.misses:
            print(f"  {line}")
    result = {
        "mode": mode,
        "questions": total,
        "recall_at_5": round(scores.mean("recall_at_5"), 4),
        "recall_at_10": round(scores.mean("recall_at_10"), 4),
        "context_recall": round(scores.mean("context_recall"), 4),
        "stale_first_rate": round(stale_rate, 4),
        "foreign_share": round(foreign, 4),
        "baseline_recall_at_10": round(scores.mean("baseline_recall_at_10"), 4),
        "baseline_context_recall": round(scores.mean("baseline_context_recall"), 4),
        "p50_hook_ms": round(p50, 1),
        "unresolved_quotes": len(scores.unresolved),
        "by_category": {
            category: {
                "questions": len(scores.rows[category]["recall_at_10"]),
                **{k: round(scores.mean(k, category), 4) for k in keys},
            }
            for category in ordered
        },
        **extra,
    }
    print(json.dumps(result))
    return result
