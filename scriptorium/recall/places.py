"""Which project a recalled record comes from, and the prompt's recall scoped to the asking session's.

A record cites archived sources, each a message of one session, and a session ran in a folder (its
``cwd``, as the runtime recorded it). A project is a git work tree (the folder holding ``.git``), or,
outside one, that very folder. For a prompt asked in a project, each hit is

* **local**: one of its sessions ran in the project;
* **foreign**: every one of its sessions ran somewhere, and none in the project;
* **placeless**: some session of it has no known folder (a chat, an import without one): it applies
  everywhere, as the user's own preferences do.

Local and placeless hits keep their rank. A foreign hit is recalled only when it matches clearly better
than the best of them (:data:`FOREIGN_MARGIN`), and then marked with its project's name: another project's
conventions never pass as this one's, and a question about that other project still finds it.

The lookup reads the folders of the hits' sessions only (:meth:`~scriptorium.recall.branches.BranchView.
folders`): the work is proportional to the hits, not to the sessions stored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from scriptorium.recall.records import Hit
from scriptorium.workspace.paths import source_identity_from_path

FOREIGN_MARGIN = 1.5
"""How much better than the best local or placeless hit another project's must score to be recalled."""

FolderLookup = Callable[[Collection[str]], Mapping[str, str | None]]
"""Session IDs → the folder each ran in (None, or absent: not known)."""


def project_root(cwd: Path) -> Path | None:
    """The git work tree ``cwd`` is in (None outside one)."""
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return None


def project_of(cwd: Path) -> Path:
    """The project a session in ``cwd`` works on: its git work tree, else that folder."""
    return project_root(cwd) or cwd


def in_project(folder: str, project: Path) -> bool:
    where = Path(folder)
    return where == project or where.is_relative_to(project)


def scoped(hits: Sequence[Hit], project: Path, folders: FolderLookup) -> list[Hit]:
    """``hits`` for a prompt asked in ``project``: local and placeless ones in their order, foreign ones only
    past :data:`FOREIGN_MARGIN` times the best of those, each then with its ``project`` named."""
    threads = [[i[1] for source in hit.sources if (i := source_identity_from_path(source))] for hit in hits]
    where = folders({thread for cited in threads for thread in cited})
    foreign: list[str | None] = []
    for cited in threads:
        ran = [where.get(thread) for thread in cited]
        known = sorted({folder for folder in ran if folder})
        if not cited or None in ran or any(in_project(folder, project) for folder in known):
            foreign.append(None)
        else:
            foreign.append(project_of(Path(known[0])).name or known[0])
    best = max((hit.score for hit, name in zip(hits, foreign, strict=True) if name is None), default=0.0)
    return [
        hit if name is None else replace(hit, project=name)
        for hit, name in zip(hits, foreign, strict=True)
        if name is None or hit.score >= FOREIGN_MARGIN * best
    ]
