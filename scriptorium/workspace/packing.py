"""Packing the memory's git objects as they accumulate, off every caller's path.

:class:`~scriptorium.workspace.gitstore.GitStore` writes the objects of each install as one small pack, and
git never rolls packs (or loose objects another tool left) up by itself (``gc.auto`` is 0 in the workspace:
git's own foreground gc would stall the install that set it off). So after each install the workspace counts
the packs (one ``listdir`` of ``objects/pack``) and estimates its loose objects the way ``git gc --auto``
does — the entries of one fan-out folder (``objects/17``) × 256, a single small ``listdir`` — and past
:data:`PACK_LIMIT` packs or the loose threshold (``SCRIPTORIUM_REPACK_LOOSE_OBJECTS``) starts
``git repack -d --geometric=2`` in a detached process and returns at once (the process runs it again while
installs made meanwhile left the packs past the limit, up to :data:`REPACK_ROUNDS` times):

* nothing waits for it: a prompt hook, a REST answer, a write pass or ``scriptorium ingest`` returns while
  it runs, in whichever process installed (the embedded write service, a Celery worker, the CLI), and it
  outlives that process;
* one at a time per repository: the starter takes :data:`LOCK_FILE` (a ``flock``) and hands the locked
  file to git, which holds it until it exits; a process finding it held starts nothing. A history purge's
  gc takes the same lock (:func:`holding_lock`);
* concurrent readers and writers keep working: git writes the new pack (fsynced, ``core.fsync``) and its
  index before ``-d`` removes the loose copies and the packs it rolled up, and it never removes an object
  no pack holds: the geometric roll-up packs every loose object, reachable or not (an install's objects
  before its commit is on ``main``), so an unreachable one never keeps the estimate over the threshold.
  A reader that misses an object looks at the packs again (``GitStore._read``);
* the packs stay few: ``--geometric=2`` rolls small packs into the next larger one so that each is at least
  twice the size of the next smaller one (a logarithmic number of packs, each object repacked a
  logarithmic number of times), deltas found inside each pack — a flat tree rewritten by every commit
  costs a few bytes per version instead of a file each.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scriptorium.logs import get_logger

log = get_logger(__name__)

LOCK_FILE = "scriptorium-repack.lock"
"""In the git folder: held (``flock``) by the one repack of this repository running, whichever process."""
LOG_FILE = "scriptorium-repack.log"
"""In the git folder: the last repack's error output (empty when it went well)."""
REPACK_ARGS = (
    *("-c", "pack.threads=1", "-c", "core.fsync=committed,pack-metadata"),
    *("repack", "-d", "-q", "--geometric=2"),
)
"""One thread: a background repack never takes every core from the runtime the user is waiting on. Each new
pack and its index are fsynced before the loose objects they replace are removed."""
RETRY_AFTER_S = 60.0
"""A repack is not started again within this long of one that failed (its errors in :data:`LOG_FILE`,
whichever process started it): a repository git cannot repack does not turn every install into a repack."""
PACK_LIMIT = 24
"""Past this many packs an install starts the background repack too, whatever the loose objects: each
install writes its objects as a pack of its own, and a read looks in every pack until one holds the object
(git's own ``gc.autoPackLimit`` is 50)."""
SAMPLE_FOLDER = "17"
"""The fan-out folder git's own estimate counts (``gc.auto``)."""
_HEX = frozenset("0123456789abcdef")


def loose_estimate(objects: Path, folders: int = 1) -> int:
    """About how many loose objects ``objects`` holds: the entries of ``folders`` of its 256 fan-out folders
    (git's ``objects/17`` first, then evenly spread ones), scaled to all 256. Object IDs are uniform hashes,
    so one folder estimates within a few tens of percent at git's thresholds."""
    names = [SAMPLE_FOLDER] + [f"{(i * 256) // folders:02x}" for i in range(1, folders)]
    found = 0
    for name in names:
        try:
            entries = os.listdir(objects / name)
        except FileNotFoundError:
            continue
        found += sum(1 for entry in entries if len(entry) == 38 and _HEX.issuperset(entry))
    return found * 256 // len(names)


def pack_count(objects: Path) -> int:
    """The packs in ``objects/pack`` (one ``listdir``): each install adds one
    (:meth:`~scriptorium.workspace.gitstore.GitStore.sync_objects`)."""
    try:
        return sum(1 for name in os.listdir(objects / "pack") if name.endswith(".pack"))
    except FileNotFoundError:
        return 0


