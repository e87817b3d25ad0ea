"""Purging forgotten text from git history: ``scriptorium memory forget … --purge-history``.

After a forget the installed tree holds no forgotten text, but every earlier commit still does: the
sources as archived, the records that quoted them, the views that copied those. A purge rewrites ``main``
so that no commit or object holds it:

* each forgotten source holds, in every commit, the tombstone it holds now: in its conversation's file (layout
  3) its entry does, every other entry of each version keeping its bytes; its own file (layouts 1 and 2, the
  commits before their migration) is that tombstone;
* every other blob of ``topics/``, ``timeline/`` and the root views loses, by identity, what cites a
  forgotten source (:mod:`scriptorium.workspace.erasure`): every record citing one, whatever else it cites
  (as the forget deletes it), the forgotten sources' footnotes, the views' entries of the removed records,
  and a topic left with nothing else (its path and heading are the conversation's title). Each remaining
  occurrence of a removed topic's name or of a forgotten text, as said or as a writer reshaped it (or one
  of its lines long enough to stand alone), is replaced by ``[forgotten]``; so is each in a commit
  message. The texts are read from the history itself (every earlier version of the forgotten paths), so
  a purge needs nothing but the paths and never writes the text anywhere;
* every blob of the installed tree is kept as it is (the forget decided what the memory keeps: the same
  words said in another conversation are not the forgotten text), and so is every other object: a tree
  whose paths are untouched keeps its hash, so does every source of
  another conversation; commits keep their dates, authors and order.

Its work follows what it changes, not the size of the memory or of its history:

* only the window from the first commit that holds a forgotten source is read (nothing earlier can cite it:
  a transaction refuses a citation of a source not archived; nor quote it); the commits before keep their
  IDs;
* commits stream from ``git log --raw`` (what each one changed, found by git comparing trees by ID), twice:
  a survey reads each version of a forgotten source and of a topic; the rewrite reads each changed version
  of a topic or view once, in one ``git cat-file`` batch per commit, and keeps only the blobs that change;
* the rewrite hands ``git fast-import`` each commit as its changes, mapped: a folder with no rewritten path
  below it is named whole by its ID (never opened, here or by git), a rewritten path takes its new blob.
  fast-import writes the trees on the rewritten paths — those of the forgotten sources, of the topics
  citing them and of the views listing their records — into one pack, each as a delta of its version
  before (a flat folder rewritten by every commit costs a few bytes a commit, not a file). It runs on a
  scratch git folder sharing the workspace's objects, so its branch never becomes a ref of the workspace;
* what is held in memory is the commit at hand, the paths rewritten so far and the blobs that changed, not
  the history's objects.

The installed tree does not change (it holds no forgotten text already), so neither does the revision;
commit hashes do. Moving ``main`` is a compare-and-swap on the old head, after a journal names the old and
the new head: killed at any step, the next open either finds ``main`` still at the old head (the purge is
rolled back: its objects are unreachable and pruned later) or at the new one (it is finished: the state file
names the new head, reflogs are expired and unreachable objects pruned). A last, empty commit records that a
purge happened — not what it purged.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from scriptorium.defaults import GIT_AUTHOR_EMAIL, GIT_AUTHOR_NAME
from scriptorium.errors import GitCommitFailed, InvalidArgument, ValidationRejected
from scriptorium.fsutil import sync_filesystem
from scriptorium.workspace import epoch
from scriptorium.workspace import install as install_steps
from scriptorium.workspace.erasure import Eraser
from scriptorium.workspace.gitstore import BRANCH_REF, MODE_DIR, blob_sha
from scriptorium.workspace.paths import (
    TIMELINE,
    TOPICS,
    conversation_file,
    conversation_of,
    is_conversation_file,
    legacy_source_path,
    source_identity_from_path,
)
from scriptorium.workspace.recovery import begin_purge, finish_purge
from scriptorium.workspace.sources import forgotten_forms, parse_source
from scriptorium.workspace.threads import join, split

if TYPE_CHECKING:
    from scriptorium.redaction import Redactor
    from scriptorium.workspace.snapshot import Snapshot
    from scriptorium.workspace.workspace import MemoryWorkspace

R = TypeVar("R", bound="_History")

SCANNED = (TOPICS, TIMELINE, "core.md", "recent.md", "relations.json")
"""Top-level entries whose blobs can copy a source's text; ``sources/`` holds only the forgotten paths'."""


class _Log:
    """``git log --raw -z`` read as it streams: per commit its header fields and its changes, in path order
    (with ``-t`` a changed folder comes before what changed in it). Nothing of the history is held but the
    commit being read."""

    def __init__(self, git: list[str], args: Sequence[str], paths: Sequence[str] = ()) -> None:
        command = [*git, "log", "-z", "--raw", "--no-renames", "--no-abbrev", "--reverse", "--topo-order", *args]
        self.proc = subprocess.Popen(
            [*command, "--stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(b"%s\n" % p.encode() for p in ("--", *paths)) if paths else b"")
        self.proc.stdin.close()

    def __iter__(self) -> Iterator[tuple[list[str], list[_Change]]]:
        stdout = self.proc.stdout
        assert stdout is not None
        header: list[str] | None = None
        changes: list[_Change] = []
        raw: bytes | None = None
        rest = b""
        try:
            while True:
                chunk = stdout.read(1 << 16)
                tokens = (rest + chunk).split(b"\0")
                rest = tokens.pop() if chunk else b""
                for token in tokens:
                    if raw is not None:  # the path of the change just read
                        old_mode, new_mode, old, new, status = raw[1:].decode().split(" ")
                        path = token.decode("utf-8", "surrogateescape")
                        changes.append(_Change(int(old_mode, 8), int(new_mode, 8), old, new, status, path))
                        raw = None
                        continue
                    token = token.lstrip(b"\n")
                    if token.startswith(b"\x01"):
                        if header is not None:
                            yield header, changes
                        header, changes = token[1:].decode().split(), []
                    elif token.startswith(b":"):
                        raw = token
                if not chunk:
                    break
            if header is not None:
                yield header, changes
        finally:
            stdout.close()
            self.proc.wait()
        if self.proc.returncode:
            raise GitCommitFailed(f"git log failed ({self.proc.returncode}) while reading history for a purge")


class _Change(NamedTuple):
    old_mode: int
    new_mode: int
    old: str
    new: str
    status: str
    path: str


def _named(path: str) -> bytes:
    """``path`` as a fast-import command names it (quoted as C quotes when it starts with one or holds a
    newline)."""
    raw = path.encode("utf-8", "surrogateescape")
    if raw.startswith(b'"') or b"\n" in raw:
        raw = b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'
    return raw


class _Objects:
    """Objects read by ID through one ``git cat-file --batch`` (loose or packed alike, nothing cached)."""

    def __init__(self, git: list[str]) -> None:
        self.proc = subprocess.Popen(
            [*git, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.reads = 0

    def read(self, shas: Sequence[str]) -> list[bytes]:
        """The objects ``shas`` names, asked for together (one round trip, not one each)."""
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        out: list[bytes] = []
        for start in range(0, len(shas), 256):  # a batch's questions fit the pipe while its answers wait
            batch = shas[start : start + 256]
            stdin.write(b"".join(b"%s\n" % sha.encode() for sha in batch))
            stdin.flush()
            for sha in batch:
                header = stdout.readline().split()
                if len(header) != 3:
                    raise GitCommitFailed(f"git cat-file could not read {sha} for a purge")
                out.append(stdout.read(int(header[2])))
                stdout.read(1)
        self.reads += len(shas)
        return out

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc.wait()


class _Import:
    """New objects written as ``git fast-import`` writes them: into one pack (trees as deltas of the version
    before), from commands naming only what changes; the trees it does not reach are the old ones, by ID.

    It runs on a throwaway git folder that shares the workspace's objects, so the branch it fills is never a
    ref of the workspace (``main`` moves by compare-and-swap, later) and nothing else of it is left there."""

    def __init__(self, git_dir: Path, scratch: Path) -> None:
        subprocess.run(["git", "init", "--bare", "--quiet", str(scratch)], check=True, capture_output=True)
        self.objects = git_dir / "objects"
        self.packs_before = set(os.listdir(self.objects / "pack")) if (self.objects / "pack").is_dir() else set()
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env |= {"GIT_DIR": str(scratch), "GIT_OBJECT_DIRECTORY": str(self.objects)}
        settings = ["-c", "core.fsync=committed", "-c", "core.fsyncMethod=fsync", "-c", "fastimport.unpackLimit=0"]
        self.errors = scratch / "errors"
        with self.errors.open("wb") as errors:
            self.proc = subprocess.Popen(
                ["git", *settings, "fast-import", "--quiet"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=env,
            )
        self.marks = 0

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)

    def blob(self, data: bytes) -> None:
        self.send(b"blob\ndata %d\n%s\n" % (len(data), data))

    def commit(self, when: int, message: str, parent: str | None, commands: list[bytes]) -> None:
        self.marks += 1
        ident = f"{GIT_AUTHOR_NAME} <{GIT_AUTHOR_EMAIL}> {when} +0000".encode()
        text = (message.rstrip("\n") + "\n").encode("utf-8")
        head = b"commit refs/heads/purge\nmark :%d\nauthor %s\ncommitter %s\ndata %d\n%s" % (
            self.marks,
            ident,
            ident,
            len(text),
            text,
        )
        self.send(head + (b"from %s\n" % parent.encode() if parent else b"") + b"".join(commands) + b"\n")

    def finish(self) -> str:
        """The last commit's ID, once every object is in a pack made durable."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.send(b"get-mark :%d\n" % self.marks)
        self.proc.stdin.flush()
        head = self.proc.stdout.readline().decode().strip()
        self.proc.stdin.close()
        self.proc.stdout.close()
        if self.proc.wait() or len(head) != 40:
            said = self.errors.read_text(errors="replace")[-300:]
            raise GitCommitFailed(f"git fast-import failed during a purge: {said}")
        packs = self.objects / "pack"
        written = [packs / name for name in set(os.listdir(packs)) - self.packs_before]
        sync_filesystem(self.objects, written)
        return head

    def abort(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class _Purge:
    """What the history loses (see the module): the forgotten texts and the records, topics and view entries
    that go are surveyed first; then each blob that changes is mapped, by path and ID, as commits stream by.

    Only the window of history from the first commit that holds a forgotten source is read: nothing before
    it can cite the source (a transaction refuses a citation of a source not archived) or quote it."""

    def __init__(self, ws: MemoryWorkspace, paths: Sequence[str], tree: str, *, survey_only: bool) -> None:
        self.cmd = ["git", f"--git-dir={ws.git.git_dir}", "--literal-pathspecs"]
        self.survey_only = survey_only
        """A dry run: work out what would change, write no object."""
        twins = {legacy_source_path(*i): path for path in paths if (i := source_identity_from_path(path))}
        twins = {legacy: path for legacy, path in twins.items() if legacy != path}
        """Where commits before the layout migration keep each forgotten source (layout 1's path): they are
        purged there too, with the same tombstone (its bytes are the source's identity, not its path)."""
        by_conversation: dict[str, frozenset[str]] = {}
        for path in paths:
            conversation = conversation_file(path)
            by_conversation[conversation] = by_conversation.get(conversation, frozenset()) | {path}
        self.conversations: dict[str, frozenset[str]] = dict(by_conversation)
        """Layouts 3 and 4: each part of a conversation file holding a forgotten source → the forgotten sources'
        keys. Every version of a part in history keeps its other entries and takes the tombstone of each of those
        it holds. A part once committed stays in every later tree (a file only grows): the installed tree's
        parts are every part history holds."""
        keys = list(paths)
        paths = [*paths, *twins]
        self.forgotten = frozenset(paths)
        """The forgotten sources' own files, as layouts 1 and 2 kept them (commits before the migrations)."""
        self.stones: dict[str, bytes] = {}
        """Key → the tombstone the installed tree holds for it (a conversation file's entry in layout 3)."""
        self.installed_conversations: dict[str, str] = {}
        """Conversation file → its installed blob (tombstones in place already)."""
        self.tombstones: dict[str, str] = {}
        """Path → the tombstone the installed tree holds there, for each forgotten path."""
        self.installed: dict[str, str] = {}
        """Path → blob of every scanned file of the installed tree: kept as it is (the forget decided what the
        memory keeps: the same words said in a conversation not forgotten are not the forgotten text)."""
        folders = sorted({p.rsplit("/", 1)[0] for p in [*self.forgotten, *self.conversations] if "/" in p})
        scanned = [] if survey_only else list(SCANNED)
        listing = subprocess.run(
            [*self.cmd, "ls-tree", "-r", "-z", "--full-tree", tree, "--", *scanned, *folders],
            capture_output=True,
            check=True,
        ).stdout
        for line in listing.split(b"\0"):
            if line:
                info, name = line.split(b"\t", 1)
                path, sha = name.decode(), info.split()[2].decode()
                conversation = conversation_of(path)
                if conversation in by_conversation and is_conversation_file(path):
                    self.conversations[path] = by_conversation[conversation]
                if survey_only:
                    continue
                if path in self.forgotten:
                    self.tombstones[path] = sha
                elif path in self.conversations:
                    self.installed_conversations[path] = sha
                elif path.split("/", 1)[0] in SCANNED:
                    self.installed[path] = sha

        self.blobs: dict[tuple[str, str], str | None] = {}
        """(path, old blob) → new blob (None: the path goes) for each blob that changes."""
        parts: dict[str, list[str]] = {}
        for part in self.conversations:
            parts.setdefault(conversation_of(part), []).append(part)
        self.eraser = Eraser(paths, parts=parts)
        self.changed_blobs = 0
        self.dropped: set[str] = set()
        """Paths some commit's tree loses (a topic left with nothing but forgotten records)."""
        self.objects = _Objects(self.cmd)
        self.pending: list[bytes] = []
        """New blobs not yet handed to the writer."""
        if not survey_only:
            self._tombstones_of_conversations(keys)
            self.tombstones.update({legacy: self.tombstones[p] for legacy, p in twins.items() if p in self.tombstones})

    def _tombstones_of_conversations(self, keys: Sequence[str]) -> None:
        """Layout 3: each forgotten source's tombstone, from its installed conversation file; its own file of
        layout 2 (commits before the migration) holds that tombstone as a blob of its own."""
        files = sorted(self.installed_conversations)
        blobs = self.objects.read([self.installed_conversations[f] for f in files])
        for conversation, data in zip(files, blobs, strict=True):
            entries = split(conversation, data)
            self.stones.update({key: entries[key] for key in self.conversations[conversation] if key in entries})
        for key in keys:
            stone = self.stones.get(key)
            if stone is not None and key not in self.tombstones:
                self.tombstones[key] = blob_sha(stone)
                self.pending.append(stone)

    def close(self) -> None:
        self.objects.close()

    def start(self) -> str | None:
        """The first commit of ``main`` that holds a forgotten path (None: none ever did)."""
        if not self.forgotten:
            return None
        found = subprocess.run(
            [*self.cmd, "rev-list", "--reverse", "--topo-order", BRANCH_REF, "--stdin"],
            input=b"".join(b"%s\n" % p.encode() for p in ("--", *self.forgotten, *self.conversations)),
            capture_output=True,
            check=True,
        ).stdout.split(b"\n", 1)[0]
        return found.decode() or None

    def survey(self, window: Sequence[str]) -> None:
        """Every earlier version of the forgotten sources' text, and every record and topic that goes, from
        the history itself: a view of one commit names records written in earlier ones."""
        texts: set[str] = set()
        seen: set[str] = set()
        watched = [*self.forgotten, *self.conversations, TOPICS]
        for _header, changes in _Log(self.cmd, ["--format=%x01%H", *window], watched):
            wanted: list[_Change] = []
            for change in changes:
                if change.new_mode == 0 or change.new_mode == MODE_DIR:
                    continue
                if change.path in self.conversations:
                    if change.new not in seen and change.new != self.installed_conversations.get(change.path):
                        seen.add(change.new)
                        wanted.append(change)
                elif change.path in self.forgotten:
                    if change.new in seen or change.new == self.tombstones.get(change.path):
                        continue
                    seen.add(change.new)
                    wanted.append(change)
                elif change.path.startswith(f"{TOPICS}/"):
                    wanted.append(change)
            for change, data in zip(wanted, self.objects.read([c.new for c in wanted]), strict=True):
                if change.path in self.conversations:
                    texts.update(self._forgotten_texts(change.path, data))
                    continue
                if change.path not in self.forgotten:
                    self.eraser.survey(change.path, data)
                    continue
                try:
                    message = parse_source(change.path, data)
                except Exception:  # an unparsable version: its raw text is what to look for
                    texts.add(data.decode("utf-8", "replace"))
                    continue
                if message.forgotten is None:
                    texts.add(message.text)
        self.eraser.needles = [excerpt.encode("utf-8") for excerpt in forgotten_forms(texts)]
        self.eraser.finish_survey()

    def _forgotten_texts(self, conversation: str, data: bytes) -> list[str]:
        """The forgotten sources' texts one version of a conversation file holds (all of it, unparsable)."""
        try:
            entries = split(conversation, data)
        except ValidationRejected:
            return [data.decode("utf-8", "replace")]
        texts = []
        for key in self.conversations[conversation]:
            if key in entries:
                try:
                    message = parse_source(key, entries[key])
                except ValidationRejected:
                    texts.append(entries[key].decode("utf-8", "replace"))
                    continue
                if message.forgotten is None:
                    texts.append(message.text)
        return texts

    def _conversation(self, conversation: str, data: bytes) -> bytes:
        """One version of a conversation file with each forgotten source's entry its tombstone (its other
        entries as they were); an unparsable version is the installed file."""
        installed = self.installed_conversations.get(conversation)
        try:
            entries = split(conversation, data)
        except ValidationRejected:
            return self.objects.read([installed])[0] if installed else b""
        for key in self.conversations[conversation]:
            if key in entries:
                entries[key] = self.stones.get(key, b"")  # a dry run has no tombstone yet: what changes is counted
        return join(entries.values())

    def message(self, text: str) -> str:
        return self.eraser.text(text.encode("utf-8")).decode("utf-8")

    def wants(self, path: str, sha: str) -> bool:
        """Whether :meth:`blob` must read ``sha`` to know what ``path`` holds instead."""
        if path in self.conversations:
            return self.installed_conversations.get(path) != sha and (path, sha) not in self.blobs
        return (
            path not in self.forgotten
            and path.split("/", 1)[0] in SCANNED
            and self.installed.get(path) != sha
            and (path, sha) not in self.blobs
        )

    def blob(self, path: str, sha: str, data: bytes | None) -> str | None:
        """The blob ``path`` holds instead of ``sha`` (None: the path goes); ``data`` is ``sha``'s bytes when
        :meth:`wants` them."""
        if path in self.forgotten:
            return self.tombstones.get(path, sha)
        if data is None:
            return self.blobs.get((path, sha), sha)
        clean = self._conversation(path, data) if path in self.conversations else self.eraser.blob(path, data)
        if clean == data:
            return sha  # most blobs: nothing is kept of them but that they were read
        self.changed_blobs += 1
        new: str | None = None
        if clean is None:
            self.dropped.add(path)
        else:
            new = blob_sha(clean)
            if not self.survey_only:
                self.pending.append(clean)
        self.blobs[(path, sha)] = new
        return new


class _Tree:
    """The rewritten tree of the commit being written, as what differs from the original one: each path whose
    blob differs, and how many of them each folder holds (a folder holding none is the original, by ID)."""

    def __init__(self) -> None:
        self.changed: dict[str, tuple[int, str | None]] = {}
        self.folders: dict[str, int] = {}

    def set(self, path: str, mode: int, original: str | None, new: str | None) -> None:
        was = path in self.changed
        if new != original:
            self.changed[path] = (mode, new)
            if was:
                return
            step = 1
        elif was:
            del self.changed[path]
            step = -1
        else:
            return
        parts = path.split("/")
        for n in range(1, len(parts)):
            folder = "/".join(parts[:n])
            self.folders[folder] = self.folders.get(folder, 0) + step
            if not self.folders[folder]:
                del self.folders[folder]

    def commands(self, changes: Sequence[_Change]) -> list[bytes]:
        """fast-import's file commands that make the rewritten parent tree this commit's rewritten tree: each
        change as the original made it, but a folder holding no rewritten path is set whole by its ID (never
        opened), and a rewritten path takes its rewritten blob."""
        out: list[bytes] = []
        skip: str | None = None
        for change in changes:
            path = change.path
            if skip is not None and path.startswith(skip):
                continue
            skip = None
            if change.new_mode == MODE_DIR:
                if path not in self.folders:
                    out.append(b"M 040000 %s %s\n" % (change.new.encode(), _named(path)))
                    skip = f"{path}/"
                continue  # else something below is rewritten: its changes follow one by one
            if change.old_mode == MODE_DIR:
                out.append(b"D %s\n" % _named(path))
                skip = f"{path}/"
                if not change.new_mode:
                    continue
            mode, new = self.changed.get(path, (change.new_mode, change.new if change.new_mode else None))
            if new is None:
                out.append(b"D %s\n" % _named(path))
            else:
                out.append(b"M %o %s %s\n" % (mode, new.encode(), _named(path)))
        return out


class _History(Protocol):
    """What rewrites ``main``: a commit's tree and message as they become, and how many blobs changed."""

    changed_blobs: int

    def tree(self, sha: str, prefix: str) -> str | None: ...

    def message(self, text: str) -> str: ...


def purge_history(ws: MemoryWorkspace, paths: Sequence[str], *, dry_run: bool = False) -> dict[str, Any]:
    """Rewrite ``main`` without the forgotten sources' text (see the module); returns what it did.

    ``dry_run``: nothing is written; the result says what a purge would rewrite (run before the forget, it
    counts what the forget is about to leave in history)."""
    with ws.lock():
        ws.recover()
        base, old_head = _installed_head(ws)
        found = _Purge(ws, paths, base.tree, survey_only=dry_run)
        try:
            start = found.start()
            window = [BRANCH_REF, "--not", f"{start}^@"] if start is not None else []
            if start is not None:
                found.survey(window)
            with tempfile.TemporaryDirectory(prefix="scriptorium-purge-") as scratch:
                writer = None if dry_run or start is None else _Import(ws.git.git_dir, Path(scratch) / "git")
                try:
                    rewritten, new_head = _stream_main(found, window, writer)
                except BaseException:
                    if writer is not None:
                        writer.abort()
                    raise
        finally:
            found.close()
        result = {
            "commits_rewritten": rewritten,
            "blobs_rewritten": found.changed_blobs,
            "record_ids_removed": len(found.eraser.removed_ids),
            "paths_removed": sorted(found.dropped),
            "texts_looked_for": len(found.eraser.needles),
        }
        if dry_run:
            epoch.drop_process_caches()  # this process read the texts; no other did
            return {"dry_run": True, **result}
        moved = _move_main(ws, base, old_head, new_head or old_head)
    return _noted(ws, result, new_head if moved else old_head, moved, "without forgotten content")


def _stream_main(found: _Purge, window: Sequence[str], writer: _Import | None) -> tuple[int, str | None]:
    """Each commit of ``window`` (oldest first) as it becomes, written by ``writer`` from the first one that
    changes on (those before keep their IDs); the number rewritten and the new head (None: none changed)."""
    if not window:
        return 0, None
    tree = _Tree()
    rewritten = 0
    previous: str | None = None
    for header, changes in _Log(found.cmd, ["-t", "--root", "--format=%x01%H %P", *window]):
        commit, parents = header[0], header[1:]
        assert len(parents) <= 1, "main is linear"
        assert previous is None or parents == [previous], "main is linear"
        previous = commit
        files = [c for c in changes if c.new_mode != MODE_DIR and c.old_mode != MODE_DIR]
        wanted = [c for c in files if c.new_mode and found.wants(c.path, c.new)]
        *read, raw = found.objects.read([*(c.new for c in wanted), commit])
        fetched = dict(zip((c.path for c in wanted), read, strict=True))
        for change in files:
            if change.new_mode:
                new = found.blob(change.path, change.new, fetched.get(change.path))
                tree.set(change.path, change.new_mode, change.new, new)
            else:
                tree.set(change.path, change.old_mode, None, None)
        meta, _, body = raw.partition(b"\n\n")
        original = body.decode("utf-8", "replace")
        message = found.message(original)
        if not rewritten and not tree.changed and message == original:
            continue  # unchanged, and so is every commit before it: it keeps its ID
        rewritten += 1
        if writer is None:
            found.pending.clear()
            continue
        for data in found.pending:
            writer.blob(data)
        found.pending.clear()
        when = int(next(line for line in meta.split(b"\n") if line.startswith(b"committer ")).split(b" ")[-2])
        parent = parents[0] if rewritten == 1 and parents else None
        writer.commit(when, message, parent, tree.commands(changes))
        install_steps.crash_point("purge-commit-streamed")
    if writer is None or not rewritten:
        return rewritten, None
    return rewritten, writer.finish()


def _installed_head(ws: MemoryWorkspace) -> tuple[Snapshot, str]:
    base = ws.snapshot()
    old_head = ws.git.head()
    if old_head is None or base.commit != old_head:
        from scriptorium.errors import RevisionConflict

        raise RevisionConflict("the installed state and main disagree; retry once the pending commit lands")
    return base, old_head


def _move_main(ws: MemoryWorkspace, base: Snapshot, old_head: str, new_head: str) -> bool:
    """Move ``main`` from ``old_head`` to the rewritten ``new_head`` (see the module for the steps), under
    the workspace lock; False when nothing changed."""
    if new_head != old_head and ws.git.commit_tree(new_head) != base.tree:
        raise InvalidArgument(
            "the installed memory still holds what the purge would take out of history",
            guidance="run the same command without --purge-history first, then purge",
        )
    ws.git.sync_objects()
    install_steps.crash_point("purge-objects-written")
    if new_head == old_head:
        epoch.drop_process_caches()
        return False
    begin_purge(ws.root, old_head, new_head)
    install_steps.crash_point("purge-journal-written")
    ws.git.update_ref(new_head, old_head)
    install_steps.crash_point("purge-ref-updated")
    finish_purge(ws.root, ws.git, ws.installer, new_head)
    return True


def _noted(ws: MemoryWorkspace, found: dict[str, Any], head: str | None, moved: bool, what: str) -> dict[str, Any]:
    """``found`` with the head ``main`` is left at; a moved ``main`` gets a new epoch and the empty commit
    that records a purge happened (after the workspace lock is let go)."""
    if not moved:
        return {**found, "head": head}
    epoch.bump(ws.root)
    note = ws.commit_note(f"Purge history: {found['commits_rewritten']} commit(s) rewritten {what}")
    return {**found, "head": note or head}


def purge_secrets(
    ws: MemoryWorkspace, redactor: Redactor, known: Mapping[str, str] | None = None, *, dry_run: bool = False
) -> dict[str, Any]:
    """Rewrite ``main`` so that no commit, tree, blob or message holds a secret (``scriptorium memory redact
    --purge-history``): every version of every file and every commit message is read with ``redactor``, and
    each secret found there or in ``known`` (secret → placeholder) is replaced by its placeholder wherever it
    occurs, as said or as written inside a JSON string. The installed tree must hold none already (the
    redaction's transaction ran): otherwise INVALID_ARGUMENT, and nothing is written."""

    def rewriter(base: Snapshot, commits: Sequence[str]) -> _Replacer:
        found = _Replacer(ws, survey_only=dry_run)
        found.survey(commits, redactor, dict(known or {}))
        return found

    def counts(found: _Replacer) -> dict[str, Any]:
        return {"secrets_found": found.secrets}

    return _rewrite_main(ws, rewriter, counts, "without redacted secrets", dry_run=dry_run)


class _Replacer:
    """Every blob and message of the history with each secret replaced by its placeholder."""

    def __init__(self, ws: MemoryWorkspace, *, survey_only: bool) -> None:
        self.git = ws.git
        self.survey_only = survey_only
        self.pairs: list[tuple[bytes, bytes]] = []
        self.secrets = 0
        self.trees: dict[str, str | None] = {}
        self.blobs: dict[tuple[str, bool], str] = {}
        """(blob, whether it is a conversation file's) → the blob with the secrets replaced."""
        self.changed_blobs = 0

    def survey(self, commits: Sequence[str], redactor: Redactor, secrets: dict[str, str]) -> None:
        """The secrets of every blob and message of ``commits`` (with those already known), as byte pairs."""
        seen: set[str] = set()

        def look(data: bytes) -> None:
            secrets.update(redactor.redact(data.decode("utf-8", "replace"))[1])

        for commit in commits:
            meta = self.git.repo.commit(commit)
            look(meta.message.encode("utf-8") if isinstance(meta.message, str) else meta.message)
            stack = [meta.tree.hexsha]
            while stack:
                tree = stack.pop()
                if tree in seen:
                    continue
                seen.add(tree)
                for _name, (mode, child) in self.git.tree_entries(tree).items():
                    if mode == MODE_DIR:
                        stack.append(child)
                    elif child not in seen:
                        seen.add(child)
                        look(self.git.read_blob(child))
        pairs: dict[bytes, bytes] = {}
        for secret, placeholder in secrets.items():
            pairs[secret.encode("utf-8")] = placeholder.encode("utf-8")
            escaped = json.dumps(secret)[1:-1].encode("utf-8")  # as a JSON file holds it
            pairs.setdefault(escaped, json.dumps(placeholder)[1:-1].encode("utf-8"))
        self.pairs = sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True)
        self.secrets = len(secrets)

    def replaced(self, data: bytes) -> bytes:
        for secret, placeholder in self.pairs:
            if secret in data:
                data = data.replace(secret, placeholder)
        return data

    def message(self, text: str) -> str:
        return self.replaced(text.encode("utf-8")).decode("utf-8")

    def blob(self, sha: str, path: str) -> str:
        """The blob ``sha`` (at ``path``) with each secret replaced: in a conversation file entry by entry, each
        framed again with its new length (a replacement is rarely as long as the secret)."""
        framed = is_conversation_file(path)
        if (sha, framed) not in self.blobs:
            data = self.git.read_blob(sha)
            clean = self._conversation(path, data) if framed else self.replaced(data)
            if clean == data:
                self.blobs[sha, framed] = sha
            else:
                self.changed_blobs += 1
                self.blobs[sha, framed] = blob_sha(clean) if self.survey_only else self.git.write_blob(clean)
        return self.blobs[sha, framed]

    def _conversation(self, path: str, data: bytes) -> bytes:
        try:
            entries = split(path, data)
        except ValidationRejected:  # damaged already: its bytes as any file's
            return self.replaced(data)
        return join(self.replaced(entry) for entry in entries.values())

    def tree(self, sha: str, prefix: str) -> str | None:
        if sha in self.trees:
            return self.trees[sha]
        entries = dict(self.git.tree_entries(sha))
        changed = False
        for name, (mode, child) in list(entries.items()):
            new = self.tree(child, f"{prefix}{name}/") if mode == MODE_DIR else self.blob(child, f"{prefix}{name}")
            if new != child:
                assert new is not None, "a replacement never empties a tree"
                entries[name] = (mode, new)
                changed = True
        result = sha
        if changed:
            result = f"changed:{sha}" if self.survey_only else self.git.write_tree(entries)
        self.trees[sha] = result
        return result


