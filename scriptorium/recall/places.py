"""Which project a recalled record comes from, and the prompt's recall scoped to the asking session's.

A record cites archived sources, each a message of one session, and a session ran in a folder (its
``cwd``, as the runtime recorded it). The folder's **project** is its git work tree (the folder holding
``.git``), or, outside one, that very folder; two clones of one repository are one project, known by
their remote's URL (``origin``'s, normalized: ``git@github.com:o/r.git`` and ``https://github.com/o/r``
are one). An import records it with the session (``project``, :func:`place_of`); a session imported before
that has it worked out from its folder when first asked.

For a prompt asked in a project, each hit is

* **local**: one of its sessions ran in the project;
* **foreign**: every one of its sessions ran somewhere, and none in the project;
* **placeless**: some session of it has no known folder (a chat, an import without one): it applies
  everywhere, as the user's own preferences do.

Local and placeless hits keep their rank. A foreign hit is recalled only when it matches clearly better
than the best of them (:data:`FOREIGN_MARGIN`), and then marked with its project's name: another project's
conventions never pass as this one's, and a question about that other project still finds it.

The lookup reads the places of the hits' sessions only (:meth:`~scriptorium.recall.branches.BranchView.
places`): the work is proportional to the hits, not to the sessions stored.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from scriptorium.recall.records import Hit
from scriptorium.workspace.paths import source_identity_from_path

FOREIGN_MARGIN = 1.5
"""How much better than the best local or placeless hit another project's must score to be recalled."""
PROJECT_KEY = "project"
"""Session-metadata key of the project's identity, recorded at import (:func:`place_of`)."""
BRANCH_KEY = "git_branch"
"""Session- and node-metadata key of the git branch a session (Codex) or a turn (Claude Code) was on."""
REMOTE_KEY = "git_remote"
"""Session-metadata key of the repository's remote URL where the runtime recorded it (Codex does)."""


@dataclass(frozen=True, slots=True)
class Place:
    """Where a session ran."""

    folder: str
    """Its working folder."""
    project: str
    """Its project's identity: ``git:<host>/<path>`` for a repository with a remote, else the work tree's
    (or, outside one, the folder's) absolute path."""
    name: str
    """What a label calls the project: the last part of its remote's path or of its folder."""
    root: str
    """The project's folder here: the work tree holding ``folder``, else ``folder``."""
    branch: str | None = None
    """The git branch: a stored session's as its runtime recorded it at the start (Codex's), the asking
    session's work tree's checked-out one (:func:`asking_place`)."""

    def holds(self, other: Place) -> bool:
        """Whether ``other`` ran in this place's project: the same identity, or a folder inside its work tree."""
        return other.project == self.project or in_project(other.folder, Path(self.root))


PlaceLookup = Callable[[Collection[str]], Mapping[str, Place | None]]
"""Session IDs → where each ran (None, or absent: not known)."""


def project_root(cwd: Path) -> Path | None:
    """The git work tree ``cwd`` is in (None outside one)."""
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return None


def project_of(cwd: Path) -> Path:
    """The project folder of a session in ``cwd``: its git work tree, else that folder."""
    return project_root(cwd) or cwd


def in_project(folder: str, project: Path) -> bool:
    where = Path(folder)
    return where == project or where.is_relative_to(project)


def normalized_remote(url: str) -> str | None:
    """A remote URL as one identity for every way of writing it: ``host/path`` without user, port, scheme or a
    trailing ``.git`` (``git@github.com:o/r.git`` → ``github.com/o/r``), lower-cased (the forges match owner
    and repository names whatever their case); a local path as ``file:/abs/path``. None for what is not a
    URL."""
    url = url.strip()
    if not url:
        return None
    if "://" in url:
        parts = urlsplit(url)
        host, path = (parts.hostname or "").lower(), parts.path
        if parts.scheme == "file" or not host:
            return f"file:{path.rstrip('/').removesuffix('.git')}" if path.startswith("/") else None
    elif ":" in url.split("/", 1)[0]:  # scp-like: [user@]host:path
        host, path = url.split(":", 1)
        host = host.rsplit("@", 1)[-1].lower()
    elif url.startswith("/"):
        return f"file:{url.rstrip('/').removesuffix('.git')}"
    else:
        return None
    path = path.strip("/").removesuffix(".git").rstrip("/")
    return f"{host}/{path}".lower() if host and path else None


