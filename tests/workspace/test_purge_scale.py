"""A history purge's work and memory follow what it changes, not how long the history is (issue 55).

On long synthetic histories (:mod:`tests.workspace.history`): a purge rewrites only the trees on the paths of
what is forgotten, the topics citing it and the views listing it, and every other tree and blob keeps its
ID; what it reads and writes does not grow with the commits before the forgotten conversation; what it
holds in memory does not grow with the history it streams; and killed while it streams, the next open finds
the old history and a purge again completes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from scriptorium.changes.forget import Selection, forget
from scriptorium.workspace import MemoryWorkspace, purge
from scriptorium.workspace import install as install_steps
from scriptorium.workspace.gitstore import GitStore
from scriptorium.workspace.paths import conversation_file, source_path
from scriptorium.workspace.sources import parse_source
from scriptorium.workspace.threads import split
from tests.workspace.history import build_history, marker, session_id


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def _forget(root: Path, session: int) -> tuple[list[str], list[str]]:
    """The forget a purge follows: (the forgotten paths, the deleted record IDs)."""
    with MemoryWorkspace(root) as ws:
        done = forget(ws, Selection(thread=f"claude-code/{session_id(session)}"), why="test")
    return done["paths"], done["deleted"]


def _objects(root: Path, commit: str) -> dict[str, tuple[str, str]]:
    """Path → (type, ID) of every tree and blob of ``commit``'s tree."""
    out: dict[str, tuple[str, str]] = {"": ("tree", _git(root, "rev-parse", f"{commit}^{{tree}}").strip())}
    for entry in _git(root, "ls-tree", "-r", "-t", "-z", "--full-tree", commit).split("\0"):
        if entry:
            info, path = entry.split("\t", 1)
            _mode, kind, sha = info.split()
            out[path] = (kind, sha)
    return out


def _mentioning(root: Path, commit: str, needles: list[str]) -> set[str]:
    """The paths of ``commit`` whose file names one of ``needles``."""
    args = [x for needle in needles for x in ("-e", needle)]
    done = subprocess.run(
        ["git", "-C", str(root), "grep", "-l", "-F", *args, commit, "--"], capture_output=True, text=True
    )
    return {line.split(":", 1)[1] for line in done.stdout.splitlines()}


