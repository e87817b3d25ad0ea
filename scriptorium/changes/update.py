"""One entry point for the three request formats: ``memory_changes``, whole-topic ``changes``, a unified ``patch``.

All three end in the same workspace transaction and return the same
:class:`~scriptorium.workspace.TxnResult`. A unified diff is applied by
``git apply`` (the tool made for it) inside the staging copy, after every path
it names has been checked.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from scriptorium.changes.new_sources import NewSource, Origin, archived_for_request, resolve_new_sources
from scriptorium.changes.structured import Change, update_records
from scriptorium.errors import InvalidArgument, InvalidPatch, NotFound
from scriptorium.workspace import MemoryWorkspace, TopicChange, TxnResult
from scriptorium.workspace.paths import check_topic_path
from scriptorium.workspace.staging import REAL_TREE, Staging
from scriptorium.workspace.transaction import PlanGuard

MAX_PATCH_BYTES = 4 * 1024 * 1024


def update(
    workspace: MemoryWorkspace,
    *,
    message: str,
    memory_changes: Sequence[Change] | None = None,
    changes: Sequence[TopicChange] | None = None,
    patch: str | None = None,
    expected_revision: str | None = None,
    new_sources: Sequence[NewSource] = (),
    origin: Origin = "owner",
    audience: str | None = None,
    dry_run: bool = False,
    guard: PlanGuard | None = None,
) -> TxnResult:
    """Apply exactly one of the three formats (all or nothing); ``new_sources`` go with memory_changes and
    belong to ``audience`` (None: shared).

    ``dry_run``: validate everything and return what would change (with the topics' diff); afterwards the
    workspace holds exactly the bytes it held before (request-level sources archived for the check are taken
    back).
    """
    given = [
        name
        for name, value in (("memory_changes", memory_changes), ("changes", changes), ("patch", patch))
        if value is not None
    ]
    if len(given) != 1:
        raise InvalidArgument(f"give exactly one of memory_changes, changes, patch (got {', '.join(given) or 'none'})")
    if new_sources and memory_changes is None:
        raise InvalidArgument("new_sources are cited from memory_changes only")
    if memory_changes is not None:
        resolved, messages = resolve_new_sources(memory_changes, new_sources, origin, audience)
        with archived_for_request(workspace, messages, keep=not dry_run) as paths:
            return update_records(
                workspace,
                resolved,
                message=message,
                expected_revision=expected_revision,
                appended_sources=paths,
                dry_run=dry_run,
                guard=guard,
            )
    if guard is not None:
        raise InvalidArgument("a guarded change is memory_changes")
    if changes is not None:
        if not changes:
            raise InvalidArgument("changes must not be empty")
        return workspace.apply_changes(changes, message=message, expected_revision=expected_revision, dry_run=dry_run)
    assert patch is not None
    return apply_patch(workspace, patch, message=message, expected_revision=expected_revision, dry_run=dry_run)


def _git_apply(args: list[str], patch: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if cwd is not None:
        # Never let git discover a repository above the staging folder: paths stay relative to it.
        env["GIT_CEILING_DIRECTORIES"] = str(Path(cwd).parent)
    return subprocess.run(
        ["git", "apply", *args], input=patch, capture_output=True, text=True, cwd=cwd, env=env, timeout=60, check=False
    )


def patch_paths(patch: str) -> tuple[list[str], list[str]]:
    """(paths the patch touches, paths it deletes); every path must be a topic. Raises InvalidPatch/InvalidPath."""
    if not patch.strip():
        raise InvalidPatch("the patch is empty")
    if len(patch.encode()) > MAX_PATCH_BYTES:
        raise InvalidPatch(f"the patch is larger than {MAX_PATCH_BYTES} bytes")
    listed = _git_apply(["--numstat", "-z", "-"], patch)
    if listed.returncode != 0:
        raise InvalidPatch(f"not a unified diff git can read: {listed.stderr.strip()}")
    paths: list[str] = []
    fields = listed.stdout.split("\0")
    index = 0
    while index < len(fields) and fields[index]:
        added, removed, rest = fields[index].split("\t", 2)
        if added == "-" or removed == "-":
            raise InvalidPatch("binary patches are not accepted")
        if rest:
            paths.append(rest)
            index += 1
        else:  # a rename: the old and the new path follow
            paths += [fields[index + 1], fields[index + 2]]
            index += 3
    summary = _git_apply(["--summary", "-"], patch).stdout
    deleted = [line.split()[-1] for line in summary.splitlines() if line.strip().startswith("delete mode")]
    if any(
        line.strip().startswith(("mode change", "create mode 12", "create mode 16")) for line in summary.splitlines()
    ):
        raise InvalidPatch("mode changes, symlinks and submodules are not accepted")
    for path in [*paths, *deleted]:
        check_topic_path(path)
    return paths, deleted


def apply_patch(
    workspace: MemoryWorkspace,
    patch: str,
    *,
    message: str,
    expected_revision: str | None = None,
    deletions: set[str] | None = None,
    dry_run: bool = False,
) -> TxnResult:
    """Apply a unified diff (paths relative to the memory folder, ``a/``/``b/`` prefixes allowed).

    ``deletions`` names records the caller deletes on purpose (a revert of the commit that created them).
    """
    _paths, deleted = patch_paths(patch)
    with workspace.lock():
        snap = workspace.snapshot()
        deletions = set(deletions or ()) & set(snap.id_to_topic)
        for path in deleted:
            topic = snap.topics.get(path)
            if topic is None:
                raise NotFound(f"the patch deletes {path}, which does not exist", path=path)
            deletions |= topic.block_ids()  # deleting a whole topic is explicit, as with changes[]

        def edit(stage: Staging) -> None:
            applied = _git_apply(["--whitespace=nowarn", "-"], patch, cwd=str(stage.root))
            if applied.returncode != 0:
                raise InvalidPatch(
                    f"the patch does not apply to revision {snap.tree[:12]}: {applied.stderr.strip()}",
                    rejected_text=patch[:2000],
                    guidance="Make the diff against the current topic text (read it first), paths under topics/.",
                )

        return workspace.transact(
            edit,
            message=message,
            deletions=deletions,
            expected_revision=expected_revision,
            dry_run=dry_run,
            staging=REAL_TREE,  # git apply patches real files
        )
