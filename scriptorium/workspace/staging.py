"""The staging copy a transaction's editor works on, under the system temp dir.

``topics/`` is writable. ``sources/`` holds copies of only the sources this
pass archived or cites (files 0444, folders 0555), so a non-root process is
refused by the filesystem and the archive size never enters the cost. With
``materialize=True`` (:data:`REAL_TREE`) every topic is copied, for tools that need a real tree
(an external editor, a shell writer); otherwise topics are read through to
the installed files and copied on write.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from scriptorium.errors import InvalidPath, NotFound, ReasonCode, ValidationRejected
from scriptorium.workspace.paths import SOURCES, TOPICS, check_topic_path

STAGING_PREFIX = "scriptorium-staging-"
MAX_TOPIC_BYTES = 4 * 1024 * 1024

Signature = tuple[int, int, int]


def _signature(st: os.stat_result) -> Signature:
    return (st.st_size, st.st_mtime_ns, st.st_ino)


ORGANIZER_OWNER = "organizer"
"""The owner part of an organizer's folder (:func:`scriptorium.writers.agent.topic_folder`)."""
_OWNED = re.compile(rf"^{re.escape(STAGING_PREFIX)}(?P<owner>[0-9a-f]{{12}}|{ORGANIZER_OWNER})-(?P<pid>\d+)-")


