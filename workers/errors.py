"""Task-level failures, so dashboards tell the three outcomes apart by state and exception type.

* SUCCESS — written or nothing due (the result holds ``ok: true``);
* FAILURE with :class:`TerminalWriteFailure` — retrying will not help; the
  session is marked handled and the reason is on the stream;
* FAILURE with :class:`RetriesExhausted` — still retryable, but the task gave
  up; the session stays pending and the idle sweep brings it back.

While a retryable pass is retried the task is in RETRY.
"""

from __future__ import annotations


class TerminalWriteFailure(Exception):
    """The pass ended with a terminal reason code (first word of the message)."""


class RetriesExhausted(Exception):
    """A retryable pass failed on every attempt; the sweep will enqueue it again."""