def test_a_purge_rewrites_only_the_paths_of_what_is_forgotten_and_keeps_every_other_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every tree and blob with nothing forgotten below it keeps its ID, and the purge never opens it."""
    root = tmp_path / "memory"
    history = build_history(root, commits=48, sessions=12)
    victim = 5
    paths, deleted = _forget(root, victim)
    topic = history.topics[victim].rsplit("/", 1)[1].removesuffix(".md")
    needles = [marker(victim), f"claude-code/{session_id(victim)}/", topic, *deleted]
    before = _git(root, "rev-list", "--reverse", "main").split()
    trees = {commit: _objects(root, commit) for commit in before}
    mentions = {commit: _mentioning(root, commit, needles) for commit in before}
    subjects = _git(root, "log", "--reverse", "--format=%s", "main").splitlines()
    with MemoryWorkspace(root) as ws:
        ws.snapshot()  # the installed state, read before: not the purge's work
        work = _Work(monkeypatch)
        done = purge.purge_history(ws, paths)
    after = _git(root, "rev-list", "--reverse", "main~1").split()  # the last commit notes the purge
    assert len(after) == len(before)
    first_changed = next(n for n, (old, new) in enumerate(zip(before, after, strict=True)) if old != new)
    first_of_victim = next(n for n, subject in enumerate(subjects) if subject.endswith(session_id(victim)))
    assert first_changed == first_of_victim, "the commits before the forgotten conversation keep their IDs"
    assert done["commits_rewritten"] == len(before) - first_changed
    kept = changed_total = 0
    on_changed_paths: set[str] = set()  # the trees of the old history with something rewritten below
    for old, new in zip(before, after, strict=True):
        was, now = trees[old], _objects(root, new)
        changed = {p for p in was.keys() | now.keys() if was.get(p) != now.get(p) and _is_blob(was, now, p)}
        on_changed_paths.update(sha for path, (kind, sha) in was.items() if kind == "tree" and _above(path, changed))
        # Only what is forgotten, the topics citing it and the views listing it are rewritten ...
        assert changed <= set(paths) | mentions[old], (old, sorted(changed - set(paths) - mentions[old]))
        changed_total += len(changed)
        # ... and every tree and blob with none of them below it keeps its ID.
        for path, entry in was.items():
            if not _above(path, changed):
                assert now.get(path) == entry, (old, path)
                kept += 1
    assert changed_total and kept > 10 * changed_total
    # The purge opened no tree but those on the paths it rewrote (git compares the others by ID).
    assert work.opened <= on_changed_paths, f"{len(work.opened - on_changed_paths)} trees opened needlessly"
    objects = subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout
    assert marker(victim).encode() not in objects and marker(victim + 1).encode() in objects


def _above(path: str, changed: set[str]) -> bool:
    """Whether ``path`` is one of ``changed`` or a folder holding one ("" is the root)."""
    return not path or any(c == path or c.startswith(f"{path}/") for c in changed)


def _is_blob(was: dict[str, tuple[str, str]], now: dict[str, tuple[str, str]], path: str) -> bool:
    return (was.get(path) or now[path])[0] == "blob"


class _Work:
    """What a purge does up to its objects being written: trees it parses, objects it reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.trees = self.reads = 0
        self.opened: set[str] = set()
        """The trees parsed before the purge's objects were written."""
        self.at_written: dict[str, int] | None = None
        tree_entries, read = GitStore.tree_entries, GitStore._read

        def counted_tree(store: GitStore, tree: str) -> Any:
            self.trees += 1
            if self.at_written is None:
                self.opened.add(tree)
            return tree_entries(store, tree)

        def counted_read(store: GitStore, sha: str, kind: bytes) -> bytes:
            self.reads += 1
            return read(store, sha, kind)

        monkeypatch.setattr(GitStore, "tree_entries", counted_tree)
        monkeypatch.setattr(GitStore, "_read", counted_read)
        if hasattr(purge, "_Objects"):  # the purge's own batch reader
            batch = purge._Objects.read

            def counted_batch(objects: Any, shas: Any) -> Any:
                self.reads += len(shas)
                return batch(objects, shas)

            monkeypatch.setattr(purge._Objects, "read", counted_batch)

        def step(name: str) -> None:
            if name == "purge-objects-written" and self.at_written is None:
                self.at_written = {"trees": self.trees, "reads": self.reads}

        monkeypatch.setattr(install_steps, "crash_point", step)


def _trees_of(root: Path, rev: str) -> set[str]:
    listed = _git(root, "rev-list", "--objects", rev).splitlines()
    shas = "\n".join(line.split(" ", 1)[0] for line in listed) + "\n"
    kinds = subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch-check"], input=shas, capture_output=True, text=True
    ).stdout
    return {line.split()[0] for line in kinds.splitlines() if line.split()[1] == "tree"}


