"""Generate large memory workspaces for benchmarks.

Bulk loading goes through the git CLI with a temporary index (fast C code),
then the workspace's own ``rebuild_views`` transaction renders the views, so
the measured transactions start from a normal, consistent workspace.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from scriptorium.workspace import MemoryWorkspace, SourceMessage
from scriptorium.workspace.packing import holding_lock
from scriptorium.workspace.paths import conversation_file
from scriptorium.workspace.sources import render_source
from scriptorium.workspace.threads import join

RECORDS_PER_TOPIC = 50
MESSAGES_PER_THREAD = 100
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "tea",
    "coffee",
    "postgres",
    "redis",
    "celery",
    "git",
    "topic",
    "memory",
    "record",
    "source",
]


def _b36(value: int, width: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while value:
        value, rem = divmod(value, 36)
        out = digits[rem] + out
    return out.rjust(width, "0")


def _git(root: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    full_env = {**os.environ, **(env or {})}
    out = subprocess.run(
        ["git", f"--git-dir={root / '.git'}", f"--work-tree={root}", *args],
        check=True,
        capture_output=True,
        text=True,
        env=full_env,
        input=stdin,
    )
    return out.stdout.strip()


def build_workspace(root: Path, records: int, sources: int) -> MemoryWorkspace:
    """A workspace of ``records`` cited records in 50-record topics over ``sources`` archived messages."""
    MemoryWorkspace.init(root).close()
    source_paths: list[str] = []
    conversations: dict[str, list[bytes]] = {}
    for index in range(sources):
        thread, message = divmod(index, MESSAGES_PER_THREAD)
        msg = SourceMessage(
            "bench",
            f"thread-{thread:05d}",
            f"msg-{message:03d}",
            "user",
            "2026-01-01T00:00:00Z",
            " ".join(WORDS[(index + k) % len(WORDS)] for k in range(12)),
        )
        conversations.setdefault(conversation_file(msg.path), []).append(render_source(msg))
        source_paths.append(msg.path)
    for conversation, entries in conversations.items():  # the archive's layout: a file a conversation
        target = root / conversation
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(join(entries))
    base_ms = 1_700_000_000_000
    for topic_index in range((records + RECORDS_PER_TOPIC - 1) // RECORDS_PER_TOPIC):
        path = f"topics/area-{topic_index % 20:02d}/topic-{topic_index:05d}.md"
        lines = [f"# Topic {topic_index}", ""]
        notes: list[str] = []
        for k in range(RECORDS_PER_TOPIC):
            index = topic_index * RECORDS_PER_TOPIC + k
            if index >= records:
                break
            if k % 10 == 0:
                lines += [f"## Section {k // 10}", ""]
            rid = f"m-{_b36(base_ms + index, 9)}000"
            eid = f"e-{_b36(base_ms + index, 9)}000"
            day = 1 + index % 28
            month = 1 + (index // 28) % 12
            words = " ".join(WORDS[(index * 7 + j) % len(WORDS)] for j in range(14))
            lines += [f"2025-{month:02d}-{day:02d}: Record {index} says {words}.[^{eid}] ^{rid}", ""]
            src = source_paths[index % len(source_paths)]
            message = src.rsplit("/", 1)[1].removesuffix(".md")
            notes.append(f"[^{eid}]: [evidence {index}](../../{conversation_file(src)}#source-{message})")
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines + notes) + "\n")
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        head = _git(root, "rev-parse", "HEAD")
        _git(root, "read-tree", head, env=env)
        _git(root, "add", "topics", "sources", env=env)
        tree = _git(root, "write-tree", env=env)
        commit = _git(root, "commit-tree", tree, "-p", head, "-m", "Bulk load", env=env)
        _git(root, "update-ref", "refs/heads/main", commit, head)
    (root / ".scriptorium" / "state.json").write_text(json.dumps({"tree": tree, "commit": commit}))
    workspace = MemoryWorkspace(root)
    workspace.rebuild_views(message="Render views after bulk load")
    return workspace


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder for a benchmark's workspaces, removed once the background repacks their installs set
    off have ended: one still writing into a ``.git`` makes removing the folder fail ("Directory not empty").
    A repack an install has just started may take its lock a moment after the wait: removal is tried again,
    after waiting on the locks again, for up to a minute; past that its error is raised."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        for _attempt in range(300):
            for git_dir in [*folder.glob("*/.git"), *folder.glob("*/*/.git"), *folder.glob("*/*/*/.git")]:
                with holding_lock(git_dir):  # waits for a running repack to let its lock go
                    pass
            try:
                shutil.rmtree(folder)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.2)
        else:  # still not removable after a minute: the error, not a folder silently left behind
            shutil.rmtree(folder)
