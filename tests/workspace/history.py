"""A long synthetic history for purge tests and ``benchmarks/forget.py``: many commits written through
``git fast-import`` in seconds, in the shapes a year of imports leaves.

Each commit writes a part of one conversation, as a write pass does: its messages as sources under
``sources/claude-code/<session>/`` (one flat folder of every session, as today), its records appended to its
conversation topic under ``topics/conversations/`` (one flat folder of every conversation), the day's
timeline file and ``recent.md``; every fifth commit an organized topic of one of the projects gains a record
citing this conversation and an earlier one, and ``relations.json`` an edge. Every message says its
session's marker (``zq<n>x``), so a test can look for what a purge must leave nowhere. The installed files
are HEAD's and the state file names them, so a workspace opens on it as on any other.
"""

from __future__ import annotations

import io
import json
import random
import subprocess
import tarfile
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from scriptorium.workspace import MemoryWorkspace, SourceMessage
from scriptorium.workspace.paths import conversation_file
from scriptorium.workspace.sources import render_source
from scriptorium.workspace.threads import join

WORDS = tuple(
    [
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
        "deploy",
        "build",
        "cache",
        "index",
        "query",
        "window",
        "branch",
        "merge",
        "review",
        "release",
        "schema",
        "table",
        "worker",
        "queue",
        "token",
        "budget",
    ]
)
PROJECTS = 15


def marker(session: int) -> str:
    """The word only session ``session``'s messages say."""
    return f"zq{session}x"


def session_id(session: int) -> str:
    return f"s{session:05d}"


@dataclass
class History:
    root: Path
    commits: int
    sessions: int
    head: str = ""
    topics: dict[int, str] = field(default_factory=dict)
    """Session → its conversation topic's path."""

    def source_folder(self, session: int) -> str:
        return f"sources/claude-code/{session_id(session)}"


