"""An import costs what the transcripts gained: importing a folder again, with nothing new in it, runs no
write pass for the sessions it had written (it ran one per session of the folder every time, each listing
every stored session: a month's import grew with everything imported before)."""

from __future__ import annotations

from pathlib import Path

from scriptorium.workspace.writer_history import WriterHistory
from tests.helpers.ingest import ingest, transcript


def passes(state: Path) -> int:
    return sum(1 for entry in WriterHistory(state / "memory" / ".scriptorium").recent(10_000) if entry["op"] == "write")


def test_importing_a_folder_again_writes_only_what_grew(tmp_path: Path) -> None:
    folder = tmp_path / "projects"
    folder.mkdir()
    for n in range(4):
        transcript(folder, f"s{n}", 4)
    state = tmp_path / "state"
    first = ingest(state, folder)
    assert first["records"] and first["failed"] == 0
    after_first = passes(state)
    assert after_first >= 4
    again = ingest(state, folder)
    assert again["new_nodes"] == 0 and again["records"] == 0
    assert passes(state) == after_first, "nothing grew: no pass ran"
    transcript(folder, "s2", 6)  # one conversation goes on
    grown = ingest(state, folder)
    assert grown["new_nodes"] == 2 and grown["records"] == 2
    assert passes(state) == after_first + 1, "one session grew: one pass"
