"""The first thing ``scriptorium hook`` does: hand the payload to the hook daemon, importing next to nothing.

A runtime starts the hook command as a new process for every hook of every turn, one after another, on
the turn's critical path (four per ``claude -p``). A bare interpreter starts in about 9 ms; what the
command imports before it can hand the payload on is the rest of its cost. So this module imports
``os``, ``sys``, ``hashlib`` and the C socket module only (``json``, ``pathlib`` and ``socket`` would
treble that), and speaks to the daemon in length-prefixed bytes: the payload goes as the runtime gave it,
the answer comes back as the text to print.

The daemon decides what a payload is (a context event it answers, a writing event it queues), so the
command need not parse it. Only when no daemon answers does the command load the rest
(:func:`scriptorium.runtimes.hooks.daemon.answer_without_daemon`, called by :func:`scriptorium.cli.entry.hook_command`):
it answers in process, or hands a writing event to a
detached process, and starts a daemon for the next hook. ``SCRIPTORIUM_HOOK_WRITES=inline`` skips the
daemon: a writing event then runs before the command returns.
"""

from __future__ import annotations

import _socket
import hashlib
import os
import sys

from scriptorium import __version__
from scriptorium.defaults import MAX_HOOK_PAYLOAD, WRITER_RUN_ENV

HOOK_WRITES_ENV = "SCRIPTORIUM_HOOK_WRITES"
"""``background`` (the default) or ``inline``: where the writing hooks' import and pass run."""
PROTOCOL = "3"
"""The daemon's wire format, part of its socket's name: a command never reaches a daemon speaking another."""
CONFINED = b"\0confined\n"
"""What starts a payload that came through the MCP server's ``hook`` tool rather than a runtime's command: a
model can call that tool too, so the daemon reads only transcripts inside the runtimes' folders for it, as
for the HTTP hook route (a JSON payload never starts with a NUL byte)."""
CONNECT_TIMEOUT_S = 0.2
ANSWER_TIMEOUT_S = 5.0
"""Longest wait for an accepted payload's answer (the process enforces the recall budget itself)."""
MAX_SOCKET_PATH = 104
"""Bytes of a Unix socket's path the kernel takes (108 on Linux, 104 on macOS); longer: no daemon."""
MAX_ANSWER = 1 << 22
_LENGTH_BYTES = 4


def temporary_directory() -> str:
    """The temporary directory as :func:`tempfile.gettempdir` finds it on POSIX (``TMPDIR``, ``TEMP``,
    ``TMP``, else ``/tmp``), without importing :mod:`tempfile`."""
    for name in ("TMPDIR", "TEMP", "TMP"):
        if (found := os.environ.get(name)) and os.path.isdir(found):
            return found
    return "/tmp"


