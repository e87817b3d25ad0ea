"""A reference agent-runtime loop that calls every memory method at its lifecycle point.

Unlike the specification's runtime, no method of the interface is left without
a caller:

==========================  ==============================================
selection                   ``name`` / ``is_available`` over the configured backends
session start               ``initialize``, ``system_prompt``
before each turn            ``search`` (within a time budget)
end of each turn            ``write(force=False)`` — or, in cluster mode, a published ``turn.ended``
context compaction          ``extract_before_discard``
idle                        ``write(force=True)``
after the final turn        ``shutdown``
nightly                     ``reorganize``
==========================  ==============================================

The model is any callable ``respond(system, recalled, window, user) -> reply``;
turns are stored in the session store (the source of truth the write pass
rereads). Memory failures are logged and reported in the result, and the
conversation goes on.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from scriptorium.provider import DiscardedMessage, GuardedMemory, HookFailure, MemoryProvider, select_provider
from scriptorium.redaction import Redactor, redact_nodes
from scriptorium.sessions import Node, NodeKind, SessionStore
from scriptorium.writing.outcomes import Outcome

log = structlog.get_logger(__name__)

Respond = Callable[[str, str, Sequence[str], str], str]
"""(system prompt, recalled memory, context window, user message) → assistant reply."""


@dataclass(slots=True)
class ConversationResult:
    """What happened in one conversation, memory included."""

    session_id: str
    backend: str
    replies: list[str] = field(default_factory=list)
    recalled: list[str] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    summaries: list[list[str]] = field(default_factory=list)
    search_timeouts: int = 0
    memory_failures: list[HookFailure] = field(default_factory=list)


class ReferenceRuntime:
    """Drives conversations through the memory interface."""

    def __init__(
        self,
        backends: Sequence[MemoryProvider],
        store: SessionStore,
        respond: Respond,
        *,
        window: int = 8,
        keep_after_compaction: int = 4,
        search_budget_s: float = 0.25,
        announce_turn: Callable[[str], object] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.memory = GuardedMemory(select_provider(backends))
        self.store = store
        self.redactor = redactor
        """What takes secrets out of each turn before it is stored (``Settings.redactor()``; None: verbatim)."""
        self.respond = respond
        self.window = window
        self.keep = keep_after_compaction
        self.search_budget_s = search_budget_s
        self.announce_turn = announce_turn
        """Cluster mode: publish ``turn.ended`` for the session instead of writing in-process."""
        self._searches = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-search")

    def _recall(self, query: str, result: ConversationResult) -> str:
        """Search before the turn; a search over its budget is skipped for this turn, not awaited."""
        future = self._searches.submit(self.memory.search, query)
        try:
            return future.result(timeout=self.search_budget_s)
        except FutureTimeout:
            result.search_timeouts += 1
            log.warning("memory.search_over_budget", budget_s=self.search_budget_s)
            return ""

    def converse(self, user_messages: Sequence[str], session_id: str | None = None) -> ConversationResult:
        """One conversation, from session start to idleness and shutdown."""
        session_id = session_id or f"conv-{uuid.uuid4().hex[:12]}"
        memory = self.memory
        result = ConversationResult(session_id, memory.name())
        memory.failures = []
        if self.store.get_session(session_id) is None:
            self.store.create_session(session_id, {"provider": "reference-runtime"})
        memory.initialize(session_id)
        system = memory.system_prompt()
        window: list[tuple[str, str, str]] = []  # (node_id, role, text)
        parent = None
        for number, user in enumerate(user_messages):
            recalled = self._recall(user, result)
            result.recalled.append(recalled)
            reply = self.respond(system, recalled, [f"{r}: {t}" for _n, r, t in window], user)
            result.replies.append(reply)
            nodes = []
            for role, text in ((NodeKind.USER, user), (NodeKind.ASSISTANT, reply)):
                node_id = f"{session_id}-{number}-{role}"
                nodes.append(Node(node_id, session_id, parent, str(role), role, text, datetime.now(UTC)))
                window.append((node_id, str(role), text))
                parent = node_id
            self.store.add_nodes(redact_nodes(nodes, self.redactor), head=parent, updated_at=datetime.now(UTC))
            if self.announce_turn is not None:
                self.announce_turn(session_id)
            else:
                result.outcomes.append(memory.write(session_id, force=False))
            if len(window) > self.window:
                dropped, window = window[: -self.keep], window[-self.keep :]
                keep = memory.extract_before_discard([DiscardedMessage(r, t, n) for n, r, t in dropped])
                result.summaries.append(keep)
                summary = "Summary of earlier turns:\n" + "\n".join(keep)
                window.insert(0, (f"{session_id}-summary-{number}", str(NodeKind.SYSTEM), summary))
        result.outcomes.append(memory.write(session_id, force=True))  # the session went idle
        memory.shutdown()
        result.memory_failures = list(memory.failures)
        return result

    def nightly(self) -> Outcome:
        return self.memory.reorganize()

    def close(self) -> None:
        self._searches.shutdown(wait=True)
