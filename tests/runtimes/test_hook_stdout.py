"""stdout is the hook protocol's channel (and the MCP stdio server's): no log line ever lands there, not even
one a library logs through structlog before any entry point configured it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import trusted_and_pending_world

ENV = {
    "SCRIPTORIUM_LOG_LEVEL": "debug",
    "SCRIPTORIUM_TRIGGER_TOKENS": "0",
    "SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "0",
    "SCRIPTORIUM_WATCH": "false",
    "SCRIPTORIUM_HOOK_WRITES": "inline",
}

LOG_FIRST = """
import scriptorium, structlog
structlog.get_logger().warning("library.log.before.configure")
"""


def python(script: str, stdin: str = "", *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **ENV},
    )


def test_unconfigured_structlog_logs_to_stderr_once_the_package_is_imported() -> None:
    for order in (LOG_FIRST, "import structlog\n" + LOG_FIRST):  # structlog imported after the package, or before
        out = python(order + "print('protocol')")
        assert out.returncode == 0, out.stderr
        assert out.stdout == "protocol\n"
        assert "library.log.before.configure" in out.stderr


def test_a_hooks_stdout_carries_only_the_protocol(tmp_path: Path) -> None:
    state = tmp_path / "state"
    trusted_and_pending_world(state / "memory")
    payload = {"session_id": "s1", "cwd": "/srv/app", "hook_event_name": "SessionStart", "source": "startup"}
    script = LOG_FIRST + "from scriptorium.runtimes.hooks.command import main\nraise SystemExit(main(sys.argv[1:]))"
    out = python("import sys\n" + script, json.dumps(payload), "--state", str(state))
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)  # one JSON document and nothing else
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "library.log.before.configure" in out.stderr and '"hook.done"' in out.stderr
