"""The installer's own promises (:mod:`scriptorium.workspace.install`), each as the installer gives it: the
file modes it installs, the empty folders a delete leaves, what ``recover`` reports and what reconciling git
with the installed tree does — the mutation run of the module found each unasserted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scriptorium.errors import GitCommitFailed
from scriptorium.workspace import MemoryWorkspace, TopicChange, install
from scriptorium.workspace.install import TXN_DIR, InstallState
from scriptorium.workspace.paths import RUNTIME_DIR, STATE
from scriptorium.workspace.sources import SOURCE_FILE_MODE
from tests.conftest import message

A = "# A\n\nTea [k](test/t1/m1).\n"


def _commits(ws: MemoryWorkspace) -> int:
    return int(ws.git.repo.git.rev_list("--count", "HEAD"))


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_topics_are_installed_private_and_sources_read_only(ws: MemoryWorkspace) -> None:
    with ws.lock():
        paths = ws.archive_sources([message(1)])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes([TopicChange("topics/a.md", "create", "# A\n\nTea [k](test/t1/m1).\n")], message="a")
    assert oct(_mode(ws.root / "topics" / "a.md")) == oct(0o600)
    assert oct(_mode(ws.root / ws.archive.stored_path(paths[0]))) == oct(SOURCE_FILE_MODE)
    # A conversation file the install writes (a promotion rewrites its entry) stays read-only.
    with ws.lock():
        (pending,) = ws.archive_sources([message(2, trust="pending")])
        ws.transact(lambda stage: None, message="archive", appended_sources=[pending])
    ws.promote_source(pending)
    assert ws.archive.read(pending).trust == "trusted"
    assert oct(_mode(ws.root / ws.archive.stored_path(pending))) == oct(SOURCE_FILE_MODE)


def test_a_delete_prunes_the_folders_it_empties_up_to_the_top_level_one(seeded: MemoryWorkspace) -> None:
    ws = seeded
    deep = "topics/work/billing/jobs.md"
    ws.apply_changes([TopicChange(deep, "create", "# Jobs\n\nNightly [k](test/t1/m2).\n")], message="deep")
    notes = "# Notes\n\nKept [k](test/t1/m3).\n"
    ws.apply_changes([TopicChange("topics/work/notes.md", "create", notes)], message="notes")
    ws.apply_changes([TopicChange(deep, "delete")], message="delete deep")
    assert not (ws.root / "topics/work/billing").exists(), "the folder the delete emptied"
    assert (ws.root / "topics/work/notes.md").exists(), "a folder that still holds a file stays"
    ws.apply_changes([TopicChange("topics/work/notes.md", "delete")], message="delete notes")
    assert not (ws.root / "topics/work").exists()
    assert (ws.root / "topics").is_dir(), "a top-level folder stays even when empty"
    assert not any((ws.root / "topics").iterdir())


def test_recover_on_an_installed_workspace_does_nothing(seeded: MemoryWorkspace) -> None:
    ws = seeded
    ws.apply_changes([TopicChange("topics/a.md", "create", A)], message="a")
    state = ws.root / RUNTIME_DIR / STATE
    before = state.stat()
    assert ws.installer.recover() is False
    after = state.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), "the state was not rewritten"


def test_a_workspace_with_no_install_state_has_none_to_reconcile(ws: MemoryWorkspace) -> None:
    (ws.root / RUNTIME_DIR / STATE).unlink()
    assert ws.installer.read_state() is None
    assert ws.installer.reconcile_git() is False
    assert not (ws.root / RUNTIME_DIR / STATE).exists()


def test_recover_reports_an_interrupted_install_it_finished(
    seeded: MemoryWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = seeded

    class Interrupted(Exception):
        pass

    def crash(step: str) -> None:
        if step == "journal-written":
            raise Interrupted(step)

    monkeypatch.setattr(install, "crash_point", crash)
    with pytest.raises(Interrupted):
        ws.apply_changes([TopicChange("topics/a.md", "create", A)], message="a")
    monkeypatch.undo()
    assert not (ws.root / "topics/a.md").exists()
    assert ws.installer.recover() is True
    assert "Tea [^" in (ws.root / "topics/a.md").read_text()
    assert ws.installer.recover() is False, "nothing left"


def test_recover_reports_the_leftovers_it_removed(ws: MemoryWorkspace) -> None:
    leftover = ws.root / RUNTIME_DIR / TXN_DIR / "abandoned"
    leftover.mkdir(parents=True)
    (leftover / "0").write_bytes(b"staged")
    assert ws.installer.recover() is True
    assert not (ws.root / RUNTIME_DIR / TXN_DIR).exists()


def test_a_state_missing_its_commit_takes_heads_when_head_holds_the_tree(seeded: MemoryWorkspace) -> None:
    ws = seeded
    """The ref moved but the state was written without it: the head is recorded, no commit is made."""
    ws.apply_changes([TopicChange("topics/a.md", "create", A)], message="a")
    state = ws.installer.read_state()
    assert state is not None and state.commit is not None
    ws.installer.write_state(InstallState(state.tree, None))
    commits = _commits(ws)
    assert ws.installer.recover() is True
    assert ws.installer.read_state() == state
    assert _commits(ws) == commits


def test_a_tree_git_did_not_record_is_committed_on_recovery_and_a_refusal_changes_nothing(
    seeded: MemoryWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = seeded

    def refuse(new: str, expected_old: str | None) -> None:
        raise GitCommitFailed("refused")

    head = ws.git.head()
    monkeypatch.setattr(ws.git, "update_ref", refuse)
    ws.apply_changes([TopicChange("topics/a.md", "create", A)], message="a")
    lagging = ws.installer.read_state()
    assert lagging is not None and lagging.commit is None, "installed, not committed"
    state_bytes = (ws.root / RUNTIME_DIR / STATE).read_bytes()
    assert ws.installer.reconcile_git() is False, "git refuses again"
    assert (ws.root / RUNTIME_DIR / STATE).read_bytes() == state_bytes
    assert ws.git.head() == head
    monkeypatch.undo()
    assert ws.installer.recover() is True
    state = ws.installer.read_state()
    assert state is not None and state.commit == ws.git.head() != head
    assert ws.git.commit_tree(state.commit) == lagging.tree
    assert os.path.exists(ws.root / "topics/a.md")


@pytest.mark.parametrize("order", ["below", "above"])
def test_a_head_moved_off_the_installed_commit_gets_the_installed_tree_whatever_the_ids_order(
    seeded: MemoryWorkspace, order: str
) -> None:
    """The ref was moved past the install to a commit holding another tree: reconciling commits the installed
    tree on top of it. The installed commit and the head, and their trees, are compared as names, never
    ordered: the test runs with a head whose ID and tree ID both sort below the installed ones, and with one
    whose IDs both sort above."""
    ws = seeded
    earlier = ws.git.head()
    assert earlier is not None
    below = order == "below"
    # The installed IDs hash content that holds the clock, so a head sorting below an installed commit near
    # 0000… could take thousands of tries to find. Instead the install is repeated until both installed IDs
    # sort in the half away from the head's side (a quarter of installs do: 200 tries fail once in 10^25);
    # then every head written has at least a quarter's chance of fitting, and 400 cannot miss.
    for attempt in range(200):
        ws.apply_changes([TopicChange(f"topics/a{attempt}.md", "create", A)], message=f"a{attempt}")
        state = ws.installer.read_state()
        assert state is not None and state.commit is not None
        if (state.commit >= "8") == below and (state.tree >= "8") == below:
            break
    else:
        pytest.fail("no install with both IDs in the far half in 200 tries")
    earlier_tree = ws.git.commit_tree(earlier)
    for attempt in range(400):
        tree = ws.git.build_tree(earlier_tree, {"topics/other.md": f"another tree ({attempt})\n".encode()})
        moved = ws.git.write_commit(tree, state.commit, f"moved off the install ({attempt})")
        if (moved < state.commit) == below and (tree < state.tree) == below:
            break
    else:
        pytest.fail("no head with both IDs on that side in 400 tries")
    ws.git.update_ref(moved, state.commit)
    assert ws.installer.reconcile_git() is True
    reconciled = ws.installer.read_state()
    assert reconciled is not None and reconciled.commit == ws.git.head()
    assert reconciled.tree == state.tree == ws.git.commit_tree(reconciled.commit)
    assert ws.git.commit_parent(reconciled.commit) == moved
    assert ws.installer.reconcile_git() is False, "reconciled once"
