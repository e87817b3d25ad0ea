"""Archiving the next batch while the current one is written.

A forced write of a long conversation runs pass after pass, and each pass
first archives its batch: one fsync per message, time spent waiting on the
disk. :class:`ArchiveAhead` prepares the next batch's files (written aside
and fsynced, not yet in place: :meth:`MemoryWorkspace.prepare_sources`) in a
background thread while the writer, the validation and the install of the
current batch run, so a long import costs about what archiving costs.

Nothing changes in what a pass guarantees: a batch's sources are put in place
at the start of its own pass, before its writer runs, and a batch that never
gets its pass leaves nothing behind (its prepared files are removed).
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

from scriptorium.logs import get_logger
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.sources import PreparedSources
from scriptorium.writer_interface import Batch

log = get_logger(__name__)


class ArchiveAhead:
    """At most one batch prepared ahead; used as a context manager around a forced write's passes."""

    def __init__(self, workspace: MemoryWorkspace) -> None:
        self.workspace = workspace
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: tuple[tuple[str, ...], Future[PreparedSources]] | None = None

    def start(self, batch: Batch) -> None:
        """Begin preparing ``batch``'s sources (the batch the next pass will take)."""
        self._drop()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scriptorium-archive")
        future = self._pool.submit(self.workspace.prepare_sources, [m.source for m in batch.messages])
        self._ahead = (batch.span, future)

    def take(self, batch: Batch) -> PreparedSources | None:
        """The files prepared for ``batch``, or None (none were, or preparing failed: the pass archives
        them itself, and meets the failure there with its reason code)."""
        if self._ahead is None or self._ahead[0] != batch.span:
            self._drop()
            return None
        future = self._ahead[1]
        self._ahead = None
        try:
            return future.result()
        except Exception as exc:  # the pass archives inline and reports what it meets
            log.info("write.archive_ahead_failed", error=str(exc))
            return None

    def _drop(self) -> None:
        if self._ahead is not None:
            future = self._ahead[1]
            self._ahead = None
            with contextlib.suppress(Exception):  # preparing failed: nothing was left to remove
                future.result().discard()

    def __enter__(self) -> ArchiveAhead:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._drop()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
