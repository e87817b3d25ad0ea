"""The hook daemon: context hooks answered without paying a Python start's imports each prompt.

Claude Code and Codex run ``scriptorium hook`` as a new process on every
prompt. Loading the settings (pydantic), numpy and the index costs several
times a bare interpreter start, so the context events (``SessionStart``,
``UserPromptSubmit``) are answered by a hook daemon when one is running:
the command, importing only the standard library, hands it the payload over a
Unix socket and prints its answer. When none answers, the command answers in
process as before and starts one, detached, for the next prompt.

* One hook daemon per configuration: its socket's name is a digest of the
  state folder, every ``SCRIPTORIUM_*`` variable, the package version and the
  Python environment, so a command with other settings never reaches it (it starts its
  own). Sockets live in ``$XDG_RUNTIME_DIR/scriptorium`` or a per-user folder of
  the temporary directory, mode 0700 and owned by the user, else none is used.
* It answers through the same :class:`scriptorium.runtimes.hooks.Hooks` as the command
  (the index refreshes from the installed files on every search), holds a lock
  for its life (a second one started at the same time exits), and exits after
  ``SCRIPTORIUM_HOOK_DAEMON_IDLE_S`` seconds without a request (0: never start one).
* A hook daemon that accepted a payload but does not answer within
  :data:`ANSWER_TIMEOUT_S` yields no context (the prompt goes on); one that
  cannot be reached means the command answers itself.

The writing events (``Stop``, ``SubagentStop``, ``PreCompact``, ``SessionEnd``) are off the turn's critical
path: the command hands the payload to the hook daemon's queue when one runs, else to a detached process
of its own, and returns at once. Either runs the import and the pass in the runtime's order, one payload
at a time per state folder (:func:`scriptorium.runtimes.hooks.writing_turn`).
``SCRIPTORIUM_HOOK_WRITES=inline`` runs them in the command instead, for a script that must see the
session written when the hook returns.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import struct
import sys
from collections.abc import Callable
from pathlib import Path

from scriptorium import __version__
from scriptorium.defaults import MAX_HOOK_PAYLOAD, WRITER_RUN_ENV

TYPE_CHECKING = False  # not typing's: importing typing costs this command ~3 ms on every prompt
if TYPE_CHECKING:  # the command imports only the standard library before it knows it must answer itself
    from scriptorium.settings import Settings

CONTEXT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit"})
WRITING_EVENTS = frozenset({"Stop", "SubagentStop", "PreCompact", "SessionEnd"})
HOOK_WRITES_ENV = "SCRIPTORIUM_HOOK_WRITES"
"""``background`` (the default) or ``inline``: where the writing hooks' import and pass run."""
CONNECT_TIMEOUT_S = 0.2
ANSWER_TIMEOUT_S = 5.0
"""Longest wait for an accepted payload's answer (the process enforces the recall budget itself)."""
MAX_SOCKET_PATH = 104
"""Bytes of a Unix socket's path the kernel takes (108 on Linux, 104 on macOS); longer: no daemon."""
_LENGTH = struct.Struct("!I")


def temporary_directory() -> str:
    """The temporary directory as :func:`tempfile.gettempdir` finds it on POSIX (``TMPDIR``, ``TEMP``,
    ``TMP``, else ``/tmp``), without importing :mod:`tempfile` (8 ms of every hook)."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        if (found := os.environ.get(name)) and os.path.isdir(found):
            return found
    return "/tmp"


def runtime_folder() -> Path | None:
    """The user's own folder for sockets (created 0700), or None when it is not safely the user's."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(base) / "scriptorium" if base else Path(temporary_directory()) / f"scriptorium-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, parents=bool(base), exist_ok=True)
        st = folder.lstat()
    except OSError:
        return None
    if not os.path.isdir(folder) or os.path.islink(folder) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None  # someone else's, or open to others: a socket there could be theirs
    return folder


def state_folder(state: str | None) -> Path:
    """The state folder a command means: ``--state``, else ``$SCRIPTORIUM_STATE``, else the per-user default
    (:func:`scriptorium.locations.default_state`; setup's hooks always name theirs)."""
    chosen = state or os.environ.get("SCRIPTORIUM_STATE")
    if not chosen:
        from scriptorium.locations import default_state

        return default_state().expanduser().resolve()
    return Path(chosen).expanduser().resolve()


