"""Each workspace's replica on a second worker host, and promoting it when the holder is down.

* **Send** (the holder, after a task ran a pass: :func:`send_soon`, then :func:`send_new_commits` in a task of
  its own, so that no pass waits for git): at most one send per workspace per
  ``SCRIPTORIUM_REPLICA_SEND_INTERVAL_S`` — a pass an interval after the last send is sent at once, with
  every commit since; one within the interval is noted as not sent (the replica shows behind), so that under
  load a workspace costs one send per interval rather than one per pass. When no pass follows, the beat's
  sweep sends the rest (a replica behind for more than :data:`RESEND_AFTER_S`). No task waits with a
  countdown: a worker holding one would hold other tasks too, and a SIGKILLed worker's held tasks wait for
  the visibility timeout. When ``main`` has moved
  past what the replica was sent, and no send is in flight (one that is not applied within
  :data:`RESEND_AFTER_S` counts as lost), a git bundle of the new commits (from the commit the replica has applied,
  or the whole history for a new replica) and the workspace's runtime files (``.scriptorium``: install state,
  workspace ID, fence, writer history, proposals; not caches, staging or locks) are left in Redis and the
  replica host is sent ``scriptorium.replicate``. The placement record's ``replicas`` entry says what was sent.
* **Apply** (the replica host: :func:`apply`): under a file lock of its own, the bundle is fetched into the
  replica's repository, ``main`` and the installed files moved to the new commit (``git read-tree -u``), the
  runtime files replaced, and the copy verified like a moved one (the revision; every file the new commits
  changed on disk as the revision has it — every file, for a new replica and on promotion).
  A commit older than the one applied is skipped (sends can arrive out of order); a bundle whose base the
  replica lacks asks for the whole history next time. When the holder's ``main`` moved on while this send was
  in flight (the record's ``head``), the replica asks the holder for the rest (``scriptorium.replicate_request``):
  under load, sends coalesce instead of queueing one per pass. The record's ``applied`` says what the replica holds;
  ``sent`` ≠ ``applied`` is its lag, which ``scriptorium placement`` shows.
* **Promote** (``scriptorium move W HOST --from-replica``, the holder down: :func:`promote`): under the
  workspace's fenced lock (fencing out the old holder, should it be paused rather than dead), the replica is
  verified and renamed into place, and every marker naming an install the replica lacks is dropped
  (``unmark_written_except``): the turns those installs wrote are pending again, and each of their sessions
  is sent a forced write. Nothing the replica missed is lost; it is written again, here.

Replication is asynchronous: it never holds up a pass, and what a dead holder installed but did not send is
written again on promotion rather than copied.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
from redis.exceptions import RedisError

from scriptorium.errors import ReasonCode
from scriptorium.fsutil import fsync_dir
from scriptorium.producers.placement import MOVE_KEEP_S, Placement, queue_of
from scriptorium.schemas.events import SessionIdle
from scriptorium.workers.handling import WorkerRuntime, send_again
from scriptorium.workers.moving import current_move, put_aside, record_failure, send_step, verified, workspace_lock
from scriptorium.workspace.lock import FileLock
from scriptorium.writing.handover import serve_handovers

log = structlog.get_logger(__name__)

RESEND_AFTER_S = 30.0
"""A send not applied after this long is taken as lost, and the next pass sends again."""
TRANSIENT = frozenset({"cache", "txn", "lock", "journal.json", "purge.json"})
"""What of ``.scriptorium`` is not replicated: rebuilt caches, a transaction's staging, lock files, and the
journals of an operation under way (the replica is sent the state after it)."""
BRANCH = "refs/heads/main"


def _git(folder: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=check)
    return done.stdout.strip()


def _head(memory: Path) -> str:
    """The commit ``main`` names ("" when none): its loose ref read at once (git replaces it by a rename, so it
    is read whole), else git's own answer (a packed ref)."""
    try:
        loose = (memory / ".git" / BRANCH).read_text().strip()
    except OSError:
        loose = ""
    if len(loose) == 40 and all(c in "0123456789abcdef" for c in loose):
        return loose
    return _git(memory, "rev-parse", "-q", "--verify", BRANCH, check=False)


def _key(rt: WorkerRuntime, workspace: str, commit: str) -> str:
    return f"{rt.settings.redis_prefix}replica:{workspace}:{commit}"


