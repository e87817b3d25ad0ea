"""A retried task's delay: exponential backoff with full jitter, capped."""

from __future__ import annotations

import random

from scriptorium.settings import Settings
from scriptorium.workers.handling import backoff


def test_retry_delays_are_full_jitter_uniform_from_zero_to_the_capped_exponential() -> None:
    settings = Settings(retry_base_s=5.0, retry_max_delay_s=300.0)
    random.seed(56)
    for retries, ceiling in [(0, 5.0), (3, 40.0), (10, 300.0)]:
        delays = [backoff(retries, settings) for _ in range(2000)]
        assert all(0 <= delay <= ceiling for delay in delays)
        below_half = sum(delay < ceiling / 2 for delay in delays) / len(delays)
        assert 0.45 < below_half < 0.55, (retries, below_half)  # equal jitter never goes below ceiling/2
        assert min(delays) < ceiling * 0.01
