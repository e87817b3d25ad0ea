"""The memory interface: nine methods between memory and an agent runtime, the one seam runtimes call.

Every method but :meth:`MemoryProvider.name` has a default, so another backend
implements only what it needs. :class:`ScriptoriumMemory` is this project's
backend; :class:`NoMemory` is ``memory.backend=none``. :class:`GuardedMemory`
is what a runtime holds: memory failures never fail the conversation, but
each one is logged and reported (``failures``), never hidden.

Recalled text is wrapped in ``<memory-context>`` exactly once, here where it
is produced; output layers must not wrap it again.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from scriptorium.audience import ANYONE, OWNER, Viewer
from scriptorium.errors import ReasonCode
from scriptorium.logs import get_logger
from scriptorium.recall.branches import BranchView
from scriptorium.recall.context import CONTEXT_TAG, ForeignLookup, format_hits, wrap_memory_context
from scriptorium.recall.index import DEFAULT_LIMIT, RecallIndex, SearchMode
from scriptorium.recall.records import BranchLookup
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.paths import CORE_SOURCE, EVERYWHERE_HEADING
from scriptorium.workspace.views import CORE_HEADER, CoreRendering
from scriptorium.writing.outcomes import Failed, NothingDue, Outcome
from scriptorium.writing.service import WriteService

__all__ = ["CONTEXT_TAG", "format_hits", "wrap_memory_context"]  # with the classes below

log = get_logger(__name__)

T = TypeVar("T")


def effective_core(
    workspace: MemoryWorkspace,
    index: RecallIndex,
    branches: BranchLookup | None = None,
    viewer: Viewer = OWNER,
    foreign: ForeignLookup | None = None,
) -> str:
    """The resident block as injected for ``viewer``: ``core.md``'s rendering without records backed by pending
    sources or citing a source ``viewer`` may not see, nor (given ``branches``) records from a branch their
    conversation left — an option not taken is no fact — nor (given ``foreign``) another project's."""
    return injected_text(effective_core_rendering(workspace, index, branches, viewer, foreign))


def effective_core_rendering(
    workspace: MemoryWorkspace,
    index: RecallIndex,
    branches: BranchLookup | None = None,
    viewer: Viewer = OWNER,
    foreign: ForeignLookup | None = None,
) -> CoreRendering:
    """The rendering :func:`effective_core` injects the text of: its ``tokens`` are the core's size as
    ``memory core`` and ``memory status`` count it (the rendered block, as the budget counts it), one number
    wherever the core's tokens are shown."""
    exclude = set(index.hidden_ids(CORE_SOURCE, viewer))
    core = workspace.snapshot().topics.get(CORE_SOURCE)
    if core is not None and core.records and (branches is not None or foreign is not None):
        cited = [core.cited_paths(record) for record in core.records]
        if branches is not None:
            statuses = branches(cited)
            exclude |= {r.memory_id for r, s in zip(core.records, statuses, strict=True) if s == "alternative"}
        if foreign is not None:  # another project's, unless the user said it is for every project
            exclude |= {
                r.memory_id
                for r, out in zip(core.records, foreign(cited), strict=True)
                if out and EVERYWHERE_HEADING not in r.headings
            }
    return workspace.core_rendering(exclude=frozenset(exclude))


def injected_text(rendering: CoreRendering) -> str:
    """What of a core rendering goes into a session: its records, without the header of the file."""
    return rendering.text.replace(CORE_HEADER, "").strip() if rendering.included_ids else ""


KEEP_CHARS = 600
"""How much of one discarded message extract_before_discard hands back."""


@dataclass(frozen=True, slots=True)
class DiscardedMessage:
    """A message the compactor is about to drop from the context window."""

    role: str
    text: str
    node_id: str | None = None

    def summary_line(self) -> str:
        """How the message goes into a compaction summary (empty when it has no text)."""
        text = self.text.strip()
        return f"{self.role}: {text[:KEEP_CHARS]}" if text else ""


class MemoryProvider(ABC):
    """The nine methods, in lifecycle order. Only :meth:`name` must be implemented."""

    @abstractmethod
    def name(self) -> str:
        """Selection: the backend's name."""

    def is_available(self) -> bool:
        """Selection: whether this backend can serve now."""
        return True

    def initialize(self, session_id: str) -> None:
        """Session start, once."""
        return None

    def system_prompt(self) -> str:
        """Session start: the resident block, already wrapped (empty when there is none)."""
        return ""

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> str:
        """Before each turn: recalled records, already wrapped (empty when nothing matches)."""
        return ""

    def write(self, session_id: str, *, force: bool = False) -> Outcome:
        """End of each turn (``force=False``) and on idleness (``force=True``)."""
        return NothingDue()

    def reorganize(self) -> Outcome:
        """Nightly, and on demand."""
        return NothingDue()

    def extract_before_discard(self, messages: Sequence[DiscardedMessage]) -> list[str]:
        """Context compaction: which of the discarded messages the summary should keep. Stores nothing."""
        return []

    def shutdown(self) -> None:
        """After the final turn."""
        return None


class NoMemory(MemoryProvider):
    """``memory.backend=none``: every method is the default; the runtime runs unchanged, without memory."""

    def name(self) -> str:
        return "none"