def pack_runtime(memory: Path) -> bytes:
    """The workspace's runtime files worth keeping (``.scriptorium`` without :data:`TRANSIENT`), gzipped."""
    buffer = io.BytesIO()
    runtime = memory / ".scriptorium"
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        for entry in sorted(runtime.iterdir()):
            if entry.name not in TRANSIENT:
                archive.add(entry, arcname=entry.name)
    return buffer.getvalue()


def _due_key(rt: WorkerRuntime, workspace: str) -> str:
    """Marks a send due from this host (a host's own: a workspace moved here sends whatever the host it left
    had due)."""
    return f"{rt.settings.redis_prefix}replica-due:{workspace}:{rt.settings.worker_host}"


def _throttled(rt: WorkerRuntime, placement: Placement, workspace: str) -> bool:
    """Whether the last send to ``workspace``'s replica went out less than an interval ago; if so, main's
    commit is noted as not sent (the replica shows behind, and the next send carries it)."""
    replica = placement.replica_of(workspace)
    if replica is None or time.time() - replica.sent_at >= rt.settings.replica_send_interval_s:
        return False
    head = _head(rt.settings.workspace_state(workspace) / "memory")
    if head and head not in (replica.sent, replica.head):
        placement.note_replica(workspace, head=head)
    return True


def send_soon(rt: WorkerRuntime, workspace: str) -> bool:
    """After a pass on this host: ask this host's queue to send the replica what is new, unless the last send
    is less than an interval old (the first pass after it sends this pass's commit too; when no pass comes,
    the sweep does) or a send is asked for already. Whether one was asked for. Never raises: a pass is done
    whatever becomes of its replication."""
    host = rt.settings.worker_host
    if not host or rt.send is None:
        return False
    try:
        placement = Placement(rt.redis, rt.settings.redis_prefix)
        # The mark outlives a lost request by the resend time at most: a pass after it asks again.
        if _throttled(rt, placement, workspace) or not rt.redis.set(
            _due_key(rt, workspace), host, nx=True, ex=int(RESEND_AFTER_S)
        ):
            return False
        rt.send("scriptorium.replicate_request", args=[{"workspace": workspace}], queue=queue_of(host))
    except (RedisError, OSError) as exc:
        log.warning("replica.send_not_asked", workspace=workspace, error=str(exc))
        return False
    return True


def send_due(rt: WorkerRuntime, workspace: str, now: bool = False) -> str | None:
    """A send asked for (after a pass, by the replica for the rest, or by a catch-up: ``now``, whatever the
    interval): clear the mark first, so a pass from now on asks again, then send what is new."""
    try:
        rt.redis.delete(_due_key(rt, workspace))
        if not now and _throttled(rt, Placement(rt.redis, rt.settings.redis_prefix), workspace):
            return None
    except RedisError as exc:
        log.warning("replica.send_failed", workspace=workspace, error=str(exc))
        return None
    return send_new_commits(rt, workspace)


def send_new_commits(rt: WorkerRuntime, workspace: str) -> str | None:
    """The holder's side, after a task ran a pass here: send the replica what it lacks. The commit sent, or
    None (nothing new, no other host live, or no workspace here). Never raises: a send that fails is retried
    by the next pass, and the replica's lag shows it meanwhile."""
    host = rt.settings.worker_host
    memory = rt.settings.workspace_state(workspace) / "memory"
    if not host or not (memory / ".git").is_dir():
        return None
    placement = Placement(rt.redis, rt.settings.redis_prefix)
    try:
        replica = placement.choose_replica(workspace, host)
        head = _head(memory)
        if replica is None or not head or replica.sent == head:
            return None
        if replica.sent != replica.applied and time.time() - replica.sent_at < RESEND_AFTER_S:
            # One send in flight at a time: the replica asks for the rest once it has applied this one.
            placement.note_replica(workspace, head=head)
            return None
        for _attempt in range(3):  # the runtime files of exactly this commit: read again if a pass moved main
            runtime = pack_runtime(memory)
            if _head(memory) == head:
                break
            head = _head(memory)
        with tempfile.TemporaryDirectory(prefix="scriptorium-bundle-") as scratch:
            bundle = Path(scratch) / "new.bundle"
            base = replica.applied if replica.applied and replica.applied != head else ""
            _git(memory, "bundle", "create", "-q", str(bundle), BRANCH, *([f"^{base}"] if base else []))
            packed = bundle.read_bytes()
        key = _key(rt, workspace, head)
        with rt.redis.pipeline() as pipe:
            pipe.set(f"{key}:bundle", packed, ex=MOVE_KEEP_S)
            pipe.set(f"{key}:runtime", runtime, ex=MOVE_KEEP_S)
            pipe.execute()
        placement.note_replica(workspace, sent=head, sent_at=time.time(), head="")
        if rt.send is not None:
            payload = {"workspace": workspace, "commit": head, "base": base}
            rt.send("scriptorium.replicate", args=[payload], queue=queue_of(replica.host))
        log.info("replica.sent", workspace=workspace, commit=head, host=replica.host, bytes=len(packed))
        return head
    except (RedisError, OSError, subprocess.CalledProcessError) as exc:
        log.warning("replica.send_failed", workspace=workspace, error=str(exc))
        return None