def socket_path(state: Path) -> Path | None:
    """Where the hook daemon for ``state`` and this environment listens (None: no safe folder)."""
    folder = runtime_folder()
    if folder is None:
        return None
    settings = sorted(
        (k, v)
        for k, v in os.environ.items()
        if k.startswith("SCRIPTORIUM_") and k not in ("SCRIPTORIUM_STATE", HOOK_WRITES_ENV)  # the command's choice
    )
    # sys.prefix: the environment (a venv), whichever of its interpreter names started the command.
    key = json.dumps([str(state), settings, __version__, sys.prefix])
    path = folder / f"hooks-{hashlib.sha256(key.encode()).hexdigest()[:24]}.sock"
    return path if len(os.fsencode(path)) < MAX_SOCKET_PATH else None


def _send(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_LENGTH.pack(len(data)) + data)


def _receive(sock: socket.socket, limit: int) -> bytes:
    head = _exactly(sock, _LENGTH.size)
    (length,) = _LENGTH.unpack(head)
    if length > limit:
        raise OSError(f"message of {length} bytes over {limit}")
    return _exactly(sock, length)


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 16))
        if not chunk:
            raise OSError("connection closed early")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def ask(path: Path, raw: bytes) -> str | None:
    """The hook daemon's answer to ``raw`` ("" for none), or None when no process could be reached."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(str(path))
        except OSError:
            return None
        try:
            sock.settimeout(ANSWER_TIMEOUT_S)
            _send(sock, raw)
            answer = json.loads(_receive(sock, 1 << 22))
        except (OSError, ValueError):
            return ""  # it took the payload and failed or stalled: no context rather than a second try
    out = answer.get("out") if isinstance(answer, dict) else None
    return out if isinstance(out, str) else ""


def is_running(path: Path) -> bool:
    """Whether a hook daemon holds ``path``'s lock (running, or starting; the lock file holds its PID)."""
    try:
        handle = open(path.with_suffix(".lock"), "a+b")  # noqa: SIM115 - closed below
    except OSError:
        return False
    import fcntl

    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def start(path: Path, state: Path) -> None:
    """Start the hook daemon for ``path`` in its own session, unless one holds its lock."""
    from scriptorium.locations import start_detached

    if is_running(path):
        return
    start_detached("scriptorium.runtimes.daemon", state, "--socket", str(path))


def command(argv: list[str]) -> int:
    """``scriptorium hook``: the hook daemon's answer when it has one, else the in-process hook."""
    known = _state_argument(argv)
    if os.environ.get(WRITER_RUN_ENV) == "1":  # the agent writing memory fired its hooks: not a conversation
        sys.stdin.buffer.read(MAX_HOOK_PAYLOAD + 1)
        return 0
    if "--finish" in argv or "-h" in argv or "--help" in argv:
        from scriptorium.runtimes.hooks import main

        return main(argv)
    raw = sys.stdin.buffer.read(MAX_HOOK_PAYLOAD + 1)
    event = _event(raw)
    background = event in WRITING_EVENTS and os.environ.get(HOOK_WRITES_ENV, "background") != "inline"
    if background and _hand_off(state_folder(known), raw):
        return 0
    path = socket_path(state_folder(known)) if event in CONTEXT_EVENTS else None
    if path is not None:
        out = ask(path, raw)
        if out is not None:
            if out:
                sys.stdout.write(out + "\n")
            return 0
    from scriptorium.runtimes.hooks import main

    return main(argv, raw=raw, then=None if path is None else _starter(path))


def _state_argument(argv: list[str]) -> str | None:
    """``--state DIR`` or ``--state=DIR`` of the hook's arguments (the last one wins, as argparse's)."""
    found = None
    for index, arg in enumerate(argv):
        if arg == "--state" and index + 1 < len(argv):
            found = argv[index + 1]
        elif arg.startswith("--state="):
            found = arg.removeprefix("--state=")
    return found