@pytest.mark.parametrize("commits", [20, 100])
def test_a_purge_of_a_recent_conversation_works_alike_after_a_short_or_a_long_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commits: int, work_by_size: dict[int, dict[str, int]]
) -> None:
    """The forgotten conversation is the last one (its last four commits): the purge reads, parses and writes
    as much after 100 commits as after 20."""
    root = tmp_path / "memory"
    build_history(root, commits=commits, sessions=commits // 4)
    paths, _deleted = _forget(root, commits // 4 - 1)
    old_trees = _trees_of(root, "main")
    with MemoryWorkspace(root) as ws:
        ws.snapshot()  # the installed state, read before: not the purge's work
        work = _Work(monkeypatch)
        done = purge.purge_history(ws, paths)
    assert work.at_written is not None
    written = _trees_of(root, "main~1") - old_trees
    work_by_size[commits] = {**work.at_written, "written": len(written), "commits": done["commits_rewritten"]}
    if len(work_by_size) == 2:
        small, large = work_by_size[20], work_by_size[100]
        assert large["commits"] == small["commits"] == 5, work_by_size  # its four, and the forget's
        # The same but for what the forgotten conversation's topics held (a project topic it shares or not).
        for what in ("written", "reads", "trees"):
            assert large[what] <= small[what] + 4, (what, work_by_size)


@pytest.fixture(scope="module")
def work_by_size() -> dict[int, dict[str, int]]:
    return {}


def test_a_purge_of_a_long_history_holds_little_of_it_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """600 commits over 150 conversations, the first one forgotten: every commit is rewritten, streamed."""
    root = tmp_path / "memory"
    build_history(root, commits=600, sessions=150)
    paths, _deleted = _forget(root, 0)
    peaks: list[int] = []

    def step(name: str) -> None:
        if name == "purge-objects-written":
            peaks.append(tracemalloc.get_traced_memory()[1])

    monkeypatch.setattr(install_steps, "crash_point", step)
    with MemoryWorkspace(root) as ws:
        ws.snapshot()  # the installed state, read before: not the purge's
        tracemalloc.start()
        try:
            done = purge.purge_history(ws, paths)
        finally:
            tracemalloc.stop()
    assert done["commits_rewritten"] >= 599
    assert peaks and peaks[0] < 8 << 20, f"{peaks[0] / 1e6:.1f} MB held while rewriting 600 commits"


CRASHY = r"""
import json, os, signal, sys
from pathlib import Path
from scriptorium.workspace import install, MemoryWorkspace
from scriptorium.workspace.purge import purge_history

root, paths = sys.argv[1], json.loads(sys.argv[2])
seen = []
def crash(step):
    seen.append(step)
    if step == "purge-commit-streamed" and len(seen) == 10:
        os.kill(os.getpid(), signal.SIGKILL)
install.crash_point = crash
purge_history(MemoryWorkspace(Path(root)), paths)
"""


def test_a_purge_killed_while_it_streams_leaves_the_old_history_and_completes_when_run_again(
    tmp_path: Path,
) -> None:
    root = tmp_path / "memory"
    build_history(root, commits=40, sessions=10)
    paths, _deleted = _forget(root, 2)
    old_log = _git(root, "log", "--format=%H", "main")
    killed = subprocess.run([sys.executable, "-c", CRASHY, str(root), json.dumps(paths)], timeout=300)
    assert killed.returncode == -signal.SIGKILL
    with MemoryWorkspace(root) as ws:
        assert _git(root, "log", "--format=%H", "main") == old_log, "main never moved"
        assert ws.revision == _git(root, "rev-parse", "main^{tree}").strip()
        done = purge.purge_history(ws, paths)
    assert done["commits_rewritten"] >= 30
    assert not (root / ".scriptorium" / "purge.json").exists()
    assert _git(root, "for-each-ref", "--format=%(refname)").split() == ["refs/heads/main"]
    objects = subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout
    assert marker(2).encode() not in objects


def test_a_purge_of_some_messages_of_a_conversation_keeps_its_other_messages_in_every_commit(tmp_path: Path) -> None:
    """Layout 3 keeps a conversation's messages in one file: a purge of some of them gives every version of
    that file in history their tombstones, and keeps each other entry's bytes as that version had them."""
    root = tmp_path / "memory"
    build_history(root, commits=24, sessions=6)
    victim = session_id(3)
    conversation = conversation_file(source_path("claude-code", victim, "x"))
    keys = [source_path("claude-code", victim, f"{victim}-{m}") for m in (1, 4)]
    with MemoryWorkspace(root) as ws:
        said = [ws.archive.read(key).text for key in keys]
        forget(ws, Selection(sources=tuple(keys)), why="test")
        before = _git(root, "rev-list", "--reverse", "main").split()
        held = {  # each commit's version of the conversation file, read before the purge prunes the old history
            commit: shown.stdout
            for commit in before
            if (
                shown := subprocess.run(
                    ["git", "-C", str(root), "show", f"{commit}:{conversation}"], capture_output=True
                )
            ).returncode
            == 0
        }
        purge.purge_history(ws, keys)
    after = _git(root, "rev-list", "--reverse", "main~1").split()  # the last commit notes the purge
    assert len(after) == len(before)
    versions = 0
    for old, new in zip(before, after, strict=True):
        if old not in held:
            continue  # the conversation is not archived yet at this commit
        now = subprocess.run(["git", "-C", str(root), "show", f"{new}:{conversation}"], capture_output=True).stdout
        old_entries, new_entries = split(conversation, held[old]), split(conversation, now)
        assert list(new_entries) == list(old_entries), "the same messages, in the same order"
        for key, data in old_entries.items():
            if key in keys:
                stone = parse_source(key, new_entries[key])
                assert stone.forgotten is not None and stone.text == ""
            else:
                assert new_entries[key] == data, f"{new}: {key} kept its bytes"
        versions += 1
    assert versions >= 2
    objects = subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout
    assert all(text.encode() not in objects for text in said), "no object holds a forgotten message"
