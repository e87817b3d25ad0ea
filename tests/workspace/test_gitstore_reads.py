"""What GitStore reads without GitPython (a command's start imports none of it): trees and the branch's ref, read
exactly as GitPython and git read them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from git import SymbolicReference
from git.objects.fun import tree_entries_from_data as gitpython_entries
from hypothesis import given, settings
from hypothesis import strategies as st

from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.gitstore import BRANCH_REF, tree_entries_from_data

NAME = st.from_regex(r"[A-Za-z0-9_\- éü中][A-Za-z0-9_.\- éü中]{0,19}", fullmatch=True)
"""Names as the workspace writes them (GitPython refuses some no workspace tree holds: ".", ".git" aliases)."""
MODE = st.sampled_from([0o100644, 0o100755, 0o040000, 0o120000, 0o160000])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(MODE, NAME, st.binary(min_size=20, max_size=20)), max_size=12))
def test_a_tree_reads_as_gitpython_reads_it(entries: list[tuple[int, str, bytes]]) -> None:
    data = b"".join(b"%o %s\0%s" % (mode, name.encode("utf-8"), sha) for mode, name, sha in entries)
    assert list(tree_entries_from_data(data)) == list(gitpython_entries(data))


def test_the_branch_reads_as_gitpython_reads_it_loose_and_packed(ws: MemoryWorkspace) -> None:
    ws.apply_changes([TopicChange("topics/a.md", "create", "# A\n")], message="a")
    loose = ws.git.head()
    assert loose is not None and loose == SymbolicReference.dereference_recursive(ws.git.repo, BRANCH_REF)
    subprocess.run(["git", f"--git-dir={ws.git.git_dir}", "pack-refs", "--all"], check=True)
    assert not (ws.git.git_dir / BRANCH_REF).exists(), "the ref is in packed-refs only"
    assert ws.git.head() == loose == SymbolicReference.dereference_recursive(ws.git.repo, BRANCH_REF)
    (ws.git.git_dir / "packed-refs").unlink()
    assert ws.git.head() is None, "no ref, no commit"


def test_memory_status_imports_no_gitpython(tmp_path: Path) -> None:
    MemoryWorkspace.init(tmp_path / "state" / "memory").close()
    code = (
        "import sys\n"
        "from scriptorium.cli.entry import main\n"
        f"sys.argv = ['scriptorium', 'memory', 'status', '--state', {str(tmp_path / 'state')!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('GITPYTHON' if 'git' in sys.modules else 'NONE', file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "NONE", done.stderr[-2000:]