def _hand_off(state: Path, raw: bytes) -> bool:
    """Give a writing hook's payload to the hook daemon's queue, else to a detached process; False when
    neither took it (the command then runs it itself)."""
    path = socket_path(state)
    if path is not None and len(raw) <= MAX_HOOK_PAYLOAD and ask(path, raw) is not None:
        return True  # queued (its failures are the daemon's to record)
    from scriptorium.locations import start_detached

    try:
        start_detached("scriptorium.runtimes.hooks", state, "--background", stdin=raw)
    except OSError:
        return False
    return True


def _starter(path: Path) -> Callable[[Settings], None]:
    """What the in-process hook runs once it answered: start a hook daemon on ``path`` for the next prompt."""

    def start_daemon(settings: Settings) -> None:
        if settings.hook_daemon_idle_s <= 0 or settings.backend == "none":
            return
        try:
            start(path, settings.state.expanduser().resolve())
        except OSError as exc:  # the next prompt answers in process again
            import structlog

            structlog.get_logger(__name__).warning("hook.daemon_not_started", error=str(exc))

    return start_daemon


def _event(raw: bytes) -> object:
    try:
        payload = json.loads(raw)
    except ValueError:
        return None
    return payload.get("hook_event_name") if isinstance(payload, dict) else None


def serve(path: Path, state: Path) -> int:
    """Answer context hooks on ``path`` until idle for the configured time; 0 when it ends normally."""
    import fcntl
    import queue
    import signal
    import socketserver
    import threading

    import structlog

    from scriptorium.logs import configure_logging
    from scriptorium.recall.index import RecallIndex
    from scriptorium.runtimes.hooks import run_hook, writing_turn
    from scriptorium.runtimes.watcher import every_interval
    from scriptorium.settings import Settings

    settings = Settings(state=state)
    if settings.hook_daemon_idle_s <= 0 or settings.backend == "none":
        return 0
    lock = open(path.with_suffix(".lock"), "a+b")  # noqa: SIM115 - held for the process's life
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another one is up, or starting
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n".encode())
    lock.flush()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # ends in the finally below: the socket goes too
    configure_logging(settings.log_level)
    with contextlib.suppress(Exception):  # warm the index; a failure shows on the first hook instead
        RecallIndex.open(settings.memory_dir).refresh()
    stop_watching = threading.Event()
    every_interval(settings, stop_watching)  # the session watcher, while a resident process is here anyway

    writes: queue.Queue[bytes] = queue.Queue()
    writing = threading.Lock()  # held while a writing payload runs: the daemon does not go idle under it

    def write_in_turn() -> None:
        while True:
            raw = writes.get()
            try:
                with writing, writing_turn(settings.state):
                    run_hook(raw, settings, detach_end=False)
            except OSError as exc:  # the turn's lock could not be taken: this payload waits for the watcher
                structlog.get_logger(__name__).warning("hook.write_not_run", error=str(exc))
            finally:
                writes.task_done()

    threading.Thread(target=write_in_turn, name="hook-writes", daemon=True).start()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(ANSWER_TIMEOUT_S)
            try:
                raw = _receive(self.request, 1 << 21)
            except OSError:
                return
            if _event(raw) in WRITING_EVENTS:
                writes.put(raw)  # queued in the order the hooks came; the command returns now
                _send(self.request, json.dumps({"out": ""}).encode())
                return
            _send(self.request, json.dumps({"out": run_hook(raw, settings)}).encode())

    def quiet() -> bool:
        """Nothing queued nor running: the daemon may end."""
        if writes.unfinished_tasks or not writing.acquire(blocking=False):
            return False
        writing.release()
        return True

    path.unlink(missing_ok=True)  # a socket left by one that died: the lock says nobody serves it
    with socketserver.ThreadingUnixStreamServer(str(path), Handler) as server:
        os.chmod(path, 0o600)
        server.timeout = settings.hook_daemon_idle_s
        idle: list[bool] = []
        server.handle_timeout = lambda: idle.append(True) if quiet() else None  # type: ignore[method-assign]
        try:
            while not idle:
                server.handle_request()
        finally:
            stop_watching.set()
            with contextlib.suppress(OSError):
                path.unlink()
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    from scriptorium.locations import private_umask

    private_umask()

    parser = argparse.ArgumentParser(prog="python -m scriptorium.runtimes.daemon", description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--socket", type=Path, required=True)
    args = parser.parse_args(argv)
    return serve(args.socket, args.state)


if __name__ == "__main__":
    raise SystemExit(main())
