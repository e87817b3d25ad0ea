"""What a write pass returns: values, not log lines, so each caller decides what to retry and report.

* :class:`Written` / :class:`NothingDue` — no problem to report (the idle
  sweep marks the session handled);
* :class:`Pending` — still pending, worth retrying (lock held, model
  unreachable, git commit failed…): leave the session unhandled;
* :class:`Failed` — still pending, retrying will not help (rejected twice,
  invalid source…): mark the session handled and publish the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scriptorium.errors import PermanentError, ReasonCode, ScriptoriumError, TransientError


@dataclass(frozen=True, slots=True)
class Written:
    """At least one batch was installed and its nodes marked."""

    revision: str
    changed_files: tuple[str, ...]
    nodes_written: int
    batches: int
    pending_nodes: int = 0
    organized: bool = False
    records_created: int = 0
    sources_archived: int = 0
    ok: bool = field(default=True, init=False)
    retryable: bool = field(default=False, init=False)
    reason: ReasonCode | None = field(default=None, init=False)


@dataclass(frozen=True, slots=True)
class NothingDue:
    """Nothing to write: no pending content, or below the trigger threshold (unforced)."""

    pending_nodes: int = 0
    pending_tokens: int = 0
    ok: bool = field(default=True, init=False)
    retryable: bool = field(default=False, init=False)
    reason: ReasonCode | None = field(default=None, init=False)


@dataclass(frozen=True, slots=True)
class Pending:
    """Content is still pending and a later attempt may succeed."""

    reason: ReasonCode
    message: str
    pending_nodes: int = 0
    nodes_written: int = 0
    ok: bool = field(default=False, init=False)
    retryable: bool = field(default=True, init=False)


@dataclass(frozen=True, slots=True)
class Failed:
    """Content is still pending and retrying the same input will not help."""

    reason: ReasonCode
    message: str
    pending_nodes: int = 0
    nodes_written: int = 0
    ok: bool = field(default=False, init=False)
    retryable: bool = field(default=False, init=False)


Outcome = Written | NothingDue | Pending | Failed


def outcome_name(outcome: Outcome) -> str:
    match outcome:
        case Written():
            return "written"
        case NothingDue():
            return "nothing_due"
        case Pending():
            return "pending"
        case Failed():
            return "failed"


def outcome_of_error(exc: ScriptoriumError) -> Pending | Failed:
    """What a pass that raised ``exc`` comes to: retryable errors leave the turns pending, others fail."""
    if isinstance(exc, TransientError):
        return Pending(exc.reason, exc.message)
    assert isinstance(exc, PermanentError)
    return Failed(exc.reason, exc.message)
