"""Which prompt opens a session's context where no SessionStart hook gives the core
(:mod:`scriptorium.runtimes.openings`): once per session whichever process answers, again after a
compaction, never for a session the store holds, and the marks pruned after their time."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from pathlib import Path

from scriptorium.runtimes.openings import FOLDER, LOCK, MARK_DAYS, Openings


def never_stored(session: str) -> bool:
    return False


def test_a_session_opens_at_its_first_prompt_once_whichever_process_answers(tmp_path: Path) -> None:
    daemon, server = Openings(tmp_path), Openings(tmp_path)  # two processes' views of one state folder
    assert server.opens("s-1", never_stored) is True
    assert daemon.opens("s-1", never_stored) is False, "the other process saw the mark"
    assert server.opens("s-1", never_stored) is False
    assert daemon.opens("s-2", never_stored) is True, "a session of its own"
    assert oct((tmp_path / FOLDER).stat().st_mode & 0o777) == oct(0o700)


def test_a_session_the_store_holds_opens_without_the_core(tmp_path: Path) -> None:
    """A resumed session (or one begun before marks were kept): its context holds the core already."""
    openings = Openings(tmp_path)
    assert openings.opens("resumed", lambda session: session == "resumed") is False
    assert openings.opens("resumed", never_stored) is False, "and it stays opened"


def test_a_compaction_opens_the_session_again_once(tmp_path: Path) -> None:
    openings = Openings(tmp_path)
    assert openings.opens("s-1", never_stored) is True
    Openings(tmp_path).compacted("s-1")
    assert openings.opens("s-1", lambda session: True) is True, "the compacted context lost the core"
    assert openings.opens("s-1", never_stored) is False, "once"
    openings.opened("s-2")  # a SessionStart answer opened it
    assert openings.opens("s-2", never_stored) is False


def test_a_compacted_session_opens_once_among_racing_answerers(tmp_path: Path) -> None:
    """The hook daemon answers on threads, beside the MCP server: of the prompts racing after one
    compaction, one carries the core."""
    answerers = 8
    start = threading.Barrier(answerers)

    def answer(_: int) -> bool:
        start.wait()
        return Openings(tmp_path).opens("s-1", never_stored)

    with concurrent.futures.ThreadPoolExecutor(answerers) as pool:
        for round_ in range(40):
            Openings(tmp_path).compacted("s-1")
            opened = list(pool.map(answer, range(answerers)))
            assert opened.count(True) == 1, f"round {round_}: {opened}"


def test_marks_untouched_for_their_time_are_pruned(tmp_path: Path) -> None:
    openings = Openings(tmp_path)
    openings.opens("old", never_stored)
    stale = time.time() - MARK_DAYS * 86400 - 60
    for entry in (tmp_path / FOLDER).iterdir():  # the old mark, and the lock file
        os.utime(entry, (stale, stale))
    openings.opens("new", never_stored)
    assert openings.prune() == 1
    assert (tmp_path / FOLDER / LOCK).exists(), "another process may hold the lock: its file stays"
    assert openings.opens("new", never_stored) is False, "the fresh mark stays"
    assert openings.opens("old", lambda session: True) is False, "a pruned session is asked of the store"
    assert Openings(tmp_path / "elsewhere").prune() == 0, "no folder yet: nothing to prune"