@functools.lru_cache(maxsize=1024)
def _remote_of(root: Path) -> str | None:
    """``origin``'s URL of the repository at work tree ``root`` (else its first remote's), read with GitPython
    (a worktree's or a submodule's ``.git`` file leads to its configuration); None without one."""
    import git

    try:
        config = git.Repo(root).config_reader()
        sections = [s for s in config.sections() if s.startswith('remote "')]
    except (git.exc.GitError, OSError, ValueError):
        return None
    sections.sort(key=lambda s: s != 'remote "origin"')
    for section in sections:
        if config.has_option(section, "url"):
            return str(config.get_value(section, "url"))
    return None


def place_of(cwd: str, remote: str | None = None) -> Place:
    """The place of a session in folder ``cwd`` (``remote``: the repository URL the runtime recorded, if any):
    its project by remote when there is one (the runtime's, else the work tree's on this machine), else by
    folder."""
    folder = Path(cwd)
    root = project_root(folder) if folder.is_absolute() else None
    project = root or folder
    identity = normalized_remote(remote) if remote else None
    if identity is None and root is not None:
        found = _remote_of(root)
        identity = normalized_remote(found) if found else None
    if identity is not None:
        return Place(cwd, f"git:{identity}", identity.rsplit("/", 1)[-1] or identity, str(project))
    return Place(cwd, str(project), project.name or str(project), str(project))


def asking_place(cwd: str) -> Place:
    """The place a prompt is asked at: :func:`place_of` its folder, with the work tree's checked-out branch
    (None when HEAD is detached or there is no work tree)."""
    import git

    place = place_of(cwd)
    if not (Path(place.root) / ".git").exists():
        return place
    try:
        branch = git.Repo(place.root).active_branch.name
    except (git.exc.GitError, OSError, TypeError, ValueError):  # TypeError: a detached HEAD
        return place
    return replace(place, branch=branch)


def stored_place(metadata: Mapping[str, object]) -> Place | None:
    """A session's place from its metadata: the project its import recorded, else worked out from its folder
    now (a session imported before projects were recorded); None without a folder."""
    cwd = metadata.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        return None
    project = metadata.get(PROJECT_KEY)
    branch = metadata.get(BRANCH_KEY)
    branch = branch if isinstance(branch, str) and branch else None
    if isinstance(project, str) and project:
        name = project.rsplit("/", 1)[-1] if project.startswith("git:") else Path(project).name
        root = project if not project.startswith("git:") else str(project_of(Path(cwd)))
        return Place(cwd, project, name or project, root, branch)
    remote = metadata.get(REMOTE_KEY)
    return replace(place_of(cwd, remote if isinstance(remote, str) else None), branch=branch)


TurnBranches = Callable[[Collection[tuple[str, str]]], Mapping[tuple[str, str], str | None]]
"""(session, node) pairs → the git branch each turn was said on (None: not recorded)."""


