"""The session watcher where no cluster runs: a session whose runtime never said it ended is still written.

A terminal closed mid-session, a SIGKILLed or crashed runtime, never sends SessionEnd, and the Stop hook's
unforced pass writes nothing below the trigger. :func:`sweep` makes up for it, in two steps:

1. every transcript under the runtimes' folders that an earlier import read (a session's import cursor
   names it) and that grew since is imported again — what a killed turn wrote that no Stop hook read —
   and so is every one a context hook named that no import has read yet (a session killed in its first
   turn; :func:`note_seen`), and every one no import has read that changed since the previous sweep began
   in a folder an import read from (a session whose hooks never reached memory: ``setup --server`` with
   the server down) — and every new one in a runtime's folder that user-scope setup named
   (:func:`follow`), whether or not the runtime's hooks ran: Codex skips hooks it was not told to trust,
   and its sessions from before the trust are imported all the same;
2. first, what SessionEnd hooks left in the hook inbox with no hook daemon up to take it
   (:mod:`scriptorium.runtimes.hooks.inbox`) goes to detached hook processes, as the command hands it; then,
   embedded (no ``SCRIPTORIUM_BROKER_URL``), every session :func:`~scriptorium.writing.watcher.due_sessions`
   finds due gets the forced write, and each settled one is marked handled; in a cluster the beat's sweep
   does that part, with the same rule, and this one replays the events the hooks spooled while the broker
   did not answer (:func:`replay_spool`; a resident process does that every :data:`SPOOL_RETRY_S` too).

It runs where a resident process exists — the hook daemon and ``scriptorium serve`` run it every
``SCRIPTORIUM_SWEEP_INTERVAL_S`` — and, so that none is required, every ``SessionStart`` starts it detached
once that interval has passed since the last one started (:func:`start_detached`). One sweep runs at a time
per state folder: a second finds the lock held and leaves. ``SCRIPTORIUM_WATCH=false`` turns it off.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from scriptorium.errors import LockHeld
from scriptorium.locations import start_detached as start_detached_process
from scriptorium.logs import get_logger
from scriptorium.runtimes.openings import Openings
from scriptorium.sessions import SessionStore
from scriptorium.settings import Settings

log = get_logger(__name__)
LOCK_FILE = "watcher.lock"
STAMP_FILE = "watcher.started"
"""Touched when a sweep is started: its modification time spaces the SessionStart sweeps."""


SWEPT_FILE = "watcher.swept"
"""Dated when the last sweep that finished began: the next one looks for transcripts that changed after that."""
SWEEPING_FILE = "watcher.sweeping"
"""Touched when a sweep begins, renamed to :data:`SWEPT_FILE` (its time kept) once its import is done: a sweep
that died leaves the next one looking from the same time as it did."""
FOLLOWED_FILE = "watcher-followed.json"
"""The runtimes' transcript folders user-scope setup named (folder → when it first named it): the sweep imports
every transcript that appears or changes in one from then on, whether or not the runtime's hooks ran. What was
there before is history the user never gave memory (``scriptorium ingest`` takes it)."""
WAITING_FILE = "watcher-waiting.json"
"""Transcripts a sweep found new in a followed folder and no import had read (path → ``[size, mtime_ns]``):
looked at again while they change and stay unread (a rollout created empty, read once it has a line)."""
SEEN_FILE = "watcher-seen.json"
"""Transcripts a context hook named (path → when first named): a session killed in its first turn was never
imported, and no cursor names its transcript."""


SEEN_GRACE_S = 24 * 3600.0
"""How long a noted transcript that does not exist yet is kept: a hook notes it before the runtime writes the
file (a sweep in between must not drop it), and one never written goes after a day."""


def note_seen(state: Path, transcript: str) -> None:
    """Remember that a live session writes ``transcript``, once (the sweep imports it if no hook does)."""
    import fcntl

    from scriptorium.fsutil import atomic_write

    path = state / SEEN_FILE
    state.mkdir(parents=True, exist_ok=True)
    with open(state / (SEEN_FILE + ".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        seen = _load_seen(path)
        if transcript in seen:
            return
        seen[transcript] = time.time()
        atomic_write(path, json.dumps(seen, indent=1).encode())


def _load_seen(path: Path) -> dict[str, float]:
    try:
        seen = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in seen.items()} if isinstance(seen, dict) else {}


def _forget_seen(state: Path, imported: Sequence[Path]) -> None:
    """Drop the transcripts an import has read (their cursors name them from now on) or that never came
    (:data:`SEEN_GRACE_S`)."""
    import fcntl

    from scriptorium.fsutil import atomic_write

    path = state / SEEN_FILE
    with open(state / (SEEN_FILE + ".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        seen = _load_seen(path)
        done = {str(p) for p in imported}
        now = time.time()
        kept = {k: v for k, v in seen.items() if k not in done and (Path(k).exists() or now - v < SEEN_GRACE_S)}
        if kept != seen:
            atomic_write(path, json.dumps(kept, indent=1).encode())


def follow(state: Path, folder: Path, at: float | None = None) -> None:
    """From now on (``at``), the sweeps of ``state`` import every transcript that appears in ``folder``, a
    runtime's, whether or not its hooks ran; a folder already followed keeps its first time."""
    with _followed_lock(state):
        followed = _load_followed(state)
        key = str(folder.expanduser().resolve())
        if key not in followed:
            _save_followed(state, {**followed, key: time.time() if at is None else at})


