"""The install's durability order, from the calls it makes: a SIGKILL keeps the page cache, so the crash
tests cannot see a missing fsync — this test records every fsync, syncfs and rename of one install.

The order the install promises (``scriptorium.workspace.install``): every staged file durable, and the
staging folder's entries, before the journal names them; the journal's bytes durable before it is
renamed into place, and its folder after; the staged files renamed into place only then; every folder
that gained or lost an entry durable before the journal is removed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scriptorium import fsutil
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.install import JOURNAL


def _path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    """(call, path, second path) of every fsync, syncfs, replace and unlink, in order."""
    seen: list[tuple[str, str, str]] = []
    real_fsync, real_replace, real_unlink = os.fsync, os.replace, os.unlink

    def fsync(fd: int) -> None:
        seen.append(("fsync", _path(fd), ""))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        seen.append(("replace", str(src), str(dst)))
        real_replace(src, dst)

    def unlink(path: str | os.PathLike[str], *args: object, **kwargs: object) -> None:
        seen.append(("unlink", str(path), ""))
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "unlink", unlink)
    if (real_syncfs := fsutil._syncfs()) is not None:

        def syncfs(fd: int) -> int:
            seen.append(("syncfs", _path(fd), ""))
            return int(real_syncfs(fd))

        monkeypatch.setattr(fsutil, "_syncfs", lambda: syncfs)
    return seen


BARRIERS = ["fsync per file", *(["syncfs"] if fsutil._syncfs() is not None else [])]
"""Each way the install can make staged files durable here: an fsync each (where syncfs is missing), and
Linux's one syncfs."""


@pytest.mark.parametrize("barrier", BARRIERS)
def test_an_install_makes_each_step_durable_before_the_next_depends_on_it(
    seeded: MemoryWorkspace, calls: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch, barrier: str
) -> None:
    if barrier == "fsync per file":
        monkeypatch.setattr(fsutil, "_syncfs", lambda: None)
    root = str(seeded.root.resolve())
    runtime = f"{root}/.scriptorium"
    journal = f"{runtime}/{JOURNAL}"
    calls.clear()
    seeded.apply_changes([TopicChange("topics/a/new.md", "create", "Fact [k](test/t1/m1).\n")], message="x")

    def first(predicate: object, after: int = 0) -> int:
        for index in range(after, len(calls)):
            if predicate(calls[index]):  # type: ignore[operator]
                return index
        raise AssertionError(f"no such call after {after}: {calls}")

    journal_in = first(lambda c: c[0] == "replace" and c[2] == journal)
    placed = [i for i, c in enumerate(calls) if c[0] == "replace" and c[2].startswith(f"{root}/topics/")]
    assert placed, calls
    # 1. Staged files durable, and the staging folder's entries, before the journal is written.
    staging = [i for i, c in enumerate(calls[:journal_in]) if c[1].startswith(f"{runtime}/txn/")]
    staged_files = {calls[i][1] for i in placed}  # what is renamed into place later: the staged copies
    synced_fs = any(calls[i][0] == "syncfs" for i in staging)  # one barrier for the whole file system
    synced_each = all(("fsync", path, "") in calls[:journal_in] for path in staged_files)
    assert synced_fs or synced_each, f"nothing made the staged files durable before the journal: {calls[:journal_in]}"
    assert any(calls[i][0] == "fsync" and calls[i][1].count("/") == f"{runtime}/txn/x".count("/") for i in staging), (
        "the staging folder itself is fsynced before the journal"
    )
    # 2. The journal's own bytes durable before its rename; its folder after it.
    journal_tmp = calls[journal_in][1]
    assert any(c == ("fsync", journal_tmp, "") for c in calls[:journal_in]), "the journal's bytes before its rename"
    folder_synced = first(lambda c: c == ("fsync", runtime, ""), journal_in)
    # 3. Nothing is renamed into place before the journal (and its folder) are durable.
    assert folder_synced < min(placed), "the journal's rename is durable before any file moves"
    # 4. Every folder that gained an entry is durable before the journal is removed.
    removed = first(lambda c: c[0] == "unlink" and c[1] == journal, max(placed))
    for index in placed:
        folder = str(Path(calls[index][2]).parent)
        assert any(c == ("fsync", folder, "") for c in calls[index:removed]), (folder, calls[index:removed])
