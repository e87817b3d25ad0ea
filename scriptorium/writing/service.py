"""The write pass: select → batch → archive → writer edits → organize when due → install → mark.

Callers pass a session ID, never messages: every pass rereads session
storage, so a restart loses nothing. Order inside a pass is what makes it
crash-safe: sources are archived (idempotent) before the writer runs, the
transaction installs all or nothing, and nodes are marked only after an
install that changed files. A crash between steps leaves the same batch
pending for the next pass.

A writer that costs money (one with a ``usage``) runs within a daily budget
(:mod:`scriptorium.writing.budget`): checked before each batch is archived, so a
pass past it stops with ``WRITER_BUDGET_SPENT`` having stored nothing of that
batch, or hands the batch to the verbatim writer when the user chose so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime

from scriptorium.defaults import (
    DEFAULT_BATCH_TOKENS,
    DEFAULT_ORGANIZE_BATCHES,
    DEFAULT_ORGANIZE_INTERVAL_S,
    DEFAULT_ORGANIZE_TOKENS,
    DEFAULT_TRIGGER_TOKENS,
)
from scriptorium.errors import (
    BudgetSpent,
    InvalidPath,
    LockHeld,
    ReasonCode,
    ScriptoriumError,
    TransientError,
    ValidationRejected,
)
from scriptorium.logs import get_logger
from scriptorium.recall.branches import branch_context
from scriptorium.sessions import Session, SessionStore
from scriptorium.workspace import MemoryWorkspace, TxnResult
from scriptorium.workspace.paths import TOPICS
from scriptorium.workspace.staging import REAL_TREE, TOPIC_API, Staging
from scriptorium.workspace.workspace import PreInstallHook
from scriptorium.workspace.writer_history import WriterHistory
from scriptorium.writer_interface import Batch, BranchContext, Organizer, Repair, Usage, Writer
from scriptorium.writing.ahead import ArchiveAhead
from scriptorium.writing.backfill import BackfillLedger, backfill_batches, unwritten_sources
from scriptorium.writing.batch import cut_batch
from scriptorium.writing.branching import organize_apart, spawned_sessions, together
from scriptorium.writing.budget import BudgetLimits, WriterBudget
from scriptorium.writing.handover import PassLock, WorkspaceFileLock, serve_handovers
from scriptorium.writing.history import OrganizeCounters, OrganizeState, pass_entry
from scriptorium.writing.outcomes import Failed, NothingDue, Outcome, Pending, Written, outcome_of_error
from scriptorium.writing.restatements import INDEX_AGE_S, Restatements
from scriptorium.writing.selection import PendingContent

log = get_logger(__name__)
REPAIRABLE = (ValidationRejected, InvalidPath)


@dataclass(frozen=True, slots=True)
class WriteSettings:
    """Thresholds of the write pass (defaults from :mod:`scriptorium.defaults`)."""

    batch_tokens: int = DEFAULT_BATCH_TOKENS
    trigger_tokens: int = DEFAULT_TRIGGER_TOKENS
    organize_batches: int = DEFAULT_ORGANIZE_BATCHES
    organize_tokens: int = DEFAULT_ORGANIZE_TOKENS
    organize_interval_s: float = DEFAULT_ORGANIZE_INTERVAL_S
    budget: BudgetLimits = field(default_factory=BudgetLimits)
    """A costly writer's daily caps (:mod:`scriptorium.writing.budget`)."""
    over_budget: tuple[Writer, Organizer] | None = None
    """What writes a batch once the day's budget is spent (the verbatim writer and the offline organizer,
    when the user chose so); None: the pass waits (``WRITER_BUDGET_SPENT``)."""


@dataclass(slots=True)
class _Progress:
    revision: str = ""
    changed: tuple[str, ...] = ()
    nodes: int = 0
    batches: int = 0
    records: int = 0
    sources: int = 0
    organized: bool = False


class _PassFailed(Exception):
    def __init__(self, outcome: Pending | Failed) -> None:
        self.outcome = outcome