class ScriptoriumMemory(MemoryProvider):
    """Memory in one Scriptorium workspace, written by a :class:`WriteService` in this process."""

    def __init__(
        self,
        service: WriteService,
        *,
        core_inject: bool = True,
        search_limit: int = DEFAULT_LIMIT,
        search_mode: SearchMode = "bm25",
        viewer: Viewer = ANYONE,
    ) -> None:
        """``viewer``: whose records the runtime's context may show (default: the shared ones; a runtime
        serving one requester passes ``Viewer(name)``)."""
        self.service = service
        self.viewer = viewer
        self.workspace: MemoryWorkspace = service.workspace
        self.core_inject = core_inject
        self.search_limit = search_limit
        self.search_mode: SearchMode = search_mode
        self.index = RecallIndex.open(self.workspace.root)
        self.session_id: str | None = None

    def name(self) -> str:
        return "scriptorium"

    def is_available(self) -> bool:
        return (self.workspace.root / ".git").is_dir()

    def initialize(self, session_id: str) -> None:
        self.session_id = session_id
        self.index.refresh()  # warm: the first search of the session stays within its budget

    def system_prompt(self) -> str:
        if not self.core_inject:
            return ""
        text = effective_core(self.workspace, self.index, BranchView(self.service.store), self.viewer)
        return wrap_memory_context("core", text) if text else ""

    def search(self, query: str, limit: int | None = None) -> str:
        hits = self.index.search(  # trusted records only, that the viewer may see
            query,
            limit or self.search_limit,
            mode=self.search_mode,
            branches=BranchView(self.service.store),
            viewer=self.viewer,
        )
        return wrap_memory_context("recall", format_hits(hits)) if hits else ""

    def write(self, session_id: str, *, force: bool = False) -> Outcome:
        return self.service.write(session_id or self.session_id, force=force)

    def reorganize(self) -> Outcome:
        return self.service.reorganize()

    def extract_before_discard(self, messages: Sequence[DiscardedMessage]) -> list[str]:
        """Keep what memory does not hold yet: messages no pass has written (recall brings back the rest)."""
        keep: list[str] = []
        for message in messages:
            if message.node_id and self.session_id:
                node = self.service.store.get_node(self.session_id, message.node_id)
                if node is not None and node.written_for(self.service.workspace_key):
                    continue
            if line := message.summary_line():
                keep.append(line)
        return keep

    def shutdown(self) -> None:
        self.session_id = None


@dataclass(frozen=True, slots=True)
class HookFailure:
    """A memory hook that raised: the conversation went on, and this says so."""

    hook: str
    error: str


class GuardedMemory:
    """What a runtime holds: every hook catches, logs and reports its own failure."""

    def __init__(self, provider: MemoryProvider) -> None:
        self.provider = provider
        self.failures: list[HookFailure] = []

    def _guard(self, hook: str, call: Callable[[], T], fallback: T) -> T:
        started = time.perf_counter()
        try:
            return call()
        except Exception as exc:  # memory must never fail the conversation
            log.warning(
                "memory.hook_failed",
                backend=self.provider.name(),
                hook=hook,
                error=f"{type(exc).__name__}: {exc}",
                ms=round((time.perf_counter() - started) * 1000, 2),
            )
            self.failures.append(HookFailure(hook, f"{type(exc).__name__}: {exc}"))
            return fallback

    def name(self) -> str:
        return self.provider.name()

    def is_available(self) -> bool:
        return self._guard("is_available", self.provider.is_available, False)

    def initialize(self, session_id: str) -> None:
        self._guard("initialize", lambda: self.provider.initialize(session_id), None)

    def system_prompt(self) -> str:
        return self._guard("system_prompt", self.provider.system_prompt, "")

    def search(self, query: str, limit: int = DEFAULT_LIMIT) -> str:
        return self._guard("search", lambda: self.provider.search(query, limit), "")

    def write(self, session_id: str, *, force: bool = False) -> Outcome:
        failed: Outcome = Failed(ReasonCode.UNCLASSIFIED_ERROR, "memory write raised; see the log")
        outcome = self._guard("write", lambda: self.provider.write(session_id, force=force), failed)
        if not outcome.ok:  # a returned failure is reported too, not only a raised one
            log.info("memory.write_not_ok", backend=self.provider.name(), reason=str(outcome.reason), force=force)
        return outcome

    def reorganize(self) -> Outcome:
        failed: Outcome = Failed(ReasonCode.UNCLASSIFIED_ERROR, "memory reorganize raised; see the log")
        return self._guard("reorganize", self.provider.reorganize, failed)

    def extract_before_discard(self, messages: Sequence[DiscardedMessage]) -> list[str]:
        # If memory cannot answer, keep everything: losing context silently is worse than a long summary.
        everything = [line for m in messages if (line := m.summary_line())]
        return self._guard("extract_before_discard", lambda: self.provider.extract_before_discard(messages), everything)

    def shutdown(self) -> None:
        self._guard("shutdown", self.provider.shutdown, None)


def select_provider(candidates: Sequence[MemoryProvider]) -> MemoryProvider:
    """Selection: the first available backend by configuration order; memory off when none is."""
    for candidate in candidates:
        guarded = GuardedMemory(candidate)
        if guarded.is_available():
            log.info("memory.selected", backend=guarded.name())
            return candidate
        log.warning("memory.unavailable", backend=guarded.name())
    return NoMemory()
