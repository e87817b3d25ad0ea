"""Where the memory lives when no command names it: one per user, found again by every command.

The state folder is, in order: ``--state DIR``; ``$SCRIPTORIUM_STATE``; the ``state`` that user-scope setup
recorded in the user config file (:func:`config_file`, ``$XDG_CONFIG_HOME/scriptorium/config.json`` on
Linux); else the platform's per-user data folder (:func:`user_state`, ``$XDG_DATA_HOME/scriptorium``), through
platformdirs. Never the current folder: a project keeps its own memory only when project-scope setup put
``<project>/.scriptorium`` into that project's hooks.

Everything under a state folder is the user's alone (0700 folders, 0600 files; archived sources 0400):
:func:`private_umask` is set by every entry point, so files git, SQLite and the archive create are private
whatever the umask the runtime started the command with.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from scriptorium.defaults import PRIVATE_UMASK

APP = "scriptorium"
CONFIG_NAME = "config.json"
CONFIG_VERSION = 1
"""The user config file's layout (:mod:`scriptorium.formats`; without ``version``, as this release writes it,
it is 1): one a newer release wrote is refused rather than passed over, which would put the memory in another
folder."""
PRIVATE_DIR = 0o700
PROJECT_STATE = ".scriptorium"
"""The state folder project-scope setup makes in a project (with a ``.gitignore`` of ``*``)."""


def user_state() -> Path:
    """The platform's per-user data folder for the memory (``~/.local/share/scriptorium`` on Linux)."""
    import platformdirs  # not for the hook command's fast path, which always names its state

    return platformdirs.user_data_path(APP)


def config_file() -> Path:
    """The user config file (``~/.config/scriptorium/config.json`` on Linux)."""
    import platformdirs

    return platformdirs.user_config_path(APP) / CONFIG_NAME


def configured_state() -> Path | None:
    """The state user-scope setup recorded, or None (no file, or one that does not parse); SCHEMA_TOO_NEW
    for a file a newer release wrote."""
    from scriptorium.formats import read_versioned  # not for the hook command's fast path

    path = config_file()
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    state = read_versioned(raw, CONFIG_VERSION, str(path)).get("state") if isinstance(raw, dict) else None
    return Path(state) if isinstance(state, str) and state else None


def default_state() -> Path:
    """The state folder a command means when neither ``--state`` nor ``$SCRIPTORIUM_STATE`` names one."""
    return configured_state() or user_state()


def where(state: Path) -> str:
    """How a message names a state folder and why it is that one (for errors and setup's output)."""
    if os.environ.get("SCRIPTORIUM_STATE"):
        return f"{state} (from SCRIPTORIUM_STATE)"
    if configured_state() is not None:
        return f"{state} (from {config_file()})"
    return str(state)


def record_state(state: Path) -> Path:
    """Make ``state`` what every command reads when none is named (user-scope setup); returns the file."""
    from scriptorium.fsutil import atomic_write

    path = config_file()
    try:
        current = json.loads(path.read_text())
    except (OSError, ValueError):
        current = {}
    values = current if isinstance(current, dict) else {}
    atomic_write(path, (json.dumps({**values, "state": str(state.resolve())}, indent=2) + "\n").encode())
    return path


def private_umask() -> None:
    """What this process creates is its user's alone (entry points call it first)."""
    os.umask(PRIVATE_UMASK)


def make_private(state: Path) -> None:
    """Create ``state`` 0700, or take group and other access from one that an earlier release left open —
    only a folder that holds a Scriptorium state: ``--state ~`` or ``--state .`` never closes a home or a
    project."""
    if not state.exists():
        state.mkdir(mode=PRIVATE_DIR, parents=True)
        return
    is_state = (state / "memory" / ".git").is_dir() or (state / "sessions").is_dir() or (state / "owner-token").exists()
    if is_state and state.stat().st_mode & 0o077:
        os.chmod(state, PRIVATE_DIR)


def ignore_in_git(state: Path) -> Path:
    """A ``.gitignore`` of ``*`` in a project's state folder, as virtual environments carry, so that
    ``git add -A`` in the project never stages the memory, its session store or its tokens."""
    from scriptorium.fsutil import atomic_write

    path = state / ".gitignore"
    if not path.exists():
        make_private(state)
        atomic_write(path, b"# Scriptorium's state: never committed with the project.\n*\n")
    return path


BACKGROUND_LOG = "background.log"
"""Under ``<state>/logs``: what the detached processes (hook daemon, watcher sweeps, background writes) log."""
BACKGROUND_LOG_MAX = 1 << 20
"""Bytes past which the log is moved to ``background.log.1`` (the one kept before it) when a process opens it."""


def background_log(state: Path) -> int:
    """A descriptor appending to the state's background log, for a detached process's stderr: no terminal
    reads what it logs, so a failure of the watcher or of a background write is found there. The caller
    closes it once the child has it."""
    folder = state / "logs"
    folder.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    path = folder / BACKGROUND_LOG
    try:
        if path.stat().st_size > BACKGROUND_LOG_MAX:
            os.replace(path, folder / (BACKGROUND_LOG + ".1"))
    except FileNotFoundError:
        pass
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


def start_detached(module: str, state: Path, *args: str, stdin: bytes | None = None) -> None:
    """Run ``python -m module --state STATE args…`` in its own session (a kill of the runtime's process
    group does not reach it), its stderr appended to the background log and ``stdin`` (if any) piped in.
    Raises OSError when it cannot be started."""
    import subprocess
    import sys

    log = background_log(state)
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", module, "--state", str(state), *args],
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            env={**os.environ, "SCRIPTORIUM_STATE": str(state)},
        )
    finally:
        os.close(log)
    if stdin is not None:
        assert child.stdin is not None
        with child.stdin:
            child.stdin.write(stdin)
