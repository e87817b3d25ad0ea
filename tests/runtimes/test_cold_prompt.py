"""No recall lost to a cold start: the first prompt after the hook daemon exited is answered by a process
that has not loaded the recall index; its budget covers that load (which grows with the memory), and the
writes that ran while nobody searched leave the index's disk cache current, so the load is all it costs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scriptorium.recall import state as recall_state
from scriptorium.recall.index import RecallIndex
from scriptorium.runtimes.hooks.context import HookContext
from scriptorium.settings import Settings
from scriptorium.workspace.epoch import epoch_file
from tests.conftest import trusted_and_pending_world
from tests.helpers.ingest import ingest, transcript

LOAD_S = 0.6
"""How long the stand-in for a year's disk cache takes to load: well past the warm budget below."""


@pytest.fixture
def fresh_process() -> Iterator[None]:
    """This process as a new one: no index of any workspace loaded."""
    RecallIndex._open.clear()
    yield
    RecallIndex._open.clear()


def _memory(state: Path) -> None:
    trusted_and_pending_world(state / "memory")
    RecallIndex(state / "memory").refresh()  # the disk cache a daemon left behind


def _slow_load(monkeypatch: pytest.MonkeyPatch) -> None:
    load = recall_state.Refresher.load

    def slow(self: recall_state.Refresher) -> recall_state.IndexState:
        time.sleep(LOAD_S)
        return load(self)

    monkeypatch.setattr(recall_state.Refresher, "load", slow)


@pytest.fixture
def slow_cold_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_process: None) -> None:
    """Memory whose index's disk cache this (new) process takes ``LOAD_S`` to load."""
    _memory(tmp_path)
    _slow_load(monkeypatch)


@pytest.mark.usefixtures("slow_cold_memory")
def test_the_first_prompt_of_a_cold_process_gets_its_recall_though_the_load_outlasts_the_warm_budget(
    tmp_path: Path,
) -> None:
    settings = Settings(state=tmp_path, hook_search_budget_ms=LOAD_S * 1000 / 4)
    context = HookContext(settings, None, None)
    assert not RecallIndex.loaded(settings.memory_dir)
    answer = context.recall("when do releases ship?")
    assert "Releases ship on Thursdays" in answer
    assert RecallIndex.loaded(settings.memory_dir)


@pytest.mark.usefixtures("slow_cold_memory")
def test_a_cold_budget_smaller_than_the_load_still_gives_up_on_time(tmp_path: Path) -> None:
    """The cold budget is a budget: past it the prompt goes on without recall (and does not wait the load)."""
    settings = Settings(
        state=tmp_path, hook_search_budget_ms=LOAD_S * 1000 / 8, hook_cold_search_budget_ms=LOAD_S * 1000 / 4
    )
    started = time.monotonic()
    assert HookContext(settings, None, None).recall("when do releases ship?") == ""
    assert time.monotonic() - started < LOAD_S


def test_an_import_leaves_the_recall_cache_current_for_the_next_process(tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    transcript(folder, "s-cold", 6)
    state = tmp_path / "state"
    assert ingest(state, folder)["records"]
    index = RecallIndex(state / "memory")  # a new process's index: the disk cache is all it has
    stats = index.refresh()
    assert not stats.checked, "the cache's gate is not the installed state's: the next prompt parses again"
    assert index.search("release checklist item")


@pytest.mark.usefixtures("fresh_process")
def test_after_a_forget_in_another_process_the_next_prompt_is_cold_too(tmp_path: Path) -> None:
    """A forget elsewhere makes this process's next search build the index afresh from the topics: the
    prompt that pays for it has the cold budget."""
    _memory(tmp_path)
    settings = Settings(state=tmp_path)
    assert "Releases ship on Thursdays" in HookContext(settings, None, None).recall("when do releases ship?")
    assert RecallIndex.loaded(settings.memory_dir)
    epoch_file(settings.memory_dir).write_text("a forget in another process")  # what its bump leaves
    assert not RecallIndex.loaded(settings.memory_dir)


def test_a_sessions_opening_asks_the_store_for_its_projects_sessions_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The opening's project block reads the sessions of the asking session's project, picked by the store
    (``sessions_under``), never every session stored (a year's SessionStart grew with them)."""
    asked: list[str] = []

    class Store:
        def sessions_under(self, folder: str) -> dict[str, str]:
            asked.append(folder)
            return {}

        def list_sessions(self, *args: object) -> list[object]:
            raise AssertionError("every session read")

        def close(self) -> None:
            pass

    project = tmp_path / "work" / "atlas"
    (project / ".git").mkdir(parents=True)
    (project / "web").mkdir()
    settings = Settings(state=tmp_path / "state")
    monkeypatch.setattr(Settings, "session_store", lambda self: Store())
    context = HookContext(settings, None, None)
    assert context.project_context({"cwd": str(project / "web"), "session_id": "s-new"}, 5000) == ""
    assert asked == [str(project)], "the project's root, found from the session's folder"
