"""The headline keys a benchmark's last JSON line must hold, as its issue names them (docs/benchmarks.md), for
the tests that run a benchmark."""

from __future__ import annotations

CODING_KEYS = (
    "recall_at_5",
    "recall_at_10",
    "context_recall",
    "stale_first_rate",
    "foreign_share",
    "by_category",
    "p50_hook_ms",
    "questions",
    "baseline_recall_at_10",
    "baseline_context_recall",
)
"""``benchmarks/coding.py``'s (issue 57)."""
