"""Archiving the next batch while the current one is written: the archive and git stay exactly as if
every pass had archived its own batch, and nothing a pass never ran leaves a file behind."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from scriptorium.errors import ReasonCode, ValidationRejected
from scriptorium.sessions import SessionStore, open_store
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.sources import SourceArchive
from scriptorium.writer_interface import Batch, Repair, TopicFiles
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.outcomes import Failed, Written
from scriptorium.writing.service import WriteService, WriteSettings
from tests.checks import tree_problems
from tests.conftest import State, message
from tests.sessions_fixtures import T0, chain

NODES = [f"n{i:02d}" for i in range(24)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    opened = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    opened.create_session("s1", {"provider": "test", "title": "Planning"}, created_at=T0)
    opened.add_nodes(chain("s1", NODES), head=NODES[-1])
    yield opened
    opened.close()


def temporary_files(ws: MemoryWorkspace) -> list[Path]:
    return [p for p in (ws.root / "sources").rglob("*") if p.name.endswith(".tmp")]


def archived(ws: MemoryWorkspace) -> set[str]:
    """The messages the work tree's archive holds (committed or not), by name."""
    found = (ws.archive.entries_of(p.relative_to(ws.root).as_posix()) for p in (ws.root / "sources").rglob("*.md"))
    return {key.rsplit("/", 1)[1].removesuffix(".md") for keys in found for key in keys}


class PreparingThreads:
    """Records which thread prepared each batch's sources."""

    def __init__(self, ws: MemoryWorkspace, monkeypatch: pytest.MonkeyPatch) -> None:
        self.threads: list[str] = []
        real = ws.prepare_sources

        def spy(messages: object) -> object:
            self.threads.append(threading.current_thread().name)
            return real(messages)  # type: ignore[arg-type]

        monkeypatch.setattr(ws, "prepare_sources", spy)


def test_a_long_forced_write_prepares_each_next_batch_in_the_background(
    ws: MemoryWorkspace, store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = PreparingThreads(ws, monkeypatch)
    # Every message costs about 20 tokens: a 40-token budget cuts the 24 messages into several batches.
    svc = WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(batch_tokens=40))
    outcome = svc.write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.nodes_written == len(NODES)
    assert outcome.batches > 3
    # Every batch after the first was prepared ahead, in the archive thread.
    assert len(spy.threads) == outcome.batches - 1
    assert all(name.startswith("scriptorium-archive") for name in spy.threads)
    assert archived(ws) == set(NODES)
    assert temporary_files(ws) == []
    assert tree_problems(ws.root) == []
    git = subprocess.run(
        ["git", f"--git-dir={ws.root / '.git'}", "fsck", "--strict", "--full"], capture_output=True, text=True
    )
    assert git.returncode == 0, git.stderr


class FailsOnPass:
    """The verbatim writer, failing (unclassified) on pass ``n``."""

    name = "verbatim"

    def __init__(self, n: int) -> None:
        self.n, self.calls, self.inner = n, 0, VerbatimWriter()

    def write(self, batch: Batch, topics: TopicFiles, repair: Repair | None = None) -> None:
        self.calls += 1
        if self.calls == self.n:
            raise RuntimeError("the writer fell over")
        self.inner.write(batch, topics, repair)


def test_a_pass_that_fails_leaves_the_batch_prepared_after_it_nowhere(ws: MemoryWorkspace, store: SessionStore) -> None:
    svc = WriteService(ws, store, FailsOnPass(2), OfflineOrganizer(), WriteSettings(batch_tokens=40))  # type: ignore[arg-type]
    outcome = svc.write("s1", force=True)
    assert isinstance(outcome, Failed)
    assert temporary_files(ws) == []
    # The first batch is written; the second was archived at the start of its pass (before its writer ran,
    # as always); the third, prepared while the second was written, never got a pass and left no file.
    written = {n.id for n in store.get_branch("s1") if n.written_for(ws.key)}
    assert written and written < set(NODES)
    assert written < archived(ws) < set(NODES)
    assert tree_problems(ws.root) == []


def test_committing_over_a_source_archived_meanwhile_with_other_bytes_changes_nothing(
    ws: MemoryWorkspace,
) -> None:
    archive = SourceArchive(ws.root)
    prepared = archive.prepare([message(1), message(2)])
    assert len(temporary_files(ws)) == 2
    # Another writer archives message 2 with other text between prepare and commit.
    other = archive.prepare([message(2, text="a different message 2")])
    archive.commit(other)
    before = State(ws)  # what must hold after the refused commit: the same, its temporary files gone
    before.files = {path: data for path, data in before.files.items() if not path.endswith(".tmp")}
    with pytest.raises(ValidationRejected) as raised:
        archive.commit(prepared)
    assert raised.value.reason is ReasonCode.INVALID_SOURCE
    assert "already archived with different content" in raised.value.message
    before.assert_unchanged(ws)
    assert not (ws.root / message(1).path).exists()  # checked before anything moved
    assert temporary_files(ws) == []


def test_one_message_twice_in_a_batch_is_one_file_and_twice_with_other_bytes_is_refused(
    ws: MemoryWorkspace,
) -> None:
    archive = SourceArchive(ws.root)
    assert archive.archive([message(3), message(3)]) == [message(3).path] * 2
    before = State(ws)
    with pytest.raises(ValidationRejected) as raised:
        archive.archive([message(4), replace(message(4), text="something else")])
    assert raised.value.reason is ReasonCode.INVALID_SOURCE
    before.assert_unchanged(ws)
    assert not (ws.root / message(4).path).exists()
    assert temporary_files(ws) == []
