"""The hook daemon as the tests run it: an environment that allows one, its socket, and the hook command run
as a runtime runs it (a process), reporting which heavy modules it loaded."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from scriptorium.runtimes.hooks import daemon as hook_daemon

#: What a command the daemon answers must not load (the reason it is fast): the memory's heavy libraries,
#: and the standard library's costlier modules that the hook client does without.
HEAVY = (
    "numpy",
    "pydantic",
    "structlog",
    "typing",
    "json",
    "socket",
    "scriptorium.settings",
    "scriptorium.recall.index",
)


CLIENT = (
    "import sys\n"
    "from scriptorium.cli.entry import hook_command as command\n"
    "code = command(sys.argv[1:])\n"
    f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    "raise SystemExit(code)\n"
)


@contextlib.contextmanager
def daemon_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The hook environment with a hook daemon allowed (30 s idle), sockets in this test's own folder."""
    runtime = Path(tempfile.mkdtemp(prefix="sr-"))  # short: a socket's path has a length limit
    values = {"SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "30", "XDG_RUNTIME_DIR": str(runtime), "SCRIPTORIUM_WATCH": "false"}
    for key, value in {**values, "SCRIPTORIUM_TRIGGER_TOKENS": "0"}.items():
        monkeypatch.setenv(key, value)  # so socket_path() here sees what the commands see
    try:
        yield values
    finally:
        stop_daemons(runtime)


def stop_daemons(runtime: Path) -> None:
    """Stop the hook daemons whose locks are under ``runtime`` and remove it."""
    for lock in (runtime / "scriptorium").glob("*.lock"):
        pid = lock.read_text().strip()
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)
    shutil.rmtree(runtime, ignore_errors=True)


def socket_for(state: Path) -> Path:
    path = hook_daemon.socket_path(state.resolve())
    assert path is not None
    return path


def client(state: Path, payload: object) -> tuple[str, list[str]]:
    """Run the hook command as a runtime does; its stdout and which heavy modules it loaded."""
    out = subprocess.run(
        [sys.executable, "-c", CLIENT, "--state", str(state)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout, out.stderr.strip().splitlines()[-1].split() if out.stderr.strip() else []