def build_history(root: Path, commits: int, sessions: int, messages: int = 8, seed: int = 7) -> History:
    """A workspace at ``root`` whose ``main`` holds ``commits`` commits over ``sessions`` conversations of
    ``messages`` messages each, imported in order (a conversation's messages over the commits its share
    covers: ``commits / sessions`` each)."""
    rng = random.Random(seed)
    MemoryWorkspace.init(root).close()
    git = ["git", f"--git-dir={root / '.git'}"]
    base = subprocess.run([*git, "rev-parse", "main"], capture_output=True, text=True, check=True).stdout.strip()
    history = History(root, commits, sessions)
    out: list[bytes] = []
    records: dict[str, list[tuple[str, str, str, str]]] = {}  # topic → (day, text, ref, id)
    notes: dict[str, list[str]] = {}
    day_lines: dict[str, list[str]] = {}
    recent: list[str] = []
    edges: list[dict[str, str]] = []
    titles: dict[int, str] = {}
    all_ids: list[tuple[int, str]] = []
    stamp = 1_767_225_600  # 2026-01-01

    def topic_bytes(path: str, title: str) -> bytes:
        lines = [f"# {title}", ""]
        for day, text, ref, rid in records[path]:
            lines += [f"{day}: {text} [^{ref}] ^{rid}", ""]
        return ("\n".join(lines + notes[path]) + "\n").encode()

    def put(path: str, data: bytes) -> None:
        out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))

    counter = 0
    said_in: dict[str, list[bytes]] = {}  # a conversation's file: its messages so far (layout 3)
    for n in range(commits):
        session = n * sessions // commits
        first = session * commits // sessions
        last = (session + 1) * commits // sessions
        share = max(last - first, 1)
        start, end = (n - first) * messages // share, (n - first + 1) * messages // share
        sid = session_id(session)
        day = (date(2026, 1, 1) + timedelta(days=session * 365 // max(sessions, 1))).isoformat()
        title = f"Talk {session} about {rng.choice(WORDS)} and {rng.choice(WORDS)}"
        topic = history.topics.setdefault(session, f"topics/conversations/{day}-talk-{session}.md")
        records.setdefault(topic, [])
        notes.setdefault(topic, [])
        titles.setdefault(session, title)
        out.append(b"commit refs/heads/main\n")
        when = stamp + n * 3600
        ident = f"Scriptorium <scriptorium@localhost> {when} +0000"
        message = f"Write {end - start} message(s) of session {sid}".encode()
        out.append(b"author %s\ncommitter %s\ndata %d\n%s\n" % (ident.encode(), ident.encode(), len(message), message))
        if n == 0:
            out.append(b"from %s\n" % base.encode())
        for m in range(start, end):
            counter += 1
            role = "user" if m % 2 == 0 else "assistant"
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
            text = f"{words} {marker(session)} {rng.choice(WORDS)}"
            msg = SourceMessage("claude-code", sid, f"{sid}-{m}", role, f"{day}T09:{m % 60:02d}:00+00:00", text)
            said_in.setdefault(sid, []).append(render_source(msg))
            ref, rid = f"e-{counter:09d}", f"m-{counter:09d}"
            said = f"{role.title()}: {text}"
            records[topic].append((day, said, ref, rid))
            notes[topic].append(f"[^{ref}]: [{words.split()[0]}](../../{conversation_file(msg.path)}#source-{sid}-{m})")
            link = f"[[{topic.removesuffix('.md')}#^{rid}]]"
            day_lines.setdefault(day, []).append(f"- {said} — {link}")
            recent.insert(0, f"- {day} · {said} — {link}")
            all_ids.append((session, rid))
        if start < end:
            put(conversation_file(msg.path), join(said_in[sid]))
        put(topic, topic_bytes(topic, titles[session]))
        year, month = day[:4], day[:7]
        put(f"timeline/{year}/{month}/{day}.md", ("\n".join([f"# {day}", "", *day_lines[day]]) + "\n").encode())
        del recent[20:]
        put("recent.md", ("\n".join(["# Recent", "", *recent]) + "\n").encode())
        if n % 5 == 4 and session > 0:
            other = rng.randrange(session)
            project = f"topics/project-{session % PROJECTS:02d}/notes.md"
            records.setdefault(project, [])
            notes.setdefault(project, [])
            counter += 1
            ref, rid = f"e-{counter:09d}", f"m-{counter:09d}"
            mine = f"sources/claude-code/{sid}/{sid}-{start}.md"
            theirs = f"sources/claude-code/{session_id(other)}/{session_id(other)}-0.md"
            theirs_id = f"{session_id(other)}-0"
            text = f"Both {session} and {other} said {rng.choice(WORDS)} {rng.choice(WORDS)}. [^{ref}b]"
            records[project].append((day, text, ref, rid))
            notes[project].append(f"[^{ref}]: [{sid}](../../{mine}#source-{sid}-{start})")
            notes[project].append(f"[^{ref}b]: [{theirs_id}](../../{theirs}#source-{theirs_id})")
            put(project, topic_bytes(project, f"Project {session % PROJECTS}"))
            target = next(r for s, r in all_ids if s == other)
            edges.append({"from": rid, "to": target, "kind": "related"})
            put("relations.json", (json.dumps({"edges": edges}, indent=1) + "\n").encode())
        out.append(b"\n")
    out.append(b"done\n")
    subprocess.run(
        [*git, "-c", "fastimport.unpackLimit=0", "fast-import", "--quiet", "--done", "--force"],
        input=b"".join(out),
        check=True,
    )
    head = subprocess.run([*git, "rev-parse", "main"], capture_output=True, text=True, check=True).stdout.strip()
    tree = subprocess.run([*git, "rev-parse", "main^{tree}"], capture_output=True, text=True, check=True).stdout
    archive = subprocess.run([*git, "archive", "--format=tar", "main"], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(root, filter="data")
    (root / ".scriptorium" / "state.json").write_text(json.dumps({"tree": tree.strip(), "commit": head}))
    history.head = head
    return history
