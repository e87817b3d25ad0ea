"""Moving a workspace between worker hosts: the two hosts' side of ``scriptorium move WORKSPACE HOST``.

The operator's command records the move and flips the placement in one step (``Placement.begin_move``):
from then on every task for the workspace waits, sent again to the new host's queue a moment later
(``handling.py``), so none runs on either host while the copy is made. Then:

1. **out**, on the old host (``scriptorium.move_out``, sent to its queue): under the workspace's fenced lock
   — so after the pass running there ends, and fencing out any holder paused since — the ``memory`` folder
   (git history, installed tree, install state, fence) is checked whole (every file of its revision on disk as
   the revision has it) and packed as it is, its revision noted, and the pack
   left in Redis under the move's ID; whatever was handed to this holder meanwhile is sent on, to the new host;
2. **in**, on the new host (``scriptorium.move_in``): under the same lock, the pack is checked against its
   SHA-256, unpacked beside the workspace's folder, and verified — the revision the old host noted, every
   installed file as its commit has it — then renamed into place (a copy left from an earlier stay there is
   put aside first). The move then lands (``Placement.land``) and the waiting tasks run here, from this disk;
3. **retire**, on the old host (``scriptorium.move_retire``): its copy is put aside under
   ``<state>/retired/`` (kept for the operator, never read again) — only if the workspace is held elsewhere.

A step that fails records why in the move's progress; the operator's command then rolls the move back
(placed on the old host, whose copy is untouched). Landing and rolling back are one Redis step each and
only the first applies, so a move that lands late after a roll-back puts its new copy aside instead.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from scriptorium.errors import ReasonCode
from scriptorium.fsutil import fsync_dir
from scriptorium.producers.placement import MOVE_KEEP_S, Move, Placement, queue_of
from scriptorium.settings import Settings
from scriptorium.workers.handling import WorkerRuntime, send_again
from scriptorium.workers.lock import RedisPassLock
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.gitstore import blob_sha
from scriptorium.writing.handover import serve_handovers

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Folder:
    """A workspace's folder before there is a workspace in it (the lock reads its recorded fence there)."""

    root: Path


def _blob_key(rt: WorkerRuntime, move_id: str) -> str:
    return f"{rt.settings.redis_prefix}move:{move_id}:pack"


def workspace_lock(rt: WorkerRuntime, workspace: str, memory: Path) -> RedisPassLock:
    """The workspace's fenced lock, waiting as long as a pass may run for it to end."""
    s = rt.settings
    return RedisPassLock(rt.redis, Folder(memory), workspace, s.redis_prefix, s.lock_ttl_s, s.task_hard_time_limit_s)


def current_move(placement: Placement, workspace: str, move_id: str) -> Move | None:
    found = placement.moving(workspace)
    return found if found is not None and found.id == move_id else None


def record_failure(placement: Placement, move_id: str, reason: ReasonCode, message: str) -> dict[str, Any]:
    placement.note_progress(move_id, state="failed", reason=str(reason), message=message)
    log.warning("move.failed", move=move_id, reason=str(reason), message=message)
    return {"move": move_id, "state": "failed", "reason": str(reason)}