def catch_up(placement: Placement, send: Any, host: str | None = None, now: float | None = None) -> list[str]:
    """Ask the holders of replicas that fell behind for what they lack: those on ``host`` (a replica host
    starting again: what it held when it stopped is lost with it), else those behind for longer than
    :data:`RESEND_AFTER_S` (the sweep's look, for sends lost any other way). The workspaces asked for."""
    now = time.time() if now is None else now
    asked = []
    for workspace, replica in sorted(placement.replicas().items()):
        stale = replica.behind and (replica.host == host if host else replica.lag_s(now) > RESEND_AFTER_S)
        holder = placement.host_of(workspace)
        if stale and holder and holder != replica.host:
            placement.note_replica(workspace, sent=replica.applied)  # nothing in flight: the holder sends again
            send("scriptorium.replicate_request", args=[{"workspace": workspace, "now": True}], queue=queue_of(holder))
            asked.append(workspace)
    return asked


def replica_folder(rt: WorkerRuntime, workspace: str) -> Path:
    """Where this host keeps its replica of ``workspace`` (a workspace's ``memory`` folder, as it is)."""
    return rt.settings.state / "replicas" / workspace / "memory"


def apply(rt: WorkerRuntime, workspace: str, commit: str, base: str = "") -> dict[str, Any]:
    """The replica host's side: bring its copy of ``workspace`` to ``commit`` (sent as the commits after
    ``base``; "": the whole history)."""
    placement = Placement(rt.redis, rt.settings.redis_prefix)
    memory = replica_folder(rt, workspace)
    memory.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(memory.parent / ".replica.lock").hold(timeout=300):
        if not (memory / ".git").is_dir():
            shutil.rmtree(memory, ignore_errors=True)
            memory.mkdir()
            _git(memory, "init", "-q")
            _git(memory, "symbolic-ref", "HEAD", BRANCH)
        current = _head(memory)
        newer = bool(base) and current == base  # built on what is here: newer by construction
        if current == commit or (current and not newer and _is_ancestor(memory, commit, current)):
            return {"workspace": workspace, "state": "had it"}  # sent again, or overtaken by a newer send
        key = _key(rt, workspace, commit)
        bundle, runtime = rt.redis.get(f"{key}:bundle"), rt.redis.get(f"{key}:runtime")
        if not isinstance(bundle, bytes) or not isinstance(runtime, bytes):
            return {"workspace": workspace, "state": "expired"}  # the next send carries it
        with tempfile.TemporaryDirectory(prefix="scriptorium-bundle-") as scratch:
            path = Path(scratch) / "new.bundle"
            path.write_bytes(bundle)
            fetched = subprocess.run(
                ["git", "-C", str(memory), "fetch", "-q", str(path), BRANCH], capture_output=True, text=True
            )
        if fetched.returncode != 0:  # its base is not here (a replica rebuilt, a history rewritten): start over
            placement.note_replica(workspace, sent="", applied="")
            log.warning("replica.base_missing", workspace=workspace, commit=commit, error=fetched.stderr[-300:])
            return {"workspace": workspace, "state": "needs the whole history"}
        changed = _git(memory, "diff", "--name-only", "--no-renames", current, commit).split() if current else None
        _git(memory, "update-ref", BRANCH, commit)
        _git(memory, "read-tree", "-u", "--reset", commit)
        _replace_runtime(memory, runtime)
        revision, differ = verified(memory, rt.settings, changed)
        if differ or revision != _git(memory, "rev-parse", f"{commit}^{{tree}}"):
            log.error("replica.unverified", workspace=workspace, commit=commit, differ=differ[:5])
            placement.note_replica(workspace, sent="")  # sent again, whole, by the next pass
            return {"workspace": workspace, "state": "unverified"}
        placement.note_replica(workspace, applied=commit, applied_revision=revision, applied_at=time.time())
        rt.redis.delete(f"{key}:bundle", f"{key}:runtime")
        record = placement.replica_of(workspace)
        holder = placement.host_of(workspace)
        if record is not None and record.head and record.head != commit and holder and rt.send is not None:
            rt.send("scriptorium.replicate_request", args=[{"workspace": workspace}], queue=queue_of(holder))
    log.info("replica.applied", workspace=workspace, commit=commit, revision=revision)
    return {"workspace": workspace, "state": "applied", "commit": commit}


