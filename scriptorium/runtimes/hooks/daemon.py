"""The hook daemon: context hooks answered without paying a Python start's imports each prompt.

Claude Code and Codex run ``scriptorium hook`` as a new process on every
prompt. Loading the settings (pydantic), numpy and the index costs several
times a bare interpreter start, so the context events (``SessionStart``,
``UserPromptSubmit``) are answered by a hook daemon when one is running:
the command, importing next to nothing (:mod:`scriptorium.runtimes.hooks.client`), hands it the payload
over a Unix socket and prints its answer. When none answers, the command answers in
process as before and starts one, detached, for the next prompt.

* One hook daemon per configuration: its socket's name is a digest of the
  state folder, every ``SCRIPTORIUM_*`` variable, the package version, the
  Python environment and the wire format, so a command with other settings never reaches it (it starts its
  own). Sockets live in ``$XDG_RUNTIME_DIR/scriptorium`` or a per-user folder of
  the temporary directory, mode 0700 and owned by the user, else none is used.
* It answers through the same :class:`scriptorium.runtimes.hooks.command.Hooks` as the command
  (the index refreshes from the installed files on every search), holds a lock
  for its life (a second one started at the same time exits), and exits after
  ``SCRIPTORIUM_HOOK_DAEMON_IDLE_S`` seconds without a request (0: never start one).
* A hook daemon that accepted a payload but does not answer within
  :data:`~scriptorium.runtimes.hooks.client.ANSWER_TIMEOUT_S` yields no context (the prompt goes on); one that
  cannot be reached means the command answers itself.

The writing events (``Stop``, ``SubagentStop``, ``PreCompact``, ``SessionEnd``) are off the turn's critical
path: the command hands the payload to the hook daemon's queue when one runs, else to a detached process
of its own, and returns at once. Either runs the import and the pass in the runtime's order, one payload
at a time per state folder (:func:`scriptorium.runtimes.hooks.command.writing_turn`).
``SCRIPTORIUM_HOOK_WRITES=inline`` runs them in the command instead, for a script that must see the
session written when the hook returns.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from scriptorium.defaults import MAX_HOOK_PAYLOAD
from scriptorium.runtimes.hooks import client

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading

    from scriptorium.runtimes.hooks.writes import WriteQueue
    from scriptorium.settings import Settings

CONTEXT_EVENTS = frozenset({"SessionStart", "UserPromptSubmit"})
WRITING_EVENTS = frozenset({"Stop", "SubagentStop", "PreCompact", "SessionEnd"})


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
    found = client.socket_path(str(state))
    return Path(found) if found is not None else None


def runtime_folder() -> Path | None:
    found = client.runtime_folder()
    return Path(found) if found is not None else None


ask = client.ask


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
    start_detached("scriptorium.runtimes.hooks.daemon", state, "--socket", str(path))


def answer_without_daemon(argv: list[str], raw: bytes) -> int:
    """What ``scriptorium hook`` does when no hook daemon took the payload
    (:func:`scriptorium.runtimes.hooks.client.hand_to_daemon` asked first): a writing event goes to a detached
    process (unless ``SCRIPTORIUM_HOOK_WRITES=inline``); a context event is answered in process, and a
    hook daemon started for the next one."""
    event = event_name(raw)
    state = state_folder(client.state_argument(argv))
    background = event in WRITING_EVENTS and os.environ.get(client.HOOK_WRITES_ENV, "background") != "inline"
    if background and _hand_off(state, raw):
        return 0
    path = socket_path(state) if event in CONTEXT_EVENTS else None
    from scriptorium.runtimes.hooks.command import main

    return main(argv, raw=raw, then=None if path is None else _starter(path))


def answer_mcp_hook(settings: Settings, arguments: dict[str, object]) -> str:
    """The MCP server's answer to its ``hook`` tool when no hook daemon took the call (the front asked first:
    :func:`scriptorium.runtimes.hooks.client.relay`), as the command would answer: a writing event goes to a
    detached process; a context event is answered here, and a hook daemon started for the next one. Either
    reads transcripts inside the runtimes' folders only (a model can call the tool too)."""
    from scriptorium.runtimes.catalog import transcript_roots
    from scriptorium.runtimes.hooks.command import run_hook

    raw = json.dumps(arguments).encode("utf-8")
    state = settings.state.expanduser().resolve()
    event = event_name(raw)
    if event in WRITING_EVENTS and _hand_off(state, raw, "--confined"):
        return ""
    answer = run_hook(raw, settings, transcript_roots=transcript_roots(settings.hook_transcript_roots))
    if event in CONTEXT_EVENTS and (path := socket_path(state)) is not None:
        _starter(path)(settings)
    return answer


