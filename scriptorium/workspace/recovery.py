"""Recovery at every open: finish or roll back what a killed process left half done.

Recovery also removes the temporary source files an archive preparation killed before its install left
beside the sources (:func:`scriptorium.workspace.sources.remove_abandoned`): they would hold a message's
text outside the archive, past any ``forget``; and what a writer killed while writing a pack left
(:meth:`~scriptorium.workspace.gitstore.GitStore.remove_abandoned_packs`).

Two operations can be interrupted between their commit point and their end: an install (its redo
journal, :mod:`scriptorium.workspace.install`) and a history purge (its journal names the old and the new
head, :mod:`scriptorium.workspace.purge`). Both are finished or rolled back here, under the workspace lock,
before anything reads the installed tree.
"""

from __future__ import annotations

import json
from pathlib import Path

from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.logs import get_logger
from scriptorium.workspace import install as install_steps
from scriptorium.workspace import packing
from scriptorium.workspace.gitstore import GitStore
from scriptorium.workspace.install import Installer
from scriptorium.workspace.paths import RUNTIME_DIR
from scriptorium.workspace.sources import remove_abandoned

log = get_logger(__name__)
PURGE_JOURNAL = "purge.json"
PURGE_JOURNAL_VERSION = 1
"""``purge.json``'s layout (:mod:`scriptorium.formats`)."""


def recover(root: Path, git: GitStore, installer: Installer) -> bool:
    """Finish or discard an interrupted install, then an interrupted purge; True when either was found."""
    recovered = False
    if installer.recover():
        log.warning("workspace.recovered", workspace=str(root))
        recovered = True
    if _recover_purge(root, git, installer):
        recovered = True
    if (removed := remove_abandoned(root)) > 0:
        log.warning("workspace.archive_leftovers_removed", workspace=str(root), files=removed)
    if (removed := git.remove_abandoned_packs()) > 0:
        log.warning("workspace.pack_leftovers_removed", workspace=str(root), files=removed)
    return recovered


def begin_purge(root: Path, old_head: str, new_head: str) -> None:
    """The purge's commit point: a journal naming the head ``main`` moves from and to."""
    entry = versioned({"old": old_head, "new": new_head}, PURGE_JOURNAL_VERSION)
    atomic_write(root / RUNTIME_DIR / PURGE_JOURNAL, json.dumps(entry).encode())


def finish_purge(root: Path, git: GitStore, installer: Installer, new_head: str) -> None:
    """``main`` is at the purged head: the state names it, reflogs and unreachable objects go."""
    state = installer.read_state()
    if state is not None and state.commit != new_head:
        installer.write_state(type(state)(tree=state.tree, commit=new_head))
    install_steps.crash_point("purge-state-written")
    git.repo.git.reflog("expire", "--expire=now", "--all")
    with packing.holding_lock(git.git_dir):  # a background repack ends first; none starts meanwhile
        git.repo.git.gc("--prune=now", "--quiet")
    git.drop_caches()
    install_steps.crash_point("purge-pruned")
    (root / RUNTIME_DIR / PURGE_JOURNAL).unlink(missing_ok=True)


def _recover_purge(root: Path, git: GitStore, installer: Installer) -> bool:
    """Finish or roll back an interrupted purge (called under the workspace lock); True when there was one."""
    journal = root / RUNTIME_DIR / PURGE_JOURNAL
    try:
        entry = read_versioned(json.loads(journal.read_text()), PURGE_JOURNAL_VERSION, str(journal))
    except FileNotFoundError:
        return False
    head = git.head()
    if head == entry["new"]:
        finish_purge(root, git, installer, entry["new"])
        log.warning("purge.finished", head=head)
    else:  # main never moved: the rewritten objects are unreachable, the next gc prunes them
        journal.unlink()
        log.warning("purge.rolled_back", head=head)
    return True
