"""How replication reads a copy's ``main``: the loose ref at once, a packed one through git."""

from __future__ import annotations

import subprocess
from pathlib import Path

from scriptorium.workers.replication import _head
from scriptorium.workspace import MemoryWorkspace


def _git(memory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(memory), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_main_is_read_from_its_loose_ref_and_from_packed_refs(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    MemoryWorkspace.init(memory).close()
    commit = _git(memory, "rev-parse", "refs/heads/main")
    assert _head(memory) == commit
    _git(memory, "pack-refs", "--all")  # no loose ref left: git answers
    assert not (memory / ".git" / "refs" / "heads" / "main").exists()
    assert _head(memory) == commit
    (memory / ".git" / "refs" / "heads" / "main").write_text("not a commit\n")  # not a commit: git answers
    assert _head(memory) == ""  # as git does: it takes no such ref


def test_a_copy_without_main_has_no_head(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    _git(memory, "init", "-q")
    assert _head(memory) == ""