def staging_prefix(workspace_id: str) -> str:
    return f"{STAGING_PREFIX}{workspace_id}-"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs; a zombie (killed, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    try:  # Linux: the state after the command's closing parenthesis
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


@dataclass(frozen=True, slots=True)
class StagingSweep:
    """What one sweep of the temporary folder found."""

    removed: int
    """Orphans removed: folders whose owning process is gone."""
    live: int
    """Folders of processes still running (a pass in progress): never touched."""


def sweep_orphans(tmpdir: Path | None = None) -> StagingSweep:
    """Remove every staging folder on this host whose owning process is gone.

    A folder's name says whose it is: ``scriptorium-staging-<workspace id | organizer>-<pid>-…``. A pool
    child killed during a model call leaves its folder behind (a copy of the topics); long-running
    workers call this periodically, not only when a workspace is opened. Folders of live processes —
    passes in progress, this one's included — are counted and left alone.
    """
    removed = live = 0
    for entry in list((tmpdir or Path(tempfile.gettempdir())).glob(f"{STAGING_PREFIX}*")):
        match = _OWNED.match(entry.name)
        if match is None or not entry.is_dir():
            continue
        if pid_alive(int(match["pid"])):
            live += 1
            continue
        # Claimed first, by a rename only one sweep can make (every workspace open and every worker's pool child
        # sweeps the host's temporary folder, and two may find one orphan): the claim names this process, so
        # a sweep that dies while removing it leaves a folder the next sweep takes.
        claimed = entry.with_name(f"{STAGING_PREFIX}{match['owner']}-{os.getpid()}-swept-{entry.name[match.end() :]}")
        try:
            entry.rename(claimed)
        except OSError:  # another sweep claimed it first, or it is not ours to move
            continue
        remove_tree(claimed)
        removed += 1
    return StagingSweep(removed, live)


@dataclass(frozen=True, slots=True)
class StagingOptions:
    """How a transaction lays out the staging folder its edit works in."""

    materialize: bool = False
    """Every topic copied in as a real file (a patch applied with git, a process that edits the folder itself);
    otherwise topics are read through to the installed files and copied on write."""
    show_sources: bool = True
    """Read-only copies of the sources the transaction appends, for the edit to read (a writer handed the
    batch's text through the topic API needs none)."""


READ_THROUGH = StagingOptions()
"""The default layout: topics read through and copied on write, the appended sources copied in."""
REAL_TREE = StagingOptions(materialize=True)
"""Every topic a real file, and the appended sources beside them (a patch, an agent CLI's write pass)."""
TOPIC_API = StagingOptions(show_sources=False)
"""A write pass whose writer works through the topic API with its batch's text: no source copied in."""


class Staging:
    """A writable copy of ``topics/`` and a read-only copy of the pass's sources."""

    def __init__(
        self,
        workspace_root: Path,
        workspace_id: str,
        topic_paths: Iterable[str],
        source_paths: Iterable[str] = (),
        materialize: bool = False,
        source_file: Callable[[str], str] | None = None,
    ) -> None:
        """``source_file``: the archive file holding a source (its own in layout 2, its conversation's in
        layout 3): what is copied in for each of ``source_paths``."""
        self._live = workspace_root
        self._baseline = set(topic_paths)
        self.baseline_shas: Mapping[str, str] = topic_paths if isinstance(topic_paths, Mapping) else {}
        """The installed blob of each topic the staging started from (when the caller gave them)."""
        self.root = Path(tempfile.mkdtemp(prefix=f"{staging_prefix(workspace_id)}{os.getpid()}-"))
        self.topics_dir = self.root / TOPICS
        self.topics_dir.mkdir()
        self._copied: dict[str, Signature] = {}
        self._tombstones: set[str] = set()
        self._staged_sources: dict[str, bytes] = {}
        """Each source file staged → its bytes: the writer's copy must still hold exactly these at the end."""
        self.materialized = materialize
        """Every topic is a real file here (for a process that edits the folder itself)."""
        try:
            if materialize:
                for path in sorted(self._baseline):
                    self._copy_in(path)
            self._stage_sources(source_paths, source_file or (lambda key: key))
        except BaseException:
            self.cleanup()
            raise

    # -- editor API ------------------------------------------------------------

    def list_topics(self) -> list[str]:
        """Topic paths currently in the staged tree."""
        present = {p for p in self._baseline if p not in self._tombstones}
        present.update(self._walk_topics())
        present.difference_update(p for p in self._copied if not (self.root / p).exists())
        return sorted(present)

    def read(self, path: str) -> str:
        path = check_topic_path(path)
        staged = self.root / path
        if staged.is_file():
            return staged.read_text(encoding="utf-8")
        if path in self._tombstones or path not in self._baseline or path in self._copied:
            raise NotFound(f"no topic at {path}", path=path)
        return (self._live / path).read_text(encoding="utf-8")

    def exists(self, path: str) -> bool:
        try:
            self.read(path)
        except NotFound:
            return False
        return True

    def write(self, path: str, text: str) -> None:
        path = check_topic_path(path)
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        self._tombstones.discard(path)

    def delete(self, path: str) -> None:
        path = check_topic_path(path)
        staged = self.root / path
        existed = staged.exists() or (path in self._baseline and path not in self._tombstones)
        if not existed:
            raise NotFound(f"no topic at {path}", path=path)
        staged.unlink(missing_ok=True)
        if path in self._baseline:
            self._tombstones.add(path)

    def move(self, src: str, dst: str) -> None:
        text = self.read(src)
        check_topic_path(dst)
        self.delete(src)
        self.write(dst, text)

    def staged_topics(self) -> set[str]:
        """The topics written, moved or deleted in this staging so far (not those copied in and left alone):
        what a phase after the writer's looks at, without reading the others."""
        written = {p for p in self._walk_topics() if self._copied.get(p) != _signature((self.root / p).lstat())}
        gone = {p for p in self._copied if not (self.root / p).exists()}
        return written | gone | self._tombstones

    def baseline_text(self, path: str) -> str | None:
        """The installed text of a topic the staging started from (None: it had none)."""
        if path not in self._baseline:
            return None
        return (self._live / path).read_text(encoding="utf-8")

    # -- collection ------------------------------------------------------------

    def collect(self) -> dict[str, bytes | None]:
        """Raw staged changes to topics: path → new bytes, or None when deleted.

        Raises InvalidPath for symlinks, hard links, devices, non-topic files and
        anything written beside ``topics/`` and ``sources/``, and
        ValidationRejected(SOURCES_MODIFIED) when the staged sources changed.
        """
        check_root(self.root, (TOPICS, SOURCES))
        self._check_sources()
        changes: dict[str, bytes | None] = {}
        for path in self._walk_topics():
            full = self.root / path
            st = full.lstat()
            if self._copied.get(path) == _signature(st):
                continue
            if st.st_size > MAX_TOPIC_BYTES:
                raise InvalidPath(f"{path} is larger than {MAX_TOPIC_BYTES} bytes", path=path)
            changes[path] = full.read_bytes()
        for path in self._copied:
            if not (self.root / path).exists():
                changes[path] = None
        for path in self._tombstones:
            changes.setdefault(path, None)
        return changes

    def _walk_topics(self) -> list[str]:
        return walk_topic_files(self.root)

    def _copy_in(self, path: str) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._live / path, target)
        # File times are coarse (a few ms): pin the copy's mtime far in the past so that any
        # later write, even of the same size within the same tick, changes the signature.
        os.utime(target, ns=(1, 1))
        self._copied[path] = _signature(target.lstat())

    # -- sources ---------------------------------------------------------------

    def _stage_sources(self, source_paths: Iterable[str], source_file: Callable[[str], str]) -> None:
        folders: set[Path] = set()
        for key, path in {key: source_file(key) for key in source_paths}.items():
            if path in self._staged_sources:
                continue
            try:
                data = (self._live / path).read_bytes()
            except FileNotFoundError:
                raise source_not_archived(key) from None
            target = self.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            os.chmod(target, 0o400)
            self._staged_sources[path] = data
            folder = target.parent
            while folder != self.root:
                folders.add(folder)
                folder = folder.parent
        for folder in folders:
            os.chmod(folder, 0o500)

    def _check_sources(self) -> None:
        seen: dict[str, bytes] = {}
        sources_dir = self.root / SOURCES
        if sources_dir.exists() or self._staged_sources:
            for dirpath, _dirs, filenames in os.walk(sources_dir):
                for name in filenames:
                    full = Path(dirpath) / name
                    seen[full.relative_to(self.root).as_posix()] = full.read_bytes()
        if seen != self._staged_sources:  # compared byte for byte (a memcmp: faster than hashing them twice)
            staged = self._staged_sources
            changed = sorted(path for path in seen.keys() | staged.keys() if seen.get(path) != staged.get(path))
            raise ValidationRejected(
                "the staged source archive was modified",
                reason=ReasonCode.SOURCES_MODIFIED,
                guidance="sources/ is append-only: never create, edit or delete files there; edit topics/ only.",
                rejected_text="\n".join(changed),
            )

    def cleanup(self) -> None:
        remove_tree(self.root)


