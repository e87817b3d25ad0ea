"""SIGKILL at every step of install and commit: the next open sees exactly the old or the new tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import git_log, git_tree_of_files, message, tree_bytes

SCRIPT = r"""
import json, os, signal, sys
from pathlib import Path
from scriptorium.workspace import install, MemoryWorkspace, TopicChange

root, target, edits_file, trace_file = sys.argv[1:5]
steps = []
def crash(step):
    steps.append(step)
    Path(trace_file).write_text(json.dumps(steps))
    if step == target:
        os.kill(os.getpid(), signal.SIGKILL)
install.crash_point = crash
edits = json.loads(Path(edits_file).read_text())
ws = MemoryWorkspace(Path(root))
ws.apply_changes([TopicChange(**e) for e in edits], message="crashy edit")
"""

GIT_KILL_HOOK = """#!/bin/sh
# Kill git and the Python process that ran it while git holds refs/heads/main.lock.
if [ "$1" = prepared ]; then
  grandparent=$(ps -o ppid= -p $PPID | tr -d ' ')
  kill -9 "$grandparent" "$PPID"
  sleep 5
fi
exit 0
"""


def _prepare(root: Path) -> list[dict[str, str]]:
    ws = MemoryWorkspace.init(root)
    with ws.lock():
        paths = ws.archive_sources([message(n) for n in range(6)])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes(
        [
            TopicChange(
                "topics/a.md",
                "create",
                "# A\n\n2026-10-01: First [k](test/t1/m1).\n\n2026-10-02: Second [k](test/t1/m2).\n",
            ),
            TopicChange("topics/b.md", "create", "2026-09-05: Third [k](test/t1/m3).\n"),
            TopicChange("topics/core.md", "create", "Core rule [k](test/t1/m4).\n"),
        ],
        message="seed",
    )
    a = (root / "topics/a.md").read_text()
    core = (root / "topics/core.md").read_text()
    ws.close()
    # Rewrite a record, change a date (two timeline files), edit core, delete a topic: no new IDs,
    # so the new tree is deterministic.
    return [
        {
            "path": "topics/a.md",
            "action": "update",
            "content": a.replace("First", "First, rewritten").replace("2026-10-02", "2026-08-02"),
        },
        {"path": "topics/core.md", "action": "update", "content": core.replace("Core rule", "Core rule, sharpened")},
        {"path": "topics/b.md", "action": "delete"},
    ]


def _run(root: Path, target: str, edits: list[dict[str, str]], scratch: Path) -> tuple[int, list[str], str]:
    import json

    edits_file = scratch / "edits.json"
    edits_file.write_text(json.dumps(edits))
    trace = scratch / "trace.json"
    trace.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), target, str(edits_file), str(trace)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    steps = json.loads(trace.read_text()) if trace.exists() else []
    return proc.returncode, steps, proc.stderr[-3000:]


def _assert_recovered(root: Path, old: dict[str, bytes], new: dict[str, bytes], ws_id: str) -> str:
    ws = MemoryWorkspace(root)
    files = tree_bytes(root)
    assert files in (old, new), "installed tree is a mix of old and new"
    assert git_tree_of_files(root) == ws.revision
    head_tree = git_log(root)[0].split(" ")[1]
    assert head_tree == ws.revision
    assert not list((root / ".git").rglob("*.lock"))
    assert not (root / ".scriptorium" / "journal.json").exists()
    assert not list((root / ".scriptorium").glob("txn/*"))
    assert not list(Path(tempfile.gettempdir()).glob(f"scriptorium-staging-{ws_id}-*"))
    # And the next write goes through.
    result = ws.apply_changes(
        [TopicChange("topics/after.md", "create", "After the crash [k](test/t1/m5).\n")], message="after"
    )
    assert result.git_committed
    ws.close()
    return "new" if files == new else "old"


@pytest.mark.slow
def test_sigkill_at_every_install_step_leaves_old_or_new(tmp_path: Path) -> None:
    template = tmp_path / "template" / "memory"
    edits = _prepare(template)
    old = tree_bytes(template)
    # A clean run tells us every step and the new tree.
    clean = tmp_path / "clean" / "memory"
    shutil.copytree(template, clean, symlinks=True)
    rc, steps, said = _run(clean, "", edits, tmp_path)
    assert rc == 0, f"the uncrashed run must succeed: {said}"
    new = tree_bytes(clean)
    assert new != old
    assert steps[0] == "objects-written" and "journal-written" in steps and steps[-1] == "journal-removed"
    assert sum(s.startswith("applied-") for s in steps) >= 5
    outcomes: dict[str, str] = {}
    for number, step in enumerate(steps):
        root = tmp_path / f"run-{number}" / "memory"
        shutil.copytree(template, root, symlinks=True)
        # An orphaned staging dir of a dead process, as a SIGKILL mid-edit would leave.
        from scriptorium.workspace.workspace import workspace_id

        ws_id = workspace_id(root)
        orphan = Path(tempfile.mkdtemp(prefix=f"scriptorium-staging-{ws_id}-999999-"))
        (orphan / "topics").mkdir()
        rc, _, said = _run(root, step, edits, tmp_path)
        assert rc == -9, f"the process should have been killed at {step}; it said: {said}"
        outcomes[step] = _assert_recovered(root, old, new, ws_id)
    before_commit_point = steps[: steps.index("journal-written")]
    assert all(outcomes[s] == "old" for s in before_commit_point)
    assert all(outcomes[s] == "new" for s in steps[steps.index("journal-written") :])


@pytest.mark.slow
def test_sigkill_while_git_holds_the_ref_lock_leaves_no_stale_lock(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    edits = _prepare(root)
    old = tree_bytes(root)
    hook = root / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(GIT_KILL_HOOK)
    hook.chmod(0o755)
    rc, steps, _said = _run(root, "", edits, tmp_path)
    hook.unlink()
    assert rc == -9 and steps[-1] == "files-installed"
    assert (root / ".git" / "refs" / "heads" / "main.lock").exists(), "git died holding its ref lock"
    new_files = tree_bytes(root)
    assert new_files != old
    from scriptorium.workspace.workspace import workspace_id

    assert _assert_recovered(root, old, new_files, workspace_id(root)) == "new"