class WriteService:
    """Writes sessions into one memory workspace."""

    def __init__(
        self,
        workspace: MemoryWorkspace,
        store: SessionStore,
        writer: Writer,
        organizer: Organizer,
        settings: WriteSettings | None = None,
        clock: Callable[[], float] = time.time,
        lock: PassLock | None = None,
    ) -> None:
        self.workspace = workspace
        self.store = store
        self.writer = writer
        self.organizer = organizer
        self.settings = settings or WriteSettings()
        self.clock = clock
        self.lock: PassLock = lock or WorkspaceFileLock(workspace)
        self._pre_install: PreInstallHook | None = None
        runtime = workspace.root / ".scriptorium"
        self.history = WriterHistory(runtime)
        self.organize_state = OrganizeState(runtime)
        self.budget = WriterBudget(runtime, self.settings.budget, clock)
        self._ran_name: str | None = None
        """The writer that wrote this pass when it was not ours (the fallback past the budget), for the history."""
        self.pending = PendingContent(workspace, store, workspace.key)
        """Step 1: what no pass has written yet."""
        self.on_batch: Callable[[Batch, TxnResult], None] | None = None
        """Called after each installed batch (progress bars)."""
        self.on_handover: Callable[[str], None] | None = None
        """Runs one event handed over to this holder (a payload), under the lock still held: the cluster's
        worker sets it, and calls :meth:`held_write` from it. Unset: nothing is taken over."""

    @property
    def workspace_key(self) -> str:
        """Whose write markers this service reads and writes (the workspace's identity)."""
        return self.pending.key

    @workspace_key.setter
    def workspace_key(self, key: str) -> None:
        self.pending.key = key

    # -- the two entry points -------------------------------------------------------

    def write(self, session_id: str | None, force: bool = False, tips: Sequence[str] | None = None) -> Outcome:
        """One pass (``force=False``) or passes until nothing remains on any live branch (``force=True``).

        ``tips`` (forced): only the branches ending there — the branch a head move left.
        """
        started = time.perf_counter()
        if not session_id:
            outcome: Outcome = Failed(ReasonCode.NO_SESSION_ID, "write() needs a session ID")
        else:
            try:
                with self.lock.hold() as hook:
                    self._pre_install = hook
                    try:
                        outcome = self._write_pass(session_id, force, tips)
                        serve_handovers(self.lock, self.on_handover)
                    finally:
                        self._pre_install = None
            except LockHeld as exc:
                outcome = Pending(ReasonCode.LOCK_HELD, exc.message, pending_nodes=self.pending.on_head(session_id))
            except TransientError as exc:  # the lock's own backend failed (e.g. Redis unreachable)
                outcome = Pending(exc.reason, exc.message)
        self._record("write", session_id, force, outcome, started)
        return outcome

    def held_write(self, session_id: str, force: bool = False, tips: Sequence[str] | None = None) -> Outcome:
        """:meth:`write` for work handed over to the holder: the lock is held already (call it from
        ``on_handover`` only)."""
        started = time.perf_counter()
        outcome = self._write_pass(session_id, force, tips)
        self._record("write", session_id, force, outcome, started)
        return outcome

    def _write_pass(self, session_id: str, force: bool, tips: Sequence[str] | None) -> Outcome:
        outcome = self._write_locked(session_id, force, tips)
        if force and tips is None and outcome.ok:
            outcome = together(outcome, self._write_spawned(session_id))
        if isinstance(outcome, Pending | Failed):
            outcome = replace(outcome, pending_nodes=self.pending.on_head(session_id))
        return outcome

    def reorganize(self) -> Outcome:
        """The nightly organize: rearrange topics through the same transaction; no sources, no markers."""
        started = time.perf_counter()
        try:
            with self.lock.hold() as hook:
                self._pre_install = hook
                try:
                    writer, organizer = self._within_budget()
                    with self._charging(writer, organizer):
                        result = self.workspace.write_pass(
                            lambda stage: self._organize(stage, organizer, everything=True),
                            message="Organize topics",
                            pre_install=hook,
                        )
                    self.organize_state.save(OrganizeCounters(0, 0, self.clock(), result.revision))
                finally:
                    serve_handovers(
                        self.lock, self.on_handover
                    )  # a refused organize still lets the waiters' writes run
                    self._pre_install = None
            outcome: Outcome = (
                Written(result.revision, result.changed_files, 0, 0, organized=True) if result.changed else NothingDue()
            )
        except LockHeld as exc:
            outcome = Pending(ReasonCode.LOCK_HELD, exc.message)
        except ScriptoriumError as exc:
            outcome = _refusal(exc)
        self._record("reorganize", None, True, outcome, started)
        return outcome

    def _organize(self, stage: Staging, organizer: Organizer, everything: bool = False) -> None:
        changed = None if everything else self._changed_since_organize(stage)
        restated = Restatements(self.workspace.root, self.store, 0.0 if everything else INDEX_AGE_S)
        organize_apart(organizer, self.store, stage, changed, restated)

    def _changed_since_organize(self, stage: Staging) -> set[str] | None:
        """The topics whose installed blob differs from the tree the last organize installed (None: unknown).
        Tree listings only (cached by tree ID): nothing is read or parsed."""
        organized = self.organize_state.load().tree
        if not organized or not stage.baseline_shas:
            return None
        try:
            before = self.workspace.git.list_files(organized, TOPICS)
        except Exception:  # the tree is gone (a purge rewrote history): look at everything
            return None
        now = stage.baseline_shas
        return {p for p, sha in now.items() if before.get(p) != sha} | {p for p in before if p not in now}

    def backfill(self) -> Outcome:
        """Write trusted sources no topic cites yet, batch by batch (pending sources excluded)."""
        started = time.perf_counter()
        try:
            with self.lock.hold() as hook:
                self._pre_install = hook
                try:
                    outcome = self._backfill_locked()
                    serve_handovers(self.lock, self.on_handover)
                finally:
                    self._pre_install = None
        except LockHeld as exc:
            outcome = Pending(ReasonCode.LOCK_HELD, exc.message)
        except TransientError as exc:
            outcome = Pending(exc.reason, exc.message)
        self._record("backfill", None, True, outcome, started)
        return outcome

    def backfill_due(self) -> int:
        """How many sources a backfill would offer the writer now."""
        return len(unwritten_sources(self.workspace, BackfillLedger(self.workspace.root / ".scriptorium").load()))

    def _backfill_locked(self) -> Outcome:
        ledger = BackfillLedger(self.workspace.root / ".scriptorium")
        todo = unwritten_sources(self.workspace, ledger.load())
        progress = _Progress()
        try:
            for batch in backfill_batches(todo, self.settings.batch_tokens):
                writer, organizer = self._budgeted(progress)
                with self._charging(writer, organizer):
                    result = self._transact(batch, (), False, writer, organizer)
                ledger.add(m.source.path for m in batch.messages)
                if result.changed:
                    progress.revision = result.revision
                    progress.changed = tuple(sorted(set(progress.changed) | set(result.changed_files)))
                    progress.batches += 1
                    progress.records += len(result.created_ids)
                progress.nodes += len(batch.messages)
                if self.on_batch is not None:
                    self.on_batch(batch, result)
                if result.changed and not result.git_committed:
                    raise _PassFailed(
                        Pending(ReasonCode.GIT_COMMIT_FAILED, result.message, nodes_written=progress.nodes)
                    )
        except _PassFailed as failure:
            return failure.outcome
        if progress.batches == 0:
            return NothingDue()
        return Written(
            progress.revision, progress.changed, progress.nodes, progress.batches, 0, False, progress.records
        )

    # -- passes ------------------------------------------------------------------

    def _branch_context(self, session: Session, tip: str) -> BranchContext | None:
        """For a writer that asks (the LLM writer): where the branch ending at ``tip`` stands."""
        if not getattr(self.writer, "wants_branches", False):
            return None
        key = self.workspace_key
        return branch_context(self.store, session.id, session.head, tip, lambda node: node.written_for(key))

    def _write_spawned(self, session_id: str) -> list[Outcome]:
        """A parent's boundary write covers the sessions that came from it, each written whole and in the
        history; the markers keep every turn written once."""
        outcomes = []
        for child in spawned_sessions(self.store, session_id):
            started = time.perf_counter()
            outcomes.append(outcome := self._write_locked(child, True))
            self._record("write", child, True, outcome, started)
        return outcomes

    def _write_locked(self, session_id: str, force: bool, only: Sequence[str] | None = None) -> Outcome:
        session = self.store.get_session(session_id)
        if session is None or session.head is None:
            return NothingDue()
        progress = _Progress()
        tips = [session.head]
        if only is not None:
            force, tips = True, list(dict.fromkeys(only))
        elif force:
            tips += [tip for tip in self.store.branch_tips(session_id) if tip != session.head]
        budget = self.settings.batch_tokens
        title, name = session.title, session.topic_name
        ran = session.metadata.get("cwd")
        folder = ran if isinstance(ran, str) and ran else None
        try:
            with ArchiveAhead(self.workspace) as ahead:
                for tip in tips:
                    # One walk per branch: each pass consumes the oldest batch of what it found, so a long
                    # forced write costs the walk once, not once per batch.
                    pending, messages = self.pending.on_branch(session, tip)
                    tokens = sum(m.tokens for m in messages)
                    context = self._branch_context(session, tip) if messages else None
                    while messages:
                        if not force and tokens < self.settings.trigger_tokens:
                            return NothingDue(len(messages), tokens)
                        writer, organizer = self._budgeted(progress)  # before its sources are archived
                        batch = cut_batch(session_id, title, pending, messages, budget, name, folder)
                        batch = replace(batch, branch=context) if context is not None else batch
                        prepared = ahead.take(batch)
                        paths = self.workspace.archive_sources(
                            prepared if prepared is not None else [m.source for m in batch.messages]
                        )
                        rest_pending, rest = pending[len(batch.span) :], messages[len(batch.messages) :]
                        if force and rest:  # once this batch's files are in place: the two would contend
                            ahead.start(
                                cut_batch(
                                    session_id, session.title, rest_pending, rest, budget, session.topic_name, folder
                                )
                            )
                        if not self._one_pass(batch, progress, paths, writer, organizer):
                            break
                        if not force:
                            break
                        pending, messages = rest_pending, rest
                        tokens -= batch.tokens
        except _PassFailed as failure:
            return failure.outcome
        if progress.batches == 0:
            return NothingDue()
        pending_left = self.pending.on_head(session_id)
        return Written(
            progress.revision,
            progress.changed,
            progress.nodes,
            progress.batches,
            pending_left,
            progress.organized,
            progress.records,
            progress.sources,
        )

    def written_through(self, session_id: str) -> bool:
        """Whether the session's head is marked written for this workspace (two indexed reads: a session an
        import did not grow is passed over without walking its branches). A session whose head is written
        may still have an unwritten branch it left: the head's move wrote that one at the time."""
        session = self.store.get_session(session_id)
        if session is None or session.head is None:
            return True
        head = self.store.get_node(session_id, session.head)
        return head is not None and head.written_for(self.workspace_key)

    def pending_messages(self, session_id: str) -> int:
        """Unwritten user/assistant messages on every live branch of a session."""
        return self.pending.messages(session_id)

    def pending_since(self, session_id: str) -> datetime | None:
        """When the oldest unwritten message on any live branch was created (None: nothing pending)."""
        return self.pending.since(session_id)

    def _one_pass(
        self, batch: Batch, progress: _Progress, paths: Sequence[str], writer: Writer, organizer: Organizer
    ) -> bool:
        """Write, organize when due, install, mark ``batch``, whose sources are archived at ``paths``.
        False when nothing was installed."""
        counters = self.organize_state.load()
        due = self._organize_due(counters, batch.tokens)
        with self._charging(writer, organizer):
            result = self._transact(batch, paths, due, writer, organizer)
        if not result.changed:
            return False
        self.store.mark_written(batch.session_id, batch.span, self.workspace_key, result.revision)
        progress.revision = result.revision
        progress.changed = tuple(sorted(set(progress.changed) | set(result.changed_files)))
        progress.nodes += len(batch.span)
        progress.batches += 1
        progress.records += len(result.created_ids)
        progress.sources += result.sources_added
        if self.on_batch is not None:
            self.on_batch(batch, result)
        progress.organized = progress.organized or due
        if due:
            self.organize_state.save(OrganizeCounters(0, 0, counters.last_global, result.revision))
        else:
            self.organize_state.save(
                OrganizeCounters(
                    counters.batches_since + 1,
                    counters.tokens_since + batch.tokens,
                    counters.last_global,
                    counters.tree,
                )
            )
        if not result.git_committed:
            raise _PassFailed(Pending(ReasonCode.GIT_COMMIT_FAILED, result.message, nodes_written=progress.nodes))
        return True

    def _organize_due(self, counters: OrganizeCounters, tokens: int) -> bool:
        s = self.settings
        return (
            counters.batches_since + 1 >= s.organize_batches
            or counters.tokens_since + tokens >= s.organize_tokens
            or self.clock() - counters.last_global >= s.organize_interval_s
        )

    def _transact(
        self, batch: Batch, paths: Sequence[str], organize: bool, writer: Writer, organizer: Organizer
    ) -> TxnResult:
        repair: Repair | None = None
        in_staging = bool(getattr(writer, "works_in_staging", False))
        for attempt in (1, 2):

            def edit(stage: Staging, repair: Repair | None = repair) -> None:
                writer.write(batch, stage, repair)
                if organize:
                    self._organize(stage, organizer)

            try:
                # Each attempt stages afresh from the installed tree: the repair's baseline is fresh.
                return self.workspace.write_pass(
                    edit,
                    message=f"Write {len(batch.messages)} message(s) of session {batch.session_id}",
                    appended_sources=paths,
                    # Writers that work through the topic API get the batch text, not files; a writer
                    # that works in the staging folder itself (an agent CLI) gets every topic as a
                    # real file and read-only copies of the batch's sources.
                    staging=REAL_TREE if in_staging else TOPIC_API,
                    pre_install=self._pre_install,
                )
            except REPAIRABLE as exc:
                log.info("write.rejected", attempt=attempt, reason=str(exc.reason), message=exc.message)
                if attempt == 2:
                    raise _PassFailed(
                        Failed(
                            ReasonCode.COMMIT_REJECTED,
                            f"rejected twice; last: {exc.reason}: {exc.message}",
                            pending_nodes=len(batch.messages),
                        )
                    ) from exc
                repair = Repair.from_error(exc)
            except ScriptoriumError as exc:
                raise _PassFailed(outcome_of_error(exc)) from exc
            except Exception as exc:  # unclassified: not retryable (an unknown failure is never retried blind)
                log.exception("write.unclassified_error")
                raise _PassFailed(Failed(ReasonCode.UNCLASSIFIED_ERROR, f"{type(exc).__name__}: {exc}")) from exc
        raise AssertionError("unreachable")

    # -- the budget ----------------------------------------------------------------

    def _within_budget(self) -> tuple[Writer, Organizer]:
        """The writer and organizer of the next run: ours while today's budget lasts (or when they cost
        nothing); past it the fallback the user chose (the verbatim writer), else BudgetSpent."""
        if not _meters(self.writer, self.organizer):
            return self.writer, self.organizer
        try:
            self.budget.check()
        except BudgetSpent as exc:
            fallback = self.settings.over_budget
            if fallback is None:
                raise
            log.info("write.over_budget", writer=self.writer.name, fallback=fallback[0].name, message=exc.message)
            self._ran_name = f"{fallback[0].name} (over {self.writer.name}'s budget)"
            return fallback
        return self.writer, self.organizer

    def _budgeted(self, progress: _Progress) -> tuple[Writer, Organizer]:
        """:meth:`_within_budget` in a pass: a refusal ends it, with what it wrote before."""
        try:
            return self._within_budget()
        except ScriptoriumError as exc:
            raise _PassFailed(replace(_refusal(exc), nodes_written=progress.nodes)) from exc

    @contextmanager
    def _charging(self, writer: Writer, organizer: Organizer) -> Iterator[None]:
        """Charge today's budget what the costly runs inside spent (a failed run's too)."""
        meters = _meters(writer, organizer)
        before = [(usage.runs, usage.tokens) for usage in meters]
        try:
            yield
        finally:
            runs = sum(usage.runs - was for usage, (was, _) in zip(meters, before, strict=True))
            tokens = sum(usage.tokens - was for usage, (_, was) in zip(meters, before, strict=True))
            if runs or tokens:
                try:
                    self.budget.charge(runs, tokens)
                except (ScriptoriumError, OSError) as exc:  # the pass's own outcome stands (it may have installed)
                    log.warning("write.budget_not_charged", runs=runs, tokens=tokens, error=str(exc))

    # -- history -----------------------------------------------------------------

    def _record(self, op: str, session_id: str | None, force: bool, outcome: Outcome, started: float) -> None:
        ms = round((time.perf_counter() - started) * 1000, 2)
        name = self.writer.name if self._ran_name is None else self._ran_name
        self._ran_name = None
        entry = pass_entry(op, session_id, force, outcome, ms, name)
        self.history.append(entry)
        log.info("write.outcome", **{k: v for k, v in entry.items() if k != "at"})


def _meters(*parts: object) -> list[Usage]:
    """The distinct usage accounts of ``parts`` (a writer and its organizer may share one); none: they cost
    nothing (the verbatim writer, the offline organizer)."""
    found: list[Usage] = []
    for part in parts:
        usage = getattr(part, "usage", None)
        if isinstance(usage, Usage) and not any(usage is seen for seen in found):
            found.append(usage)
    return found


def _refusal(exc: ScriptoriumError) -> Pending | Failed:
    """:func:`outcome_of_error`, its message carrying the guidance of a refusal that has one (a spent budget:
    when it starts again, which setting raises it)."""
    outcome = outcome_of_error(exc)
    return replace(outcome, message=f"{exc.message}. {exc.guidance}") if exc.guidance else outcome