def _rewrite_main(
    ws: MemoryWorkspace,
    rewriter: Callable[[Snapshot, Sequence[str]], R],
    counts: Callable[[R], dict[str, Any]],
    what: str,
    *,
    dry_run: bool,
) -> dict[str, Any]:
    """Rewrite every commit of ``main`` with the history ``rewriter`` makes (see the module for the steps)."""
    repo = ws.git.repo
    with ws.lock():
        ws.recover()
        base, old_head = _installed_head(ws)
        commits = repo.git.rev_list("--reverse", "--topo-order", BRANCH_REF).split()
        history = rewriter(base, commits)
        mapping: dict[str, str] = {}
        rewritten = 0
        for commit in commits:
            meta = repo.commit(commit)
            tree = history.tree(meta.tree.hexsha, "")
            assert tree is not None, "a commit's tree always keeps its sources"
            parents = [mapping[p.hexsha] for p in meta.parents]
            original = meta.message if isinstance(meta.message, str) else meta.message.decode("utf-8", "replace")
            message = history.message(original)
            same = tree == meta.tree.hexsha and message == original and parents == [p.hexsha for p in meta.parents]
            if same:
                mapping[commit] = commit
                continue
            assert len(parents) <= 1, "main is linear"
            rewritten += 1
            if dry_run:
                mapping[commit] = f"changed:{commit}"
                continue
            mapping[commit] = ws.git.write_commit(tree, parents[0] if parents else None, message, meta.committed_date)
        found = {"commits_rewritten": rewritten, "blobs_rewritten": history.changed_blobs, **counts(history)}
        if dry_run:
            epoch.drop_process_caches()  # this process read the texts; no other did
            return {"dry_run": True, **found}
        moved = _move_main(ws, base, old_head, mapping[old_head])
    return _noted(ws, found, mapping[old_head] if moved else old_head, moved, what)
