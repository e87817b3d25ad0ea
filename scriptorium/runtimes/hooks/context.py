"""What the context hooks give a session: the core and its project's newest records when it opens, the
trusted recall for each prompt — for a requester, only what it may see (:class:`HookContext`, for
:class:`scriptorium.runtimes.hooks.command.Hooks`).

The context hooks read the installed files without opening the workspace (a prompt must not wait on the
workspace lock); only a half-done install, purge or archive makes them open it first.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scriptorium.errors import WorkspaceMissing
from scriptorium.recall.places import asking_place, project_root
from scriptorium.runtimes.hooks.answer import CONTEXT_CAP, same_project, within
from scriptorium.runtimes.openings import Openings
from scriptorium.settings import Settings


class HookContext:
    """The context of one configuration's sessions, as ``audience`` may see it."""

    def __init__(self, settings: Settings, audience: str | None, openings: Openings | None) -> None:
        self.settings = settings
        self.audience = audience
        """The requester whose records the context may show, with the shared ones (None: shared only)."""
        self.openings = openings
        """Where no SessionStart hook runs (the HTTP route of ``setup --server``; a payload asking for
        ``core=first-prompt``, the ``hook`` tool's argument in Claude Code's stdio setup): the sessions whose
        context the core has opened, so that the prompt that opens one carries it (:meth:`opens`)."""

    def core(self, cwd: object = None) -> str:
        """The resident block for a session in folder ``cwd`` (when the runtime gave one): without records of
        another project (:func:`~scriptorium.recall.places.foreign_records`)."""
        from scriptorium.recall.branches import shared_view
        from scriptorium.recall.context import installed_core_if_trusted, wrap_memory_context
        from scriptorium.workspace.paths import is_workspace

        if not self.settings.core_inject:
            return ""
        memory = self.settings.memory_dir
        if not is_workspace(memory):
            from scriptorium.locations import where

            raise WorkspaceMissing(
                f"no memory at {where(self.settings.state)}",
                guidance=f"run `scriptorium setup claude-code|codex|pi|openclaw` or `scriptorium memory init --state "
                f"{self.settings.state}`",
            )
        branches = shared_view(self.settings.session_store_url)
        foreign = None
        if isinstance(cwd, str) and Path(cwd).is_absolute():
            from scriptorium.recall.places import foreign_records, place_of

            asking = functools.cache(lambda: place_of(cwd))  # read only when a core record has a place
            foreign = lambda cited: foreign_records(cited, asking, branches.places)  # noqa: E731
        text = installed_core_if_trusted(memory, branches, foreign)
        if text is None:  # a core record rests on a pending or private source, or is an option not taken
            from scriptorium.audience import viewer_for
            from scriptorium.provider import effective_core
            from scriptorium.recall.index import RecallIndex
            from scriptorium.workspace import MemoryWorkspace

            with MemoryWorkspace(self.settings.memory_dir, self.settings.workspace_config()) as workspace:
                index = RecallIndex.open(workspace.root)
                text = effective_core(workspace, index, branches, viewer_for(self.audience), foreign)
        return wrap_memory_context("core", text) if text else ""

    def opening(self, payload: Mapping[str, Any], room: int = CONTEXT_CAP, shown: str = "") -> str:
        """What a session's context opens with: the core, then the newest records of its project's earlier
        sessions within what ``room`` leaves, but for those the core or ``shown`` (the prompt's recall, on a
        prompt that opens the session) holds already."""
        core = self.core(payload.get("cwd"))
        project = self.project_context(payload, room - len(core), f"{core}\n{shown}" if shown else core)
        return "\n\n".join(filter(None, (core, project)))

    def opens(self, session: str) -> bool:
        """This prompt opens ``session``'s context where no SessionStart hook runs (``setup --server``, and
        Claude Code's stdio setup): the first of a session the store holds nothing of, or the first after a
        compaction (:mod:`scriptorium.runtimes.openings`)."""
        if self.openings is None or not session:
            return False

        def stored(session_id: str) -> bool:

            store = self.settings.session_store()
            try:
                return store.node_count(session_id) > 0
            finally:
                store.close()

        return self.openings.opens(session, stored)

    def recover_if_interrupted(self) -> None:
        """The context hooks read the installed files without opening the workspace; when a killed pass
        left an install, a purge or archive leftovers half done, they open it first, which finishes or
        rolls that back (a few stat calls otherwise)."""
        from scriptorium.workspace.paths import is_workspace, needs_recovery

        memory = self.settings.memory_dir
        if is_workspace(memory) and needs_recovery(memory):
            from scriptorium.workspace import MemoryWorkspace

            MemoryWorkspace(memory, self.settings.workspace_config()).close()

    def project_context(self, payload: Mapping[str, Any], room: int, core: str = "") -> str:
        """The newest records of earlier sessions of this session's project (the git root of its ``cwd``;
        without one, that folder exactly), within ``room`` characters: what the core leaves room for (and
        none the core shows already)."""
        from scriptorium.recall.context import format_hits, wrap_memory_context
        from scriptorium.recall.index import DEFAULT_LIMIT, RecallIndex

        cwd = payload.get("cwd")
        if not isinstance(cwd, str) or not cwd or room <= 0:
            return ""
        store = self.settings.session_store()
        try:
            folder = project_root(Path(cwd)) or Path(cwd)  # the store picks the project's sessions (one query)
            sessions = same_project(store.sessions_under(str(folder)), Path(cwd), str(payload.get("session_id") or ""))
        finally:
            store.close()
        if not sessions:
            return ""
        from scriptorium.audience import viewer_for

        found = RecallIndex.open(self.settings.memory_dir).newest_from(
            sessions, 2 * DEFAULT_LIMIT, viewer=viewer_for(self.audience)
        )
        hits = [hit for hit in found if f"^{hit.memory_id}" not in core][:DEFAULT_LIMIT]
        while hits:
            text = wrap_memory_context("project", format_hits(hits))
            if len(text) <= room:
                return text
            hits = hits[:-1]
        return ""

    def recall(self, prompt: str, session: str = "", cwd: object = None) -> str:
        """The prompt's recall within its budget, but for what the asking ``session`` holds already
        (:func:`~scriptorium.recall.prompt.prompt_recall`), scoped to the project of its folder ``cwd`` when
        the runtime gave one (:mod:`scriptorium.recall.places`)."""
        if not prompt.strip():
            return ""

        def search() -> str:
            from scriptorium.audience import viewer_for
            from scriptorium.recall.branches import shared_view
            from scriptorium.recall.index import RecallIndex
            from scriptorium.recall.prompt import prompt_recall

            view = shared_view(self.settings.session_store_url)
            asking = asking_place(cwd) if isinstance(cwd, str) and Path(cwd).is_absolute() else None  # reads .git
            return prompt_recall(
                RecallIndex.open(self.settings.memory_dir),
                prompt,
                session=session,
                mode=self.settings.search_mode,
                branches=view,
                viewer=viewer_for(self.audience),
                asking=asking,
                places=view.places,
                turn_branches=view.turn_branches,
            )

        from scriptorium.recall.index import RecallIndex

        budget_ms = self.settings.hook_search_budget_ms
        if not RecallIndex.loaded(self.settings.memory_dir):  # cold: the budget covers loading the index
            budget_ms = max(budget_ms, self.settings.hook_cold_search_budget_ms)
        return within(budget_ms / 1000, search, "recall")
