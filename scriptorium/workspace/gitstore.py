"""Git as the workspace history: objects written in-process, refs moved by compare-and-swap.

The repository at ``<memory>/.git`` is bare: the runtime, not a git index,
decides what the tree is. A transaction writes the blobs and trees it changed
(unchanged subtrees keep their hashes, so a small edit never pays for the
whole archive), a commit object, and then moves ``refs/heads/main`` with
``git update-ref <new> <old>`` — a compare-and-swap on the expected old commit.
Foreign git errors are translated here, once.

The objects a thread writes are held in memory until :meth:`GitStore.sync_objects` writes them as one pack
and its index (gitdb's pack writer), not as a loose file each: a heavy month's import wrote about 13,000 loose
objects, each a file to create and a block to hold until a repack took them, and creating them cost more as
the file system filled (0.8 s of the generated year's month-1 import, 3.6 s of month 4's, as many objects).
The packs an install leaves are rolled up in the background (:mod:`scriptorium.workspace.packing`) once they
pass a count.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import io
import os
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gitdb import GitDB
from gitdb.base import OStream
from gitdb.exc import BadObject
from gitdb.pack import PackEntity
from gitdb.util import mman

from scriptorium.cache import BoundedCache
from scriptorium.defaults import GIT_AUTHOR_EMAIL, GIT_AUTHOR_NAME
from scriptorium.errors import GitCommitFailed
from scriptorium.fsutil import owner_alive, sync_filesystem

if TYPE_CHECKING:
    from git import Repo

BRANCH_REF = "refs/heads/main"
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
MODE_FILE = 0o100644
MODE_DIR = 0o040000
Entries = dict[str, tuple[int, str]]
TREE_CACHE_LIMIT = 50_000
"""Tree objects kept parsed in memory (immutable: evicting one costs a re-read)."""
READ_ATTEMPTS = 3
"""Reads of an object that looks missing, the packs looked at again before each retry (a repack ran)."""
PENDING_LIMIT = 8 << 20
"""Bytes of objects a thread holds before they go into a pack of their own (a history purge writes hundreds
of megabytes: its memory stays bounded); the rest go at :meth:`GitStore.sync_objects`."""
PACK_TEMP = "tmp_scriptorium_"
"""The start of a pack's and its index's names while they are written (then ``<pid>-<thread>``, and
:func:`temporary_pack`'s endings)."""


def temporary_pack(stem: str) -> tuple[str, str]:
    """The files a pack and its index are written to before they are renamed into place: names git does not
    take for a pack (``.pack.tmp``, ``.idx.tmp``; git's own are ``tmp_pack_*``). A ``git repack`` running
    meanwhile lists ``*.pack`` and ``*.idx``: a half-written index of that name made it fail ("index file … is
    too small"), and a failed background repack is not tried again for a minute, packs piling up."""
    return f"{stem}.pack.tmp", f"{stem}.idx.tmp"


PACKS_CHECK_S = 1.0
"""A reader looks whether the packs changed at most this often (one ``stat``): a repack's removed packs are
let go of, not kept mapped (and on disk) for as long as the process lives."""


def blob_sha(data: bytes) -> str:
    """The git object ID of a blob holding ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _sort_key(item: tuple[str, tuple[int, str]]) -> bytes:
    name, (mode, _) = item
    return _entry_key(name, mode)


def _entry_key(name: str, mode: int) -> bytes:
    """Git's tree order: names as bytes, a folder's as if it ended in a slash."""
    return (name + "/").encode() if mode == MODE_DIR else name.encode()


def _entry_bytes(name: str, entry: tuple[int, str]) -> bytes:
    return b"%o %s\0" % (entry[0], name.encode()) + bytes.fromhex(entry[1])


SERIAL_MIN_ENTRIES = 256
"""Trees this large keep their sorted serialization (an archive folder grows by a batch per pass)."""
SERIAL_CACHE_LIMIT = 8
"""A pass patches the one or two large folders it appends to; a 10,000-entry tree holds about 1.5 MB here."""


def tree_entries_from_data(data: bytes) -> Iterator[tuple[bytes, int, str]]:
    """(sha, mode, name) of each entry of a tree object's data (``<octal mode> <name>\\0<20-byte sha>``, in
    order), as GitPython's ``git.objects.fun.tree_entries_from_data`` reads them (a test holds them equal):
    importing that function imports all of GitPython, a sixth of a command's start (``memory status``, a
    hook), for a format of one line."""
    at, end = 0, len(data)
    while at < end:
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        yield data[nul + 1 : nul + 21], int(data[at:space], 8), data[space + 1 : nul].decode("utf-8", "surrogateescape")
        at = nul + 21


class GitStore:
    """A bare repository whose objects this process writes directly."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._repo: Repo | None = None
        self.odb = GitDB(str(git_dir / "objects"))
        self._trees: BoundedCache[str, Entries] = BoundedCache(TREE_CACHE_LIMIT)
        self._serials: BoundedCache[str, tuple[list[bytes], list[bytes]]] = BoundedCache(SERIAL_CACHE_LIMIT)
        self._local = threading.local()  # objects written per thread (the API serves from a pool)
        self._objects = str(git_dir / "objects")
        self._fanout: set[str] = set()  # object folders known to exist
        self._packs_seen = (0.0, self._packs_mtime())  # (when looked, objects/pack's mtime then)
        self._refreshing = threading.Lock()  # gitdb's pack list is not safe to update from two threads

    @property
    def repo(self) -> Repo:
        """GitPython's handle, for git's own commands (log, update-ref, gc) and refs: made when first asked for,
        so a command that only reads objects (``memory status``, a hook) never imports GitPython (a sixth of a
        command's start)."""
        if self._repo is None:
            from git import Repo

            self._repo = Repo(self.git_dir)
        return self._repo

    @classmethod
    def create(cls, git_dir: Path) -> GitStore:
        """Create the bare repository with durable settings and an empty first commit."""
        from git import Repo

        Repo.init(git_dir, bare=True, initial_branch="main")
        store = cls(git_dir)
        with store.repo.config_writer() as config:
            config.set_value("core", "fsync", "committed")
            config.set_value("core", "fsyncMethod", "fsync")
            config.set_value("core", "logAllRefUpdates", "true")
            config.set_value("gc", "auto", "0")
        commit = store.write_commit(EMPTY_TREE, None, "Initialize memory workspace")
        store.write_tree({})
        store.sync_objects()
        store.update_ref(commit, None)
        return store

    # -- reading -------------------------------------------------------------

    def head(self) -> str | None:
        """The commit ``main`` points at, or None before the first commit."""
        try:  # the loose ref (git update-ref renames it into place), else its line in packed-refs
            value = (self.git_dir / BRANCH_REF).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            value = self._packed_ref() or ""
        except (OSError, UnicodeDecodeError):
            value = ""
        if len(value) == 40 and all(c in "0123456789abcdef" for c in value):
            return value
        if not value:
            return None
        from git import SymbolicReference  # anything else (a symbolic ref): GitPython's reading

        try:
            return SymbolicReference.dereference_recursive(self.repo, BRANCH_REF)
        except (ValueError, OSError):
            return None

    def _packed_ref(self) -> str | None:
        try:
            lines = (self.git_dir / "packed-refs").read_text(encoding="ascii").splitlines()
        except (OSError, UnicodeDecodeError):
            return None
        suffix = f" {BRANCH_REF}"
        return next((line[: -len(suffix)] for line in lines if line.endswith(suffix) and line[:1] not in "#^"), None)

    def commit_tree(self, commit: str) -> str:
        data = self._read(commit, b"commit")
        first = data.split(b"\n", 1)[0]
        return first.split(b" ", 1)[1].decode()

    def commit_parent(self, commit: str) -> str | None:
        for line in self._read(commit, b"commit").split(b"\n\n", 1)[0].split(b"\n"):
            if line.startswith(b"parent "):
                return line.split(b" ", 1)[1].decode()
        return None

    def tree_entries(self, tree: str) -> Entries:
        """Name → (mode, sha) of one tree object (cached: objects are immutable)."""
        cached = self._trees.get(tree)
        if cached is None:
            data = self._read(tree, b"tree")
            cached = {name: (mode, sha.hex()) for sha, mode, name in tree_entries_from_data(data)}
            self._trees.put(tree, cached)
        return cached

    def lookup(self, tree: str, path: str) -> tuple[int, str] | None:
        """(mode, sha) of ``path`` inside ``tree``, or None."""
        current: tuple[int, str] | None = (MODE_DIR, tree)
        for part in path.split("/"):
            if current is None or current[0] != MODE_DIR:
                return None
            current = self.tree_entries(current[1]).get(part)
        return current

    def list_files(self, tree: str, prefix: str = "") -> dict[str, str]:
        """Every file below ``prefix`` in ``tree``: path → blob sha."""
        start = self.lookup(tree, prefix) if prefix else (MODE_DIR, tree)
        out: dict[str, str] = {}
        if start is None or start[0] != MODE_DIR:
            return out
        stack = [(prefix, start[1])]
        while stack:
            base, sha = stack.pop()
            for name, (mode, child) in self.tree_entries(sha).items():
                path = f"{base}/{name}" if base else name
                if mode == MODE_DIR:
                    stack.append((path, child))
                else:
                    out[path] = child
        return out

    def commits_changing(self, pattern: str, path: str) -> list[tuple[str, str, str]]:
        """(commit, ISO time, subject) of every commit on ``main`` that added or removed a line matching the
        extended regex ``pattern`` below ``path`` (``git log -G``), newest first."""
        # --no-renames: a line leaving one file for another (a record moved between topics) is a change.
        out = self.repo.git.log(
            "--no-renames", "-E", f"-G{pattern}", "--format=%H%x09%cI%x09%s", BRANCH_REF, "--", path
        )
        found = []
        for line in out.splitlines():
            commit, at, subject = line.split("\t", 2)
            found.append((commit, at, subject))
        return found

    def commits_saying(self, line: str) -> list[str]:
        """Commits on ``main`` whose message holds ``line`` as a whole line (a trailer), newest first."""
        out = self.repo.git.log("-F", f"--grep={line}", "--format=%H%x00%B%x01", BRANCH_REF)
        found = []
        for entry in out.split("\x01"):
            commit, _, body = entry.strip("\n").partition("\x00")
            if commit and line in body.splitlines():
                found.append(commit)
        return found

    def read_blob(self, sha: str) -> bytes:
        return self._read(sha, b"blob")

    def _read(self, sha: str, kind: bytes) -> bytes:
        held = self._pending().get(sha)
        if held is not None:  # written by this thread, not in a pack yet
            if held[0] != kind:
                raise ValueError(f"{sha} is a {held[0]!r}, not a {kind!r}")
            return held[1]
        if (now := time.monotonic()) >= self._packs_seen[0] + PACKS_CHECK_S:
            mtime = self._packs_mtime()
            if mtime != self._packs_seen[1]:
                self._refresh_packs()
            self._packs_seen = (now, mtime)
        binsha = bytes.fromhex(sha)
        for attempt in range(READ_ATTEMPTS):
            try:
                stream = self.odb.stream(binsha)
                data = bytes(stream.read())  # a pack's bytes are mapped as they are read: inside the retry
                break
            except (BadObject, OSError):
                # Repacked meanwhile (a background repack, a history purge's gc): the loose file went into a
                # new pack, or a pack this handle knew was rolled into another. Look at the packs again (a
                # pack renamed into place a moment before its index is complete at the next attempt).
                if attempt == READ_ATTEMPTS - 1:
                    raise
                self._refresh_packs()
                time.sleep(0.01 * attempt)
        if stream.type != kind:
            raise ValueError(f"{sha} is a {stream.type!r}, not a {kind!r}")
        return data

    def _refresh_packs(self) -> None:
        """Learn the packs on disk now, and unmap the ones removed (a long-running process would keep their
        disk space). A pack that comes or goes meanwhile is learnt at the next read that misses."""
        with self._refreshing:
            try:
                self.odb.update_cache(force=True)
            except OSError:
                return
            mman.collect()

    def _packs_mtime(self) -> int:
        try:
            return os.stat(f"{self._objects}/pack").st_mtime_ns
        except FileNotFoundError:
            return 0

    # -- writing -------------------------------------------------------------

    def _store(self, kind: bytes, data: bytes) -> str:
        raw = b"%s %d\0" % (kind, len(data)) + data
        sha = hashlib.sha1(raw).hexdigest()
        pending = self._pending()
        # Only this thread's held objects and the loose path are asked: an object that is packed already is
        # packed again, which git allows (a repack keeps one copy), and which costs less than asking the
        # packs every time.
        if sha not in pending and not os.path.exists(f"{self._objects}/{sha[:2]}/{sha[2:]}"):
            pending[sha] = (kind, data)
            self._local.held = getattr(self._local, "held", 0) + len(data)
            if self._local.held > PENDING_LIMIT:
                self._write_pack()
        return sha

    def _pending(self) -> dict[str, tuple[bytes, bytes]]:
        """The objects this thread wrote and has not put in a pack yet (ID → (kind, data))."""
        pending: dict[str, tuple[bytes, bytes]] | None = getattr(self._local, "pending", None)
        if pending is None:
            pending = self._local.pending = {}
        return pending

    def _write_pack(self) -> None:
        """Put this thread's held objects into one new pack: the pack and its index written under temporary
        names, then the index renamed into place before the pack (git and gitdb each find a pack by the file
        the other renames last, so neither meets half of one; a kill between the renames leaves an index
        without a pack, which both ignore). Not fsynced here: :meth:`sync_objects` makes them durable."""
        pending = self._pending()
        if not pending:
            return
        folder = f"{self._objects}/pack"
        if folder not in self._fanout:
            os.makedirs(folder, exist_ok=True)
            self._fanout.add(folder)
        pack_tmp, idx_tmp = temporary_pack(f"{folder}/{PACK_TEMP}{os.getpid()}-{threading.get_ident()}")
        objects = [
            OStream(bytes.fromhex(sha), kind, len(data), io.BytesIO(data)) for sha, (kind, data) in pending.items()
        ]
        try:
            with open(pack_tmp, "wb") as pack, open(idx_tmp, "wb") as index:
                pack_sha, _index_sha = PackEntity.write_pack(
                    objects, pack.write, index.write, object_count=len(objects), zlib_compression=1
                )
            name = f"{folder}/pack-{pack_sha.hex()}"
            os.chmod(pack_tmp, 0o400)  # read-only, and the state is private (as loose objects were)
            os.chmod(idx_tmp, 0o400)
            os.replace(idx_tmp, f"{name}.idx")
            os.replace(pack_tmp, f"{name}.pack")
        except BaseException:
            for leftover in (pack_tmp, idx_tmp):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)
            raise
        self._written().extend((f"{name}.pack", f"{name}.idx"))
        pending.clear()
        self._local.held = 0
        with self._refreshing:  # the next read of these objects finds the new pack
            self.odb.update_cache(force=True)

    def write_blob(self, data: bytes) -> str:
        return self._store(b"blob", data)

    def write_tree(self, entries: Mapping[str, tuple[int, str]]) -> str:
        # Git's tree format, written directly: a thread's archive folder holds one entry per message,
        # and this runs for it on every pass, so GitPython's per-entry path checks (names here were
        # validated when their paths were) would cost the square of a long import. A test checks the
        # bytes against ``tree_to_stream``.
        return self._write_tree(dict(entries))

    def _write_tree(
        self, entries: Entries, base: str | None = None, changed: set[str] | frozenset[str] = frozenset()
    ) -> str:
        """Write ``entries`` (owned: kept as the cache's copy). When they are ``base``'s entries with the
        names in ``changed`` changed, and ``base`` is a large tree serialized here before, its sorted
        serialization is patched instead of sorting and formatting every entry again."""
        serial = self._serials.get(base) if base is not None and len(entries) >= SERIAL_MIN_ENTRIES else None
        if serial is not None:
            old_entries = self.tree_entries(base) if base is not None else {}
            keys, pieces = list(serial[0]), list(serial[1])
            for name in changed:
                if (old := old_entries.get(name)) is not None:
                    index = bisect.bisect_left(keys, _entry_key(name, old[0]))
                    del keys[index], pieces[index]
                if (new := entries.get(name)) is not None:
                    key = _entry_key(name, new[0])
                    index = bisect.bisect_left(keys, key)
                    keys.insert(index, key)
                    pieces.insert(index, _entry_bytes(name, new))
        else:
            ordered = sorted(entries.items(), key=_sort_key)
            keys = [_entry_key(name, mode) for name, (mode, _sha) in ordered]
            pieces = [_entry_bytes(name, entry) for name, entry in ordered]
        sha = self._store(b"tree", b"".join(pieces))
        self._trees.put(sha, entries)
        if len(entries) >= SERIAL_MIN_ENTRIES:
            self._serials.put(sha, (keys, pieces))
        return sha

    def build_tree(self, base: str, changes: Mapping[str, bytes | None]) -> str:
        """Write the tree that is ``base`` with ``changes`` applied (None deletes)."""
        nested: dict[tuple[str, ...], bytes | None] = {tuple(p.split("/")): d for p, d in changes.items()}
        return self._build(base, nested) or self.write_tree({})

    def _build(self, tree: str | None, changes: dict[tuple[str, ...], bytes | None]) -> str | None:
        entries: Entries = dict(self.tree_entries(tree)) if tree else {}
        below: dict[str, dict[tuple[str, ...], bytes | None]] = {}
        changed: set[str] = set()
        for parts, data in changes.items():
            changed.add(parts[0])
            if len(parts) > 1:
                below.setdefault(parts[0], {})[parts[1:]] = data
            elif data is None:
                entries.pop(parts[0], None)
            else:
                entries[parts[0]] = (MODE_FILE, self.write_blob(data))
        for name, sub in below.items():
            current = entries.get(name)
            new = self._build(current[1] if current and current[0] == MODE_DIR else None, sub)
            if new is None:
                entries.pop(name, None)
            else:
                entries[name] = (MODE_DIR, new)
        return self._write_tree(entries, tree, changed) if entries else None

    def write_commit(self, tree: str, parent: str | None, message: str, when: float | None = None) -> str:
        stamp = int(time.time() if when is None else when)
        ident = f"{GIT_AUTHOR_NAME} <{GIT_AUTHOR_EMAIL}> {stamp} +0000"
        lines = [f"tree {tree}"] + ([f"parent {parent}"] if parent else [])
        lines += [f"author {ident}", f"committer {ident}", "", message.rstrip("\n"), ""]
        return self._store(b"commit", "\n".join(lines).encode("utf-8"))

    def _written(self) -> list[str]:
        """The pack files this thread wrote since its last :meth:`sync_objects`."""
        written: list[str] | None = getattr(self._local, "written", None)
        if written is None:
            written = self._local.written = []
        return written

    def drop_caches(self) -> None:
        """Forget what was learnt of the object store (after a gc repacked and pruned it)."""
        self._trees = BoundedCache(TREE_CACHE_LIMIT)
        self._serials = BoundedCache(SERIAL_CACHE_LIMIT)
        self._fanout = set()
        self._refresh_packs()

    def sync_objects(self) -> None:
        """Make every object this thread wrote since its last call durable: its held objects into a pack,
        then one barrier for the packs it wrote."""
        self._write_pack()
        written = self._written()
        if written:
            # A pack a background repack rolled up meanwhile is gone: the pack holding its objects was made
            # durable before it was removed.
            sync_filesystem(self.git_dir / "objects", [Path(path) for path in written], missing_ok=True)
        written.clear()

    def update_ref(self, new: str, expected_old: str | None) -> None:
        """Move ``main`` to ``new`` only if it still points at ``expected_old``.

        Raises GitCommitFailed when git refuses (the ref moved, a lock is held, I/O).
        """
        from git.exc import GitCommandError

        old = expected_old or "0" * 40
        self._write_pack()  # git reads the commit: what this thread holds goes into a pack first
        try:
            self.repo.git.update_ref("-m", "scriptorium transaction", BRANCH_REF, new, old)
        except (GitCommandError, OSError, subprocess.SubprocessError) as exc:
            raise GitCommitFailed(f"git refused to move {BRANCH_REF} to {new}: {exc}") from exc

    def remove_abandoned_packs(self) -> int:
        """Remove what a writer killed while writing a pack left (call under the workspace lock): temporary
        files whose process is gone, and an index renamed into place without its pack (killed between the
        two renames: its objects were never referenced). Returns how many files went."""
        folder = Path(self._objects) / "pack"
        try:
            names = set(os.listdir(folder))
        except FileNotFoundError:
            return 0
        doomed = [
            name
            for name in names
            if (name.startswith(PACK_TEMP) and not owner_alive(name[len(PACK_TEMP) :]))
            or (name.startswith("pack-") and name.endswith(".idx") and f"{name[:-4]}.pack" not in names)
        ]
        for name in doomed:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)
        return len(doomed)

    def remove_stale_locks(self) -> list[str]:
        """Delete git ``*.lock`` files left by a killed process (call under the workspace lock)."""
        removed: list[str] = []
        candidates = [self.git_dir / name for name in ("HEAD.lock", "index.lock", "packed-refs.lock", "config.lock")]
        candidates += list((self.git_dir / "refs").rglob("*.lock"))
        for path in candidates:
            if path.exists():
                path.unlink()
                removed.append(str(path.relative_to(self.git_dir)))
        return removed

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()