def source_not_archived(path: str) -> ValidationRejected:
    """The refusal of a pass that names (or a change that cites) a source file the archive does not hold."""
    return ValidationRejected(
        f"source {path} is not in the archive",
        reason=ReasonCode.INVALID_SOURCE,
        guidance="Cite only archived sources.",
        rejected_text=path,
    )


def walk_topic_files(root: Path) -> list[str]:
    """The topic paths under ``root/topics`` (each checked); InvalidPath for symlinks, hard links and devices."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root / TOPICS):
        base = Path(dirpath)
        for name in dirnames:
            if (base / name).is_symlink():
                raise InvalidPath("symlinks are not allowed in topics/", path=str((base / name).relative_to(root)))
        for name in filenames:
            full = base / name
            rel = full.relative_to(root).as_posix()
            st = full.lstat()
            if stat.S_ISLNK(st.st_mode):
                raise InvalidPath("symlinks are not allowed in topics/", path=rel)
            if not stat.S_ISREG(st.st_mode):
                raise InvalidPath("only regular files are allowed in topics/", path=rel)
            if st.st_nlink > 1:
                raise InvalidPath("hard links are not allowed in topics/", path=rel)
            found.append(check_topic_path(rel))
    return found


def check_root(root: Path, allowed: tuple[str, ...]) -> None:
    """InvalidPath when a staging folder holds anything at its top beside ``allowed``: an editor that wrote
    outside ``topics/`` made an edit the runtime will not take, whatever it was."""
    extra = sorted(entry.name for entry in os.scandir(root) if entry.name not in allowed)
    if extra:
        raise InvalidPath(
            f"the edit wrote outside topics/: {', '.join(extra)}",
            path=extra[0],
            guidance="Create, edit, move and delete files under topics/ only; write nothing anywhere else.",
        )


def remove_tree(root: Path) -> None:
    """Remove a staging tree, read-only folders included. Another process may be removing the same tree (two
    processes sweep one orphan: every workspace open and every worker's pool child sweeps the host's temporary
    folder), or hold a folder this one may not change: what is gone or cannot be changed is left to it, never
    raised — a sweep is housekeeping, and a pass or a command must not fail for it."""
    for dirpath, _dirs, _files in os.walk(root):  # a root already gone yields nothing
        with contextlib.suppress(OSError):  # gone since it was listed, or not ours to change
            os.chmod(dirpath, 0o700)
    shutil.rmtree(root, ignore_errors=True)


class TopicView:
    """Only the topic operations of a staging copy: what a restricted phase (the organizer) gets.

    It has no path to the staging root, so it cannot reach the staged sources.
    """

    def __init__(self, stage: Staging) -> None:
        self._stage = stage

    def list_topics(self) -> list[str]:
        return self._stage.list_topics()

    def read(self, path: str) -> str:
        return self._stage.read(path)

    def exists(self, path: str) -> bool:
        return self._stage.exists(path)

    def write(self, path: str, text: str) -> None:
        self._stage.write(path, text)

    def delete(self, path: str) -> None:
        self._stage.delete(path)

    def move(self, src: str, dst: str) -> None:
        self._stage.move(src, dst)