def scoped(
    hits: Sequence[Hit], asking: Place, places: PlaceLookup, turn_branches: TurnBranches | None = None
) -> list[Hit]:
    """``hits`` for a prompt asked at ``asking``: local and placeless ones in their order, foreign ones only
    past :data:`FOREIGN_MARGIN` times the best of those, each then with its project named; a local one
    said on a branch that has not reached the asking work tree's (:func:`unmerged_branch`) with it named; one
    said on the asking (non-mainline) branch itself ahead of weaker matches from elsewhere
    (:data:`SAME_BRANCH_BOOST`)."""
    cited = [[i for source in hit.sources if (i := source_identity_from_path(source))] for hit in hits]
    where = places({thread for turns in cited for _, thread, _ in turns})
    said_on = turn_branches({(t, m) for turns in cited for _, t, m in turns}) if turn_branches else {}
    merged: dict[str, bool] = {}
    foreign: list[str | None] = []
    out_of_branch: list[str] = []
    same_branch: list[bool] = []
    for turns in cited:
        ran = [where.get(thread) for _, thread, _ in turns]
        foreign.append(_foreign_name(ran, asking))
        branches: set[str | None] = set()
        if foreign[-1] is None and any(p is not None and asking.holds(p) for p in ran):
            branches = {
                said_on.get((t, m)) or (p.branch if p else None) for (_, t, m), p in zip(turns, ran, strict=True)
            }
            out_of_branch.append(unmerged_branch(branches, asking, merged))
        else:
            out_of_branch.append("")
        same_branch.append(asking.branch is not None and asking.branch not in MAINLINE and asking.branch in branches)
    best = max((hit.score for hit, name in zip(hits, foreign, strict=True) if name is None), default=0.0)
    out: list[tuple[Hit, bool]] = []
    for hit, name, branch, same in zip(hits, foreign, out_of_branch, same_branch, strict=True):
        if name is not None and hit.score < FOREIGN_MARGIN * best:
            continue
        at = len(out)
        # A record of the asking branch moves up past the weaker records of elsewhere just above it (only
        # those: every other order, as the stages before made it, stays).
        while same and at and not out[at - 1][1] and out[at - 1][0].score < hit.score * SAME_BRANCH_BOOST:
            at -= 1
        out.insert(at, (replace(hit, project=name or "", on_branch=branch) if name or branch else hit, same))
    return [hit for hit, _same in out]


SAME_BRANCH_BOOST = 1.25
"""How much closer a record said on the asking session's own (non-mainline) branch ranks: sessions on one
feature branch see each other's records first, above a somewhat better match from elsewhere in the project."""


def _foreign_name(ran: Sequence[Place | None], asking: Place) -> str | None:
    """The project a record comes from when every session it cites ran in another than ``asking``'s (None:
    local, or placeless: a session of no known folder, or none cited)."""
    if not ran or None in ran or any(place is not None and asking.holds(place) for place in ran):
        return None
    return sorted(place.name for place in ran if place is not None)[0]


def foreign_records(cited: Sequence[Collection[str]], asking: Callable[[], Place], places: PlaceLookup) -> list[bool]:
    """For each record (the source paths it cites), whether it belongs to another project than the asking
    session's: what a session's resident block leaves out (a project's standing instructions stay in that
    project). ``asking`` is called only when some record has a place (it reads the asking folder's git)."""
    threads = [[i[1] for source in paths if (i := source_identity_from_path(source))] for paths in cited]
    where = places({thread for record in threads for thread in record})
    if not any(where.values()):
        return [False] * len(threads)
    at = asking()
    return [_foreign_name([where.get(thread) for thread in record], at) is not None for record in threads]


def unmerged_branch(branches: Collection[str | None], asking: Place, merged: dict[str, bool]) -> str:
    """The branch a record was said on when it has not reached the asking work tree's HEAD ("" when it has,
    or cannot be told: a turn with no branch recorded, the asking one's own, one git says is an ancestor of
    HEAD, a :data:`MAINLINE` name). A branch the asking repository does not know (another clone's) is
    named. ``merged`` keeps git's answers for one prompt."""
    if asking.branch is None or None in branches or asking.branch in branches:
        return ""
    for branch in sorted(b for b in branches if b):
        if branch in MAINLINE:
            return ""  # said on the mainline: current there whatever has happened on it since
        if branch not in merged:
            merged[branch] = _reached(asking.root, branch)
        if merged[branch]:
            return ""
    return sorted(b for b in branches if b)[0]


MAINLINE = ("main", "master", "trunk")
"""Branch names whose records are current on every branch: what was said on the mainline is what branches
start from (Claude Code records no commit per turn to tell when)."""


def _reached(root: str, branch: str) -> bool:
    """Whether ``branch`` is an ancestor of HEAD in the repository at ``root`` (git's ``merge-base
    --is-ancestor``); one git does not know has not."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", root, "merge-base", "--is-ancestor", f"refs/heads/{branch}", "HEAD"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return True  # cannot tell: no mark rather than a wrong one
    if done.returncode in (0, 1):
        return done.returncode == 0
    return False  # not a branch of this repository: another clone's, unmerged as far as this one knows