@dataclass(frozen=True, slots=True)
class PackState:
    """What ``memory status`` says of the repository's objects (read without git, in about a millisecond)."""

    loose_estimate: int
    """Loose objects, estimated from 16 fan-out folders of 256."""
    packs: int
    packed_objects: int
    packed_bytes: int
    repacking: bool
    """A repack of this repository is running (its lock is held)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "loose_objects_estimate": self.loose_estimate,
            "packs": self.packs,
            "packed_objects": self.packed_objects,
            "packed_kib": self.packed_bytes // 1024,
            "repacking": self.repacking,
        }


def pack_state(git_dir: Path) -> PackState:
    """The repository's loose and packed state: packs counted from ``objects/pack``, their objects read from
    each index's header (its fan-out table's last entry), loose objects estimated."""
    objects = git_dir / "objects"
    packs = packed = size = 0
    try:
        names = os.listdir(objects / "pack")
    except FileNotFoundError:
        names = []
    for name in names:
        if not name.endswith(".pack"):
            continue
        try:
            size += os.stat(objects / "pack" / name).st_size
            with open(objects / "pack" / (name[:-5] + ".idx"), "rb") as index:
                head = index.read(8 + 256 * 4)
        except FileNotFoundError:  # removed by a repack meanwhile, or its index not renamed into place yet
            continue
        packs += 1
        if head[:4] == b"\377tOc" and len(head) == 8 + 1024:  # version 2: magic, version, fan-out
            packed += struct.unpack(">I", head[-4:])[0]
        elif len(head) >= 1024:  # version 1: the fan-out table alone
            packed += struct.unpack(">I", head[1020:1024])[0]
    return PackState(loose_estimate(objects, folders=16), packs, packed, size, is_repacking(git_dir))


def is_repacking(git_dir: Path) -> bool:
    """Whether a repack of ``git_dir`` holds its lock now."""
    try:
        fd = _try_lock(git_dir, create=False)
    except FileNotFoundError:  # no repack ever started
        return False
    if fd is None:
        return True
    os.close(fd)
    return False


def _try_lock(git_dir: Path, create: bool = True) -> int | None:
    """An open descriptor holding the repack lock, or None when another holds it."""
    flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    fd = os.open(git_dir / LOCK_FILE, flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextmanager
def holding_lock(git_dir: Path) -> Iterator[None]:
    """Hold the repack lock (waiting for a running repack to end): for a gc of the caller's own."""
    fd = os.open(git_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


REPACK_ROUNDS = 3
"""At most this many ``git repack`` runs a background repack makes: again while the packs are over
:data:`PACK_LIMIT` (installs went on writing packs while the last one ran)."""

_RUNNER = """
import os, subprocess, sys
git_dir, log, limit, rounds, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
for _ in range(rounds):
    done = subprocess.run(["git", "--git-dir=" + git_dir, *args], stdin=subprocess.DEVNULL, capture_output=True)
    if done.returncode != 0:
        with open(log, "wb") as out:
            out.write(done.stderr or b"git repack exited with status %d" % done.returncode)
        sys.exit(1)
    if sum(name.endswith(".pack") for name in os.listdir(os.path.join(git_dir, "objects", "pack"))) <= limit:
        break
"""
"""The background repack's process (``python -c``, importing nothing of Scriptorium): ``git repack`` until the
packs are within the limit (at most :data:`REPACK_ROUNDS` runs); a failed run's errors in :data:`LOG_FILE`, and
nothing there otherwise (git's warnings on a run that went well are no failure)."""


def start_repack(git_dir: Path) -> subprocess.Popen[bytes] | None:
    """Start a detached repack of ``git_dir`` (:data:`_RUNNER`) holding the repack lock, or None when one runs
    already.

    The lock is taken here, then handed to the repack's process (the same open file, inherited): it stays held
    until that process exits, whether or not this one lives that long."""
    fd = _try_lock(git_dir)
    if fd is None:
        return None
    try:
        log = git_dir / LOG_FILE
        os.close(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600))  # this run's errors only
        return subprocess.Popen(
            [sys.executable, "-c", _RUNNER, str(git_dir), str(log), str(PACK_LIMIT), str(REPACK_ROUNDS), *REPACK_ARGS],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(fd,),
            start_new_session=True,  # a signal to the caller's process group does not reach it
        )
    finally:
        os.close(fd)  # the child's copy keeps the lock


def _failed_recently(git_dir: Path) -> bool:
    """Whether the last repack failed (its errors written) less than :data:`RETRY_AFTER_S` ago."""
    try:
        log_file = os.stat(git_dir / LOG_FILE)
    except FileNotFoundError:
        return False
    return log_file.st_size > 0 and time.time() - log_file.st_mtime < RETRY_AFTER_S


def repack_now(git_dir: Path) -> None:
    """Repack ``git_dir`` in this thread, as the background repack does (waiting for a running one first)."""
    with holding_lock(git_dir):
        subprocess.run(["git", f"--git-dir={git_dir}", *REPACK_ARGS], check=True, capture_output=True)


class Packer:
    """Starts a background repack of one repository when its loose objects pass ``threshold`` (0: never)."""

    def __init__(self, git_dir: Path, threshold: int) -> None:
        self.git_dir = git_dir
        self.threshold = threshold
        self._objects = git_dir / "objects"
        self._children: list[subprocess.Popen[bytes]] = []

    def after_install(self) -> bool:
        """Start a repack if one is due and none runs (a ``listdir`` of one small folder when none is due);
        True when it started one. Never waits for it."""
        if self.threshold <= 0:
            return False
        self._children = [child for child in self._children if child.poll() is None]  # reaps those that ended
        estimate = loose_estimate(self._objects)
        packs = pack_count(self._objects)
        if (estimate <= self.threshold and packs <= PACK_LIMIT) or _failed_recently(self.git_dir):
            return False
        try:
            child = start_repack(self.git_dir)  # None while one runs, whichever process started it
        except OSError as exc:  # no git, no descriptors left: the next install tries again
            log.warning("workspace.repack_not_started", error=str(exc))
            return False
        if child is None:
            return False
        self._children.append(child)
        log.info("workspace.repack_started", loose_estimate=estimate, packs=packs, pid=child.pid)
        return True