def _hand_off(state: Path, raw: bytes, *flags: str) -> bool:
    """Give a writing hook's payload to a detached process; False when it could not start (the command then
    runs it itself)."""
    from scriptorium.locations import start_detached

    try:
        start_detached("scriptorium.runtimes.hooks.command", state, "--background", *flags, stdin=raw)
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
            from scriptorium.logs import get_logger

            get_logger(__name__).warning("hook.daemon_not_started", error=str(exc))

    return start_daemon


def event_name(raw: bytes) -> object:
    """The hook event a payload names (None when it names none: answered as a bad payload)."""
    try:
        payload = json.loads(raw)
    except ValueError:
        return None
    return payload.get("hook_event_name") if isinstance(payload, dict) else None


def serve(path: Path, state: Path) -> int:
    """Answer context hooks on ``path`` until idle for the configured time; 0 when it ends normally."""
    import fcntl
    import signal
    import socketserver
    import threading

    from scriptorium.logs import configure_logging
    from scriptorium.recall.index import RecallIndex
    from scriptorium.runtimes.catalog import transcript_roots
    from scriptorium.runtimes.hooks.command import run_hook
    from scriptorium.runtimes.hooks.watcher import every_interval
    from scriptorium.runtimes.hooks.writes import WriteQueue
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

    writes = WriteQueue(
        settings.state,
        settle_s=settings.hook_write_settle_s,
        after=lambda: RecallIndex.refresh_after_writes(settings.memory_dir),
    )
    inbox_watch = threading.Thread(target=_watch_inbox, args=(settings, writes, stop_watching), daemon=True)
    inbox_watch.start()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.settimeout(client.ANSWER_TIMEOUT_S)
            try:
                raw = client.receive(self.request, MAX_HOOK_PAYLOAD + len(client.CONFINED))
            except OSError:
                return
            roots = None
            if raw.startswith(client.CONFINED):  # the MCP server's hook tool: a model may call it too
                raw, roots = raw.removeprefix(client.CONFINED), transcript_roots(settings.hook_transcript_roots)
            if event_name(raw) in WRITING_EVENTS:  # in the order the hooks came; the command returns now
                writes.put(lambda: run_hook(raw, settings, transcript_roots=roots, detach_end=False))
                client.send(self.request, b"")
                return
            client.send(self.request, run_hook(raw, settings, transcript_roots=roots).encode())

    path.unlink(missing_ok=True)  # a socket left by one that died: the lock says nobody serves it
    try:  # from before the socket exists: a SIGTERM at any point after leaves no socket behind
        with socketserver.ThreadingUnixStreamServer(str(path), Handler) as server:
            os.chmod(path, 0o600)
            server.timeout = settings.hook_daemon_idle_s
            idle: list[bool] = []
            server.handle_timeout = lambda: idle.append(True) if writes.idle() else None  # type: ignore[method-assign]
            while not idle:
                server.handle_request()
        # Leaving the disk cache current for the first prompt after this exit (answered in process).
        RecallIndex.refresh_after_writes(settings.memory_dir)
    finally:
        stop_watching.set()
        with contextlib.suppress(OSError):
            path.unlink()
    return 0


def _watch_inbox(settings: Settings, writes: WriteQueue, stop: threading.Event) -> None:
    """Queue what SessionEnd hooks leave in the hook inbox (:mod:`scriptorium.runtimes.hooks.inbox`), as the
    command's payloads are queued, until ``stop``."""
    from scriptorium.runtimes.hooks import inbox
    from scriptorium.runtimes.hooks.command import run_hook

    with contextlib.suppress(OSError):  # setup made it; so that SessionEnd finds it whatever happened since
        inbox.prepare(settings.state)
    while True:
        try:
            for raw in inbox.drain(settings.state):
                writes.put(lambda raw=raw: run_hook(raw, settings, detach_end=False))  # type: ignore[misc]
        except OSError as exc:  # the next look tries again
            from scriptorium.logs import get_logger

            get_logger(__name__).warning("hook.inbox_unreadable", error=str(exc))
        if stop.wait(inbox.POLL_S):
            return


def main(argv: list[str] | None = None) -> int:
    import argparse

    from scriptorium.locations import private_umask

    private_umask()

    parser = argparse.ArgumentParser(
        prog="python -m scriptorium.runtimes.hooks.daemon", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--socket", type=Path, required=True)
    args = parser.parse_args(argv)
    return serve(args.socket, args.state)


if __name__ == "__main__":
    raise SystemExit(main())