def runtime_folder() -> str | None:
    """The user's own folder for sockets (created 0700), or None when it is not safely the user's."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = (
        os.path.join(base, "scriptorium") if base else os.path.join(temporary_directory(), f"scriptorium-{os.getuid()}")
    )
    try:
        if base:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        else:
            try:  # noqa: SIM105 - contextlib costs this command more than it saves
                os.mkdir(folder, 0o700)
            except FileExistsError:  # made earlier, or by a command started at the same time
                pass
        st = os.lstat(folder)
    except OSError:
        return None
    if not os.path.isdir(folder) or os.path.islink(folder) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None  # someone else's, or open to others: a socket there could be theirs
    return folder


def environment() -> str:
    """The Python environment the command runs in (a venv's folder), whichever of its interpreter names
    started it: ``sys.prefix``, or without the site module (``python -S``, as the runtimes start hooks), where
    ``sys.prefix`` is the base interpreter's, the folder site would take: the one holding ``pyvenv.cfg``,
    beside the interpreter or one up."""
    if not sys.flags.no_site:
        return sys.prefix
    here = os.path.dirname(os.path.abspath(sys.executable))
    for folder in (here, os.path.dirname(here)):
        if os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
            return folder
    return sys.prefix


def socket_path(state: str) -> str | None:
    """Where the hook daemon for the resolved state folder ``state`` and this environment listens (None: no
    safe folder). Its name is a digest of the state folder, every ``SCRIPTORIUM_*`` setting, the package
    version, the Python environment and the wire format: a command with other settings never reaches it."""
    folder = runtime_folder()
    if folder is None:
        return None
    settings = sorted(
        f"{k}={v}"
        for k, v in os.environ.items()
        if k.startswith("SCRIPTORIUM_") and k not in ("SCRIPTORIUM_STATE", HOOK_WRITES_ENV)  # the command's choice
    )
    key = "\0".join([state, *settings, __version__, environment(), PROTOCOL])
    path = os.path.join(folder, f"hooks-{hashlib.sha256(key.encode('utf-8', 'surrogateescape')).hexdigest()[:24]}.sock")
    return path if len(os.fsencode(path)) < MAX_SOCKET_PATH else None


def send(sock: _socket.socket, data: bytes) -> None:
    sock.sendall(len(data).to_bytes(_LENGTH_BYTES, "big") + data)


def receive(sock: _socket.socket, limit: int) -> bytes:
    length = int.from_bytes(_exactly(sock, _LENGTH_BYTES), "big")
    if length > limit:
        raise OSError(f"message of {length} bytes over {limit}")
    return _exactly(sock, length)


def _exactly(sock: _socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 16))
        if not chunk:
            raise OSError("connection closed early")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def ask(path: str | os.PathLike[str], raw: bytes) -> str | None:
    """The hook daemon's answer to ``raw`` ("" for none), or None when no daemon could be reached."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(os.fspath(path))
        except OSError:
            return None
        try:
            sock.settimeout(ANSWER_TIMEOUT_S)
            send(sock, raw)
            return receive(sock, MAX_ANSWER).decode("utf-8", "replace")
        except OSError:
            return ""  # it took the payload and failed or stalled: no context rather than a second try
    finally:
        sock.close()


_sockets: dict[tuple[str, ...], str | None] = {}


def daemon_socket(argv: list[str]) -> str | None:
    """The hook daemon's socket for the state the arguments name, worked out once per process (the MCP
    server's environment and arguments do not change while it runs)."""
    key = tuple(argv)
    if key not in _sockets:
        state = named_state(argv)
        _sockets[key] = socket_path(state) if state is not None else None
    return _sockets[key]


def relay(argv: list[str], raw: bytes) -> str | None:
    """The hook daemon's answer to a payload from the MCP server's ``hook`` tool (confined: see
    :data:`CONFINED`), the MCP server's arguments ``argv`` naming the state; None when no daemon answered."""
    path = daemon_socket(argv) if len(raw) <= MAX_HOOK_PAYLOAD else None
    return None if path is None else ask(path, CONFINED + raw)


def state_argument(argv: list[str]) -> str | None:
    """``--state DIR`` or ``--state=DIR`` of the hook's arguments (the last one wins, as argparse's)."""
    found = None
    for index, arg in enumerate(argv):
        if arg == "--state" and index + 1 < len(argv):
            found = argv[index + 1]
        elif arg.startswith("--state="):
            found = arg.removeprefix("--state=")
    return found


def named_state(argv: list[str]) -> str | None:
    """The resolved state folder the arguments or ``$SCRIPTORIUM_STATE`` name, else the per-user default
    (None: that needs the site module, which this interpreter started without)."""
    chosen = state_argument(argv) or os.environ.get("SCRIPTORIUM_STATE")
    if not chosen:
        try:
            from scriptorium.locations import default_state

            chosen = str(default_state())
        except ImportError:  # platformdirs lives in site-packages
            return None
    return os.path.realpath(os.path.expanduser(chosen))


def hand_to_daemon(argv: list[str]) -> bytes | None:
    """Give the hook's payload to the hook daemon; None when it is done with (answered, queued, or a memory
    writer's own hook), else the payload for the full command to answer
    (:func:`scriptorium.runtimes.hooks.daemon.answer_without_daemon`)."""
    if os.environ.get(WRITER_RUN_ENV) == "1":  # the agent writing memory fired its hooks: not a conversation
        sys.stdin.buffer.read(MAX_HOOK_PAYLOAD + 1)
        return None
    raw = sys.stdin.buffer.read(MAX_HOOK_PAYLOAD + 1)
    if "--plugin" in argv and _settings_wire_hooks(raw):
        return None  # the plugin's hook, where the settings files run ours: theirs answers
    state = named_state(argv)
    inline = os.environ.get(HOOK_WRITES_ENV) == "inline"
    path = socket_path(state) if state is not None and not inline and len(raw) <= MAX_HOOK_PAYLOAD else None
    if path is not None and (out := ask(path, raw)) is not None:
        if out:
            sys.stdout.write(out + "\n")
        return None
    return raw


def _settings_wire_hooks(raw: bytes) -> bool:
    """Whether Claude Code's settings files run our hooks for the session of payload ``raw``
    (:mod:`scriptorium.runtimes.plugin`)."""
    import json

    from scriptorium.runtimes.plugin import wired_by_settings

    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    cwd = payload.get("cwd") if isinstance(payload, dict) else None
    return wired_by_settings("hooks", cwd if isinstance(cwd, str) and cwd else None)
