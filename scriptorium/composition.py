"""Composition root helpers: build the core objects an entry point needs from :class:`Settings`."""

from __future__ import annotations

from dataclasses import dataclass

from scriptorium.provider import MemoryProvider, NoMemory, ScriptoriumMemory
from scriptorium.sessions import SessionStore
from scriptorium.settings import Settings
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writer_interface import Organizer, Writer
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.service import WriteService


@dataclass(slots=True)
class Runtime:
    """The objects one process uses; close them with :meth:`close`."""

    workspace: MemoryWorkspace
    store: SessionStore
    service: WriteService

    def close(self) -> None:
        self.store.close()
        self.workspace.close()


def build_provider(settings: Settings, runtime: Runtime | None) -> MemoryProvider:
    """The memory interface this configuration selects: ``NoMemory`` when memory.backend=none."""
    if settings.backend == "none" or runtime is None:
        return NoMemory()
    return ScriptoriumMemory(runtime.service, core_inject=settings.core_inject, search_mode=settings.search_mode)


def make_writer(settings: Settings) -> tuple[Writer, Organizer]:
    backend = settings.writer_backend()
    if backend == "llm":
        from scriptorium.writers.llm import LLMOrganizer, LLMWriter

        source = settings.llm_config_source()
        return LLMWriter(source), LLMOrganizer(source)
    if backend in ("claude-code", "codex"):
        from scriptorium.writers.agent import agent_writer

        return agent_writer(backend, settings.agent_config_source())
    return VerbatimWriter(), OfflineOrganizer()


def build_runtime(settings: Settings, create: bool = True) -> Runtime:
    """Open (or create) the workspace and the session store and wire the write service."""
    workspace_config = settings.workspace_config()
    workspace = (
        MemoryWorkspace.init(settings.memory_dir, workspace_config)
        if create
        else MemoryWorkspace(settings.memory_dir, workspace_config)
    )
    store = settings.session_store()
    writer, organizer = make_writer(settings)
    service = WriteService(workspace, store, writer, organizer, settings.write_settings())
    return Runtime(workspace, store, service)