def _is_ancestor(memory: Path, older: str, newer: str) -> bool:
    done = subprocess.run(["git", "-C", str(memory), "merge-base", "--is-ancestor", older, newer], capture_output=True)
    return done.returncode == 0


def _replace_runtime(memory: Path, runtime: bytes) -> None:
    target = memory / ".scriptorium"
    landing = memory / f".scriptorium.landing-{os.getpid()}"
    shutil.rmtree(landing, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(runtime), mode="r:gz") as archive:
        archive.extractall(landing, filter="tar")
    if target.exists():
        for name in TRANSIENT:  # what this copy keeps of its own
            if (target / name).exists():
                os.rename(target / name, landing / name)
        shutil.rmtree(target)
    os.rename(landing, target)
    fsync_dir(memory)


def promote(rt: WorkerRuntime, workspace: str, move_id: str) -> dict[str, Any]:
    """A move from the replica (the holder is down): the replica becomes the workspace, here."""
    placement = Placement(rt.redis, rt.settings.redis_prefix)
    move = current_move(placement, workspace, move_id)
    if move is None:
        return {"move": move_id, "state": "abandoned"}
    replica = replica_folder(rt, workspace)
    if not (replica / ".git").is_dir():
        return record_failure(placement, move_id, ReasonCode.NOT_FOUND, f"{rt.settings.worker_host} holds no replica")
    memory = rt.settings.workspace_state(workspace) / "memory"
    memory.parent.mkdir(parents=True, exist_ok=True)
    lock = workspace_lock(rt, workspace, replica)
    with lock.hold(), FileLock(replica.parent / ".replica.lock").hold(timeout=300):
        started = time.perf_counter()
        revision, differ = verified(replica, rt.settings)
        if differ:
            return record_failure(placement, move_id, ReasonCode.INSTALL_FAILED, f"the replica differs: {differ[:5]}")
        history = set(_git(replica, "log", "--format=%T", BRANCH).split())
        workspace_id = (replica / ".scriptorium" / "workspace-id").read_text().strip()
        # First, so that no turn the replica lacks can stay marked: should the move not land, the old holder
        # finds those turns installed in its own copy and only marks them again.
        rewrite = rt.store.unmark_written_except(workspace_id, history)
        # Every figure the move command reports is noted before it lands: the command reads them as soon as
        # the move shows landed.
        placement.note_progress(move_id, state="packed", revision=revision, bytes=0, rewritten=len(rewrite))
        if memory.exists():
            put_aside(rt, memory, workspace, f"{move_id}-earlier")
        os.rename(replica, memory)
        fsync_dir(memory.parent)
        if not placement.land(move):
            put_aside(rt, memory, workspace, f"{move_id}-rolled-back")
            return {"move": move_id, "state": "abandoned"}
        rt.forget_workspace(workspace)
        placement.note_progress(move_id, land_ms=round((time.perf_counter() - started) * 1000, 1))
        serve_handovers(lock, lambda payload: send_again(rt, payload))
    for session_id in rewrite:
        if rt.send is not None:
            event = SessionIdle(workspace=workspace, session_id=session_id)
            rt.send("scriptorium.write", args=[event.model_dump(mode="json")])
    send_step(rt, "scriptorium.move_retire", workspace, move_id, move.source)  # taken when the old host is back
    log.info("move.promoted", workspace=workspace, move=move_id, revision=revision, rewritten=len(rewrite))
    return {"move": move_id, "state": "landed", "revision": revision, "rewritten": len(rewrite)}
