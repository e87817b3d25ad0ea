"""Atomic install of a validated tree, and recovery after a crash at any step.

The install is a redo log:

1. every new file is written and fsynced under ``.scriptorium/txn/<id>/``;
2. ``.scriptorium/journal.json`` is written atomically — the commit point;
3. files are renamed into place and deletions applied, folders fsynced;
4. ``refs/heads/main`` moves by compare-and-swap; ``state.json`` records the
   installed tree (and the commit, or null when git failed);
5. the journal and the txn folder are removed.

A crash before (2) leaves the old tree (the txn folder is discarded on the
next open). A crash after (2) is rolled forward on the next open. Either
way the next open sees exactly the old or the new tree, and git HEAD's tree
is made equal to the installed tree.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from scriptorium.errors import GitCommitFailed
from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write, fsync_dir, sync_filesystem, write_file_synced
from scriptorium.workspace.gitstore import GitStore
from scriptorium.workspace.paths import RUNTIME_DIR, SOURCES, STATE
from scriptorium.workspace.sources import SOURCE_FILE_MODE

JOURNAL = "journal.json"
STATE_VERSION = 1
"""``state.json``'s layout (:mod:`scriptorium.formats`: a newer one is refused, not misread)."""
JOURNAL_VERSION = 1
"""``journal.json``'s layout: an install a newer release journaled is not finished as if it were this one's."""
TXN_DIR = "txn"


def _no_crash(step: str) -> None:
    """Fault-injection seam: crash tests replace this to kill the process at ``step``."""


crash_point: Callable[[str], None] = _no_crash


@dataclass(frozen=True, slots=True)
class InstallState:
    """What is installed: the tree, and the commit recording it (None if git failed)."""

    tree: str
    commit: str | None


class Installer:
    """Moves validated trees into the live workspace and keeps git in step."""

    def __init__(self, root: Path, git: GitStore) -> None:
        self.root = root
        self.git = git
        self.runtime = root / RUNTIME_DIR

    # -- state -------------------------------------------------------------------

    def read_state(self) -> InstallState | None:
        path = self.runtime / STATE
        try:
            data = read_versioned(json.loads(path.read_text()), STATE_VERSION, str(path))
        except FileNotFoundError:
            return None
        return InstallState(tree=data["tree"], commit=data.get("commit"))

    def write_state(self, state: InstallState) -> None:
        payload = json.dumps(versioned({"tree": state.tree, "commit": state.commit}, STATE_VERSION), sort_keys=True)
        atomic_write(self.runtime / STATE, payload.encode())

    # -- install -----------------------------------------------------------------

    def install(self, files: Mapping[str, bytes | None], tree: str, commit: str, parent: str | None) -> InstallState:
        """Install ``files`` (None deletes) as ``tree`` and move main to ``commit``.

        Returns the new state; its ``commit`` is None when git refused the ref
        update after the files were installed (memory committed, git not).
        """
        txn_id = uuid.uuid4().hex
        txn = self.runtime / TXN_DIR / txn_id
        txn.mkdir(parents=True)
        ops: list[list[object]] = []
        staged: list[Path] = []
        for index, (path, data) in enumerate(sorted(files.items())):
            if data is None:
                ops.append([path, None])
                continue
            # Sources stay read-only once installed (a promotion or a forget rewrites one).
            mode = SOURCE_FILE_MODE if path.startswith(f"{SOURCES}/") else 0o600
            write_file_synced(txn / str(index), data, mode=mode, sync=False)
            staged.append(txn / str(index))
            ops.append([path, str(index)])
        # One barrier for every staged file (a forget stages a tombstone per source): durable before the
        # journal names them.
        sync_filesystem(txn, staged)
        fsync_dir(txn)
        crash_point("staged-files-written")
        journal = versioned(
            {"txn": txn_id, "tree": tree, "commit": commit, "parent": parent, "ops": ops}, JOURNAL_VERSION
        )
        atomic_write(self.runtime / JOURNAL, json.dumps(journal).encode())
        crash_point("journal-written")
        return self._finish(journal)

    def _finish(self, journal: Mapping[str, object]) -> InstallState:
        txn = self.runtime / TXN_DIR / str(journal["txn"])
        folders: set[Path] = set()
        ops = journal["ops"]
        assert isinstance(ops, list)
        for number, (path, name) in enumerate(ops):
            target = self.root / path
            if name is None:
                if target.exists():
                    target.unlink()
                    folders.add(target.parent)
                    self._prune_empty_parents(target.parent, folders)
            else:
                staged = txn / str(name)
                if staged.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(staged, target)
                    folders.add(target.parent)
            crash_point(f"applied-{number}")
        for folder in folders:
            if folder.exists():
                fsync_dir(folder)
        crash_point("files-installed")
        commit = str(journal["commit"])
        parent = journal["parent"]
        state = InstallState(tree=str(journal["tree"]), commit=commit)
        head = self.git.head()
        if head != commit:
            try:
                self.git.update_ref(commit, parent if isinstance(parent, str) else None)
            except GitCommitFailed:
                state = InstallState(tree=state.tree, commit=None)
        crash_point("ref-updated")
        self.write_state(state)
        crash_point("state-written")
        (self.runtime / JOURNAL).unlink()
        shutil.rmtree(txn, ignore_errors=True)
        crash_point("journal-removed")
        return state

    def _prune_empty_parents(self, folder: Path, folders: set[Path]) -> None:
        # Top-level folders (topics/, timeline/, sources/) stay even when empty.
        while folder.parent != self.root and folder != self.root and folder.exists() and not any(folder.iterdir()):
            folder.rmdir()
            folders.discard(folder)
            folder = folder.parent
            folders.add(folder)

    # -- recovery ----------------------------------------------------------------

    def recover(self) -> bool:
        """Finish or discard an interrupted install; True if anything was done.

        Call under the workspace lock, before reading the baseline.
        """
        did = bool(self.git.remove_stale_locks())
        journal_path = self.runtime / JOURNAL
        if journal_path.exists():
            self._finish(read_versioned(json.loads(journal_path.read_text()), JOURNAL_VERSION, str(journal_path)))
            did = True
        txn_root = self.runtime / TXN_DIR
        if txn_root.exists() and any(txn_root.iterdir()):
            shutil.rmtree(txn_root)
            did = True
        return self.reconcile_git() or did

    def reconcile_git(self) -> bool:
        """Make git HEAD's tree equal the installed tree, committing it if needed."""
        state = self.read_state()
        if state is None:
            return False
        head = self.git.head()
        if state.commit is not None and state.commit == head:
            return False
        if head is not None and self.git.commit_tree(head) == state.tree:
            self.write_state(InstallState(state.tree, head))
            return True
        commit = self.git.write_commit(state.tree, head, "Record the installed tree after an interrupted commit")
        self.git.sync_objects()
        try:
            self.git.update_ref(commit, head)
        except GitCommitFailed:
            return False
        self.write_state(InstallState(state.tree, commit))
        return True
