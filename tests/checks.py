"""Exactly-once checks that read what is stored, without opening the workspace.

Opening a :class:`MemoryWorkspace` runs recovery first, which would finish or
discard a half-done install before a check could see it; so these read the
files, the install journal, git and the session store directly.

* :func:`records_citing` counts *records* per cited source across all topics.
  Counting footnote definitions is not enough: a second record citing the same
  source with the same label reuses the first one's footnote.
* :func:`tree_problems` compares the installed files with git HEAD's tree and
  with ``state.json``, and reports an install journal left behind.
* :func:`unmarked` lists the nodes the session store does not mark written.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from scriptorium.sessions import SessionStore
from scriptorium.workspace.paths import CORE_SOURCE, is_conversation_file
from scriptorium.workspace.threads import split
from scriptorium.workspace.topics import parse_topic
from scriptorium.writers.verbatim import STANDING_HEADING

RUNTIME = ".scriptorium"
JOURNAL = "journal.json"


def records_citing(memory: Path) -> Counter[str]:
    """For each archived message (``provider/thread/message``), how many records cite it: how many times its
    turn was written. The core's standing instructions are left out: each quotes a sentence of a user's turn
    that its conversation's record holds whole (:mod:`scriptorium.writers.verbatim`), a second citation by
    design, not a second writing."""
    counts: Counter[str] = Counter()
    topics = memory / "topics"
    for path in sorted(topics.rglob("*.md")) if topics.is_dir() else []:
        rel = path.relative_to(memory).as_posix()
        topic = parse_topic(rel, path.read_text(encoding="utf-8"))
        for record in topic.records:
            if rel == CORE_SOURCE and STANDING_HEADING in record.headings:
                continue
            cited = {
                note.source.identity
                for label in record.refs
                if (note := topic.footnotes.get(label)) is not None and note.source is not None
            }
            counts.update(cited)
    return counts


def by_message(counts: Counter[str]) -> Counter[str]:
    """The same counts keyed by message ID alone (the last part of the identity)."""
    out: Counter[str] = Counter()
    for identity, count in counts.items():
        out[identity.rsplit("/", 1)[-1]] += count
    return out


def _git(memory: Path, *args: str, scratch: Path | None = None) -> str:
    """Run git on the workspace; with ``scratch``, index and new objects go there, never into the repository."""
    env = {"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(memory)}
    if scratch is not None:
        env["GIT_INDEX_FILE"] = str(scratch / "index")
        env["GIT_OBJECT_DIRECTORY"] = str(scratch / "objects")
        env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(memory / ".git" / "objects")
    out = subprocess.run(
        ["git", f"--git-dir={memory / '.git'}", f"--work-tree={memory}", *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def head_tree(memory: Path) -> str:
    return _git(memory, "rev-parse", "HEAD^{tree}")


def installed_tree(memory: Path) -> str:
    """The tree of the installed files, with ``sources/`` as HEAD has it (:func:`source_problems` checks those).

    Every path but ``sources/`` is taken from disk as it is (added, changed, removed).
    """
    with tempfile.TemporaryDirectory(prefix="scriptorium-check-") as tmp:
        scratch = Path(tmp)
        (scratch / "objects").mkdir()
        _git(memory, "read-tree", "HEAD", scratch=scratch)
        _git(memory, "add", "-A", "--", ".", ":(exclude)sources", f":(exclude){RUNTIME}", scratch=scratch)
        return _git(memory, "write-tree", scratch=scratch)


def source_problems(memory: Path) -> list[str]:
    """Where the archive on disk is not HEAD's: each source HEAD holds must be on disk with the same bytes (in
    its conversation's file, layout 3), while a source archived and not committed yet may be there too (a pass
    that died after archiving leaves its evidence behind by design, and the next pass commits it)."""
    listed = _git(memory, "ls-tree", "-r", "-z", "HEAD", "--", "sources").split("\0")
    problems = []
    for line in filter(None, listed):
        info, path = line.split("\t", 1)
        committed = subprocess.run(
            ["git", "-C", str(memory), "cat-file", "blob", info.split()[2]], capture_output=True, check=True
        ).stdout
        try:
            on_disk = (memory / path).read_bytes()
        except FileNotFoundError:
            problems.append(f"{path} is in HEAD and not on disk")
            continue
        if not is_conversation_file(path):
            if on_disk != committed:
                problems.append(f"{path} differs from HEAD's")
            continue
        held = split(path, on_disk)
        changed = [key for key, data in split(path, committed).items() if held.get(key) != data]
        if changed:
            problems.append(f"{path}: {', '.join(changed)} differ from HEAD's")
    return problems


def tree_problems(memory: Path) -> list[str]:
    """What is wrong with the install, read before anything opens the workspace (empty when clean)."""
    problems: list[str] = []
    if (memory / RUNTIME / JOURNAL).exists():
        problems.append("an install journal is left behind (a half-done install)")
    head = head_tree(memory)
    on_disk = installed_tree(memory)
    if on_disk != head:
        problems.append(f"installed files ({on_disk[:12]}) differ from git HEAD's tree ({head[:12]})")
    problems += source_problems(memory)
    state = json.loads((memory / RUNTIME / "state.json").read_text())
    if state.get("tree") != head:
        problems.append(f"state.json names tree {str(state.get('tree'))[:12]}, HEAD is {head[:12]}")
    return problems


def workspace_key(memory: Path) -> str:
    """The identity node markers are keyed by (the workspace's ``workspace-id``)."""
    return (memory / RUNTIME / "workspace-id").read_text().strip()


def unmarked(store: SessionStore, memory: Path, nodes: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (session, node) pairs the session store does not mark written for this workspace."""
    key = workspace_key(memory)
    missing = []
    for sid, node_id in nodes:
        node = store.get_node(sid, node_id)
        if node is None or not node.written_for(key):
            missing.append((sid, node_id))
    return missing


def exactly_once(memory: Path, store: SessionStore, expected: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Counts for (session, node) content turns: lost, duplicated, unmarked, partial installs.

    A turn is cited when a record cites the archived message named by its node ID.
    """
    wanted = list(expected)
    problems = tree_problems(memory)  # first: nothing has opened the workspace yet
    cited = by_message(records_citing(memory))
    ids = [node_id for _sid, node_id in wanted]
    return {
        "turns": len(wanted),
        "lost": sum(1 for n in ids if cited.get(n, 0) == 0),
        "duplicated": sum(1 for n in ids if cited.get(n, 0) > 1),
        "unmarked": len(unmarked(store, memory, wanted)),
        "partial_installs": int(bool(problems)),
    }