def pack(memory: Path) -> bytes:
    """The ``memory`` folder as a gzipped tar, every file as it is (named ``memory/…``)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as archive:
        archive.add(memory, arcname="memory")
    return buffer.getvalue()


def verified(memory: Path, settings: Settings, paths: Iterable[str] | None = None) -> tuple[str, list[str]]:
    """The workspace's revision (its installed tree), and the files of that tree that are not on disk with
    the bytes the tree holds (empty when the copy is whole); ``paths``: look at those only (a path the tree
    does not hold must not be on disk)."""
    workspace = MemoryWorkspace(memory, settings.workspace_config())
    try:
        revision = workspace.revision
        files = workspace.git.list_files(revision)
        wanted = files if paths is None else {path: files.get(path, "") for path in paths}
        differ = []
        for path, sha in sorted(wanted.items()):
            if not sha:
                if (memory / path).exists():
                    differ.append(path)
                continue
            try:
                data = (memory / path).read_bytes()
            except OSError:
                data = None
            if data is None or blob_sha(data) != sha:
                differ.append(path)
        return revision, differ
    finally:
        workspace.close()


def move_out(rt: WorkerRuntime, workspace: str, move_id: str) -> dict[str, Any]:
    """The old host's step: pack the workspace under its lock and hand the move to the new host."""
    placement = Placement(rt.redis, rt.settings.redis_prefix)
    move = current_move(placement, workspace, move_id)
    if move is None:
        return {"move": move_id, "state": "abandoned"}  # rolled back before it began
    memory = rt.settings.workspace_state(workspace) / "memory"
    if not (memory / ".git").is_dir():
        return record_failure(
            placement, move_id, ReasonCode.NOT_FOUND, f"{rt.settings.worker_host} holds no {workspace!r}"
        )
    lock = workspace_lock(rt, workspace, memory)
    with lock.hold():
        started = time.perf_counter()
        revision, differ = verified(memory, rt.settings)
        if differ:  # never copy an install that is not whole: the next pass here recovers it first
            return record_failure(
                placement, move_id, ReasonCode.INSTALL_FAILED, f"installed files differ: {differ[:5]}"
            )
        packed = pack(memory)
        digest = hashlib.sha256(packed).hexdigest()
        rt.redis.set(_blob_key(rt, move_id), packed, ex=MOVE_KEEP_S)
        placement.note_progress(
            move_id,
            state="packed",
            revision=revision,
            bytes=len(packed),
            sha256=digest,
            pack_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        # Writes handed to this holder while it packed go on to the new host, where they wait for the move.
        serve_handovers(lock, lambda payload: send_again(rt, payload))
    send_step(rt, "scriptorium.move_in", workspace, move_id, move.target)
    log.info("move.packed", workspace=workspace, move=move_id, revision=revision, bytes=len(packed))
    return {"move": move_id, "state": "packed", "revision": revision}


def move_in(rt: WorkerRuntime, workspace: str, move_id: str) -> dict[str, Any]:
    """The new host's step: unpack and verify the workspace under its lock, rename it into place, land."""
    placement = Placement(rt.redis, rt.settings.redis_prefix)
    move = current_move(placement, workspace, move_id)
    if move is None:
        return {"move": move_id, "state": "abandoned"}
    progress = placement.progress(move_id)
    packed = rt.redis.get(_blob_key(rt, move_id))
    if not isinstance(packed, bytes) or hashlib.sha256(packed).hexdigest() != progress.get("sha256"):
        return record_failure(
            placement, move_id, ReasonCode.INVALID_ARGUMENT, "the pack is missing or not what was packed"
        )
    memory = rt.settings.workspace_state(workspace) / "memory"
    memory.parent.mkdir(parents=True, exist_ok=True)
    landing = memory.parent / f".landing-{move_id}"
    lock = workspace_lock(rt, workspace, memory)
    with lock.hold():
        started = time.perf_counter()
        try:
            with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as archive:
                archive.extractall(landing, filter="tar")
            revision, differ = verified(landing / "memory", rt.settings)
            if revision != progress.get("revision") or differ:
                return record_failure(
                    placement,
                    move_id,
                    ReasonCode.INSTALL_FAILED,
                    f"the copy is at {revision} (packed: {progress.get('revision')}); files that differ from it: "
                    f"{differ[:5]}",
                )
            if memory.exists():  # a copy from an earlier stay here: never read again
                put_aside(rt, memory, workspace, f"{move_id}-earlier")
            os.rename(landing / "memory", memory)
            fsync_dir(memory.parent)
        finally:
            shutil.rmtree(landing, ignore_errors=True)
        if not placement.land(move):  # rolled back while this ran: the old host holds it still
            put_aside(rt, memory, workspace, f"{move_id}-rolled-back")
            return {"move": move_id, "state": "abandoned"}
        rt.forget_workspace(workspace)
        placement.note_progress(move_id, land_ms=round((time.perf_counter() - started) * 1000, 1))
        serve_handovers(lock, lambda payload: send_again(rt, payload))
    rt.redis.delete(_blob_key(rt, move_id))
    send_step(rt, "scriptorium.move_retire", workspace, move_id, move.source)
    if rt.send is not None:  # the replica now: one on this host (it came back to its replica) is replaced by
        # one elsewhere, sent the whole history, whether or not another pass comes (workers/replication.py)
        request = {"workspace": workspace, "now": True}
        rt.send("scriptorium.replicate_request", args=[request], queue=queue_of(rt.settings.worker_host or ""))
    log.info("move.landed", workspace=workspace, move=move_id, revision=revision)
    return {"move": move_id, "state": "landed", "revision": revision}


def retire(rt: WorkerRuntime, workspace: str, move_id: str) -> dict[str, Any]:
    """The old host's last step: put its copy aside, unless the workspace is held here again."""
    placement = Placement(rt.redis, rt.settings.redis_prefix)
    if placement.host_of(workspace) == rt.settings.worker_host or placement.moving(workspace) is not None:
        return {"move": move_id, "state": "kept"}
    memory = rt.settings.workspace_state(workspace) / "memory"
    if memory.exists():
        put_aside(rt, memory, workspace, move_id)
    return {"move": move_id, "state": "retired"}


def put_aside(rt: WorkerRuntime, memory: Path, workspace: str, label: str) -> Path:
    aside = rt.settings.state / "retired" / f"{workspace}-{label}"
    aside.parent.mkdir(parents=True, exist_ok=True)
    os.rename(memory, aside)
    fsync_dir(memory.parent)
    rt.forget_workspace(workspace)
    log.info("move.put_aside", workspace=workspace, folder=str(aside))
    return aside


def send_step(rt: WorkerRuntime, task: str, workspace: str, move_id: str, host: str) -> None:
    if rt.send is not None:
        rt.send(task, args=[{"workspace": workspace, "move": move_id}], queue=queue_of(host))