def unfollow(state: Path, folder: Path) -> None:
    """Stop following ``folder`` (uninstall): what its runtime writes from now on is not imported unasked."""
    with _followed_lock(state):
        followed = _load_followed(state)
        key = str(folder.expanduser().resolve())
        if key in followed:
            del followed[key]
            _save_followed(state, followed)


@contextmanager
def _followed_lock(state: Path) -> Iterator[None]:
    """The followed folders' file, one setup at a time."""
    import fcntl

    state.mkdir(parents=True, exist_ok=True)
    with open(state / (FOLLOWED_FILE + ".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _load_followed(state: Path) -> dict[str, float]:
    return _load_seen(state / FOLLOWED_FILE)


def _save_followed(state: Path, followed: Mapping[str, float]) -> None:
    from scriptorium.fsutil import atomic_write

    atomic_write(state / FOLLOWED_FILE, json.dumps(followed, indent=1).encode())


class Following:
    """The new transcripts of the followed folders (:func:`follow`) under ``roots``: those that appeared since
    the previous sweep began, found by walking the folders but looking at the files of only those whose
    entries changed since (a new file changes its folder), and those an earlier sweep found that no import
    has read yet, when they changed since (:data:`WAITING_FILE`). Work in proportion to what changed."""

    def __init__(self, state: Path, roots: Sequence[Path]) -> None:
        self.state = state
        resolved = [root.expanduser().resolve() for root in roots]
        self.folders = {
            Path(folder): at
            for folder, at in _load_followed(state).items()
            if any(Path(folder).is_relative_to(root) for root in resolved)
        }
        self.waiting = _load_marks(state / WAITING_FILE)

    def new(self, read: set[Path], since: float | None) -> list[Path]:
        """The transcripts to import: new or changed since ``since`` (None: all since followed), none of ``read``."""
        found: list[Path] = []
        waiting: dict[str, list[int]] = {}
        for name, mark in self.waiting.items():
            path = Path(name)
            if path in read or (now := _mark(path)) is None:
                continue  # read at last (its cursor follows it from now on), or gone
            waiting[name] = now
            if now != mark:
                found.append(path)
        for path in _appeared(self.folders, since):
            if path in read or str(path) in waiting or (now := _mark(path)) is None:
                continue
            waiting[str(path)] = now
            found.append(path)
        if waiting != self.waiting:
            from scriptorium.fsutil import atomic_write

            atomic_write(self.state / WAITING_FILE, json.dumps(waiting, indent=1).encode())
        self.waiting = waiting
        return found


def _mark(path: Path) -> list[int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]


def _load_marks(path: Path) -> dict[str, list[int]]:
    try:
        marks = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(marks, dict):
        return {}
    return {str(k): [int(n) for n in v] for k, v in marks.items() if isinstance(v, list) and len(v) == 2}


def _appeared(folders: Mapping[Path, float], since: float | None) -> list[Path]:
    """The transcripts (``*.jsonl``, OpenClaw's databases) at any depth below each of ``folders`` last changed
    at or after its time, in the folders whose entries changed at ``since`` or later (None: in every one)."""
    from scriptorium.producers.importing import DATABASE_NAMES

    found: list[Path] = []
    for top, start in folders.items():
        pending = [top]
        while pending:
            folder = pending.pop()
            try:
                changed = since is None or folder.stat().st_mtime >= since
                with os.scandir(folder) as listing:
                    entries = list(listing)
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
                    elif (
                        changed
                        and (entry.name.endswith(".jsonl") or entry.name in DATABASE_NAMES)
                        and entry.is_file(follow_symlinks=False)
                        and entry.stat(follow_symlinks=False).st_mtime >= start
                    ):
                        found.append(Path(entry.path))
                except OSError:
                    continue
    return found


def grown_transcripts(
    store: SessionStore,
    roots: Sequence[Path],
    seen: Sequence[str] = (),
    since: float | None = None,
    audience: str | None = None,
    projects: bool = False,
    following: Following | None = None,
) -> list[Path]:
    """Transcripts under ``roots`` that an import read before and that changed since its cursor, those of
    ``seen`` that no import has read, and (``since``: a time) the transcripts no import has read that changed
    after ``since`` in a folder an import of ``audience``'s sessions read from — a session no hook reported
    (a runtime whose hooks post to a server that was down). ``projects``: the project transcripts an import
    read (SpecStory's and aider's, kept in the projects' own folders: ``scriptorium ingest <project>`` once)
    count wherever they are, as if under ``roots``. ``following``: the followed folders' new transcripts too
    (:class:`Following`; ``since`` None: every one since followed)."""
    from scriptorium.producers.importing import (
        AIDER_HISTORY,
        CURSOR_PREFIX,
        DATABASE_NAMES,
        Cursor,
        is_project_transcript,
    )
    from scriptorium.sessions.model import audience_of

    resolved = [root.expanduser().resolve() for root in roots]
    grown: list[Path] = []
    read: set[Path] = set()
    folders: set[Path] = set()
    databases: dict[Path, dict[str, int]] = {}
    for session in store.list_sessions():
        for key, raw in session.metadata.items():
            if not key.startswith(CURSOR_PREFIX) or not isinstance(raw, str):
                continue
            path = Path(key.removeprefix(CURSOR_PREFIX))
            read.add(path)
            if not any(path.is_relative_to(root) for root in resolved) and not (
                projects and is_project_transcript(path)
            ):
                continue
            if audience_of(session) == audience and path.name != AIDER_HISTORY:
                folders.add(path.parent)  # (an aider history's folder is the project's: no other transcript)
            try:
                cursor = Cursor.from_json(json.loads(raw))
                info = path.stat()
            except (OSError, ValueError):
                continue  # gone, or a cursor this release cannot read: the next hook import says why
            if path.name in DATABASE_NAMES:  # many sessions, each read up to its cursor's seq
                databases.setdefault(path, {})[session.id] = cursor.offset if cursor else -1
                continue
            if cursor is None or (info.st_dev, info.st_ino, info.st_size) != (
                cursor.device,
                cursor.inode,
                cursor.offset,
            ):
                grown.append(path)
    grown.extend(path for path, read_to in databases.items() if _database_grew(path, read_to))
    for named in seen:
        path = Path(named).expanduser().resolve()
        if path not in read and path.is_file() and any(path.is_relative_to(root) for root in resolved):
            grown.append(path)
    if since is not None:
        grown.extend(path for path in _changed_in(folders, since) if path not in read)
    if following is not None:
        grown.extend(following.new(read, since))
    return sorted(set(grown))


def _database_grew(path: Path, read_to: dict[str, int]) -> bool:
    """Whether an OpenClaw database holds a session, or rows of one, past what its cursors read."""
    from scriptorium.producers import openclaw

    try:
        with openclaw.connect(path) as connection:
            ends = openclaw.session_ends(connection)
    except (OSError, sqlite3.Error):
        return False  # gone or locked: the next sweep or hook looks again
    return any(read_to.get(session) != end for session, end in ends.items())


def _changed_in(folders: set[Path], since: float) -> list[Path]:
    """The ``*.jsonl`` files directly in ``folders`` last changed at ``since`` or later (and the ``*.md`` ones,
    in a SpecStory history folder: a project's new sessions)."""
    from scriptorium.producers.importing import is_project_transcript

    changed = []
    for folder in folders:
        try:
            entries = list(folder.glob("*.jsonl"))
            entries += [p for p in folder.glob("*.md") if is_project_transcript(p)]
        except OSError:
            continue
        for path in entries:
            try:
                if path.is_file() and path.stat().st_mtime >= since:
                    changed.append(path)
            except OSError:
                continue
    return changed


def sweep(settings: Settings) -> dict[str, int]:
    """One scan: import grown transcripts, take the hook inbox, drop stale opening marks
    (:mod:`scriptorium.runtimes.openings`), then (embedded) write the due sessions; returns the counts.

    Raises ``LockHeld`` when another sweep of this state folder is running.
    """
    from scriptorium.workspace.lock import FileLock

    settings.state.mkdir(parents=True, exist_ok=True)
    with FileLock(settings.state / LOCK_FILE).hold(timeout=0):
        counts = _import_grown(settings)
        counts["session_ends"] = _take_inbox(settings)
        counts["openings_pruned"] = Openings(settings.state).prune()
        if not settings.broker_url:
            counts |= _write_due(settings)
        else:
            counts["replayed"] = replay_spool(settings)
    log.info("watcher.swept", **counts)
    return counts


def _take_inbox(settings: Settings) -> int:
    """Hand what SessionEnd hooks left in the hook inbox with no hook daemon up to take it
    (:mod:`scriptorium.runtimes.hooks.inbox`) to detached hook processes, as the command hands a writing hook
    with no daemon up (they run one at a time per state folder, in the order they started); how many."""
    from scriptorium.runtimes.hooks import inbox

    payloads = inbox.drain(settings.state)
    for raw in payloads:
        start_detached_process("scriptorium.runtimes.hooks.command", settings.state, "--background", stdin=raw)
    return len(payloads)


def _import_grown(settings: Settings) -> dict[str, int]:
    from scriptorium.producers.ingest import import_paths
    from scriptorium.runtimes.catalog import transcript_roots

    store = settings.session_store()
    seen = list(_load_seen(settings.state / SEEN_FILE))
    since = _begin(settings.state)
    try:
        roots = transcript_roots(settings.hook_transcript_roots)
        # SpecStory and aider keep transcripts in the projects' folders: each one an ingest read is followed,
        # unless the folders to read from are configured (then only those under them).
        projects = not settings.hook_transcript_roots
        following = Following(settings.state, roots)
        grown = grown_transcripts(
            store, roots, seen, since, settings.hook_audience, projects=projects, following=following
        )
        report = (
            import_paths(store, grown, settings.hook_audience, settings.hook_workspace, redactor=settings.redactor())
            if grown
            else None
        )
    finally:
        store.close()
    os.replace(settings.state / SWEEPING_FILE, settings.state / SWEPT_FILE)  # the next looks from this start
    if seen:
        _forget_seen(settings.state, grown)
    return {"transcripts_grown": len(grown), "new_nodes": report.new_nodes if report else 0}


def _begin(state: Path) -> float | None:
    """When the last sweep that finished began (None: none did), stamping this one's start."""
    try:
        previous: float | None = (state / SWEPT_FILE).stat().st_mtime
    except FileNotFoundError:
        previous = None
    (state / SWEEPING_FILE).touch()
    return previous


def _write_due(settings: Settings) -> dict[str, int]:
    from scriptorium.composition import build_runtime
    from scriptorium.workspace.paths import is_workspace
    from scriptorium.writing.outcomes import NothingDue
    from scriptorium.writing.watcher import HandledLedger, due_sessions, settles

    counts = {"idle": 0, "stale": 0, "written": 0}
    if not is_workspace(settings.memory_dir):
        return counts  # nothing was ever written here: the first hook that writes creates the memory
    runtime = build_runtime(settings, create=False)
    try:
        ledger = HandledLedger(settings.memory_dir / ".scriptorium")
        service, store = runtime.service, runtime.store
        now = datetime.now(UTC)
        found = due_sessions(
            store.list_sessions(),
            ledger.load(),
            now,
            settings.idle_after_s,
            settings.pending_bound_s,
            service.pending_since,
        )
        marks: dict[str, float] = {}
        for due in found:
            counts[due.why] += 1
            session = store.get_session(due.session_id)
            outcome = service.write(due.session_id, force=True)
            counts["written"] += 0 if isinstance(outcome, NothingDue) else outcome.nodes_written
            if session is not None and settles(outcome):
                marks[due.session_id] = session.updated_at.timestamp()
        ledger.mark(marks)
    finally:
        runtime.close()
    if counts["written"]:
        from scriptorium.recall.index import RecallIndex

        RecallIndex.refresh_after_writes(settings.memory_dir)
    return counts


def start_detached(settings: Settings) -> bool:
    """Start a sweep in its own process unless one started within the sweep interval; True when started."""
    if not settings.watch or settings.backend == "none":
        return False
    stamp = settings.state / STAMP_FILE
    try:
        if time.time() - stamp.stat().st_mtime < settings.sweep_interval_s:
            return False
    except FileNotFoundError:
        pass
    settings.state.mkdir(parents=True, exist_ok=True)
    stamp.touch()
    start_detached_process("scriptorium.runtimes.hooks.watcher", settings.state)
    return True


def sweep_quietly(settings: Settings) -> None:
    """:func:`sweep`, for a background caller: another sweep running is fine, any failure is logged."""
    try:
        sweep(settings)
    except LockHeld:
        log.info("watcher.busy")
    except Exception:  # the watcher must never take its host process (daemon, server) down
        log.exception("watcher.failed")


SPOOL_RETRY_S = 5.0
"""How often a resident process retries the events spooled while the broker was down (cluster mode)."""


def replay_spool(settings: Settings) -> int:
    """Send what the hooks spooled while the broker did not answer (cluster mode; 0 when nothing was)."""
    from scriptorium.producers.publisher import Publisher

    spool = settings.state / "spool"
    waiting = any(p.suffix == ".json" for p in _entries(spool)) or bool(_entries(spool / "claimed"))
    if not settings.broker_url or not waiting:
        return 0  # (a claim left by a replayer that died counts: the replay puts it back)
    publisher = Publisher(settings.broker_url, spool=spool, prefix=settings.redis_prefix)
    try:
        return publisher.replay()
    finally:
        publisher.close()


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def every_interval(settings: Settings, stop: threading.Event) -> threading.Thread | None:
    """A daemon thread sweeping every ``sweep_interval_s`` until ``stop`` is set (None when off); in cluster
    mode it also replays the spool every :data:`SPOOL_RETRY_S` (or the sweep interval, if shorter), so
    that events spooled while the broker was down go out soon after it is back, with no new event."""
    if not settings.watch or settings.backend == "none":
        return None
    tick = min(settings.sweep_interval_s, SPOOL_RETRY_S) if settings.broker_url else settings.sweep_interval_s

    def loop() -> None:
        next_sweep = time.monotonic() + settings.sweep_interval_s
        while not stop.wait(tick):
            if settings.broker_url:
                _replay_quietly(settings)
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + settings.sweep_interval_s
                sweep_quietly(settings)

    thread = threading.Thread(target=loop, name="scriptorium-watcher", daemon=True)
    thread.start()
    return thread


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scriptorium.runtimes.hooks.watcher --state DIR``: one sweep, detached from a SessionStart hook."""
    import argparse

    from scriptorium.locations import private_umask
    from scriptorium.logs import configure_logging

    parser = argparse.ArgumentParser(
        prog="python -m scriptorium.runtimes.hooks.watcher", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    private_umask()
    settings = Settings(state=args.state)
    configure_logging(settings.log_level)
    sweep_quietly(settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def replaying(settings: Settings, stop: threading.Event) -> threading.Thread | None:
    """A daemon thread replaying the spool every :data:`SPOOL_RETRY_S` until ``stop`` is set, for a
    cluster process that does not sweep sessions itself (``scriptorium beat``); None without a broker."""
    if not settings.broker_url:
        return None

    def loop() -> None:
        while not stop.wait(SPOOL_RETRY_S):
            _replay_quietly(settings)

    thread = threading.Thread(target=loop, name="scriptorium-spool-replay", daemon=True)
    thread.start()
    return thread


def _replay_quietly(settings: Settings) -> None:
    try:
        replay_spool(settings)
    except Exception:  # never the host process's end
        log.exception("watcher.replay_failed")
