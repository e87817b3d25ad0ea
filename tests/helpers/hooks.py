"""``scriptorium hook`` driven as Claude Code and Codex drive it: a payload on stdin, the output read back.

:func:`hook` runs the console script's code in this process (:func:`tests.helpers.edge.console`);
:func:`hook_process` starts the installed script, for the tests of the protocol itself (stdin and stdout of
a real process, exit codes, the hook daemon, detached writes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from scriptorium.recall.cache import CACHE_DIR, IndexCache
from scriptorium.recall.records import signature
from tests.helpers.edge import console

SCRIPT = Path(sys.executable).with_name("scriptorium")

HOOK_ENV = {
    "SCRIPTORIUM_TRIGGER_TOKENS": "0",
    "SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "0",
    "SCRIPTORIUM_WATCH": "false",
    "SCRIPTORIUM_HOOK_WRITES": "inline",
}
"""No hook daemon unless a test asks for one (tests/runtimes/test_daemon.py does), no session watcher
sweeping in the background unless a test asks for it (tests/runtimes/test_watcher.py does), and the
writing hooks done when the command returns unless a test asks for the background
(tests/runtimes/test_background_writes.py does)."""


def _body(payload: Any) -> str:
    return payload if isinstance(payload, str) else json.dumps(payload)


def hook(state: Path, payload: Any, **env: str) -> subprocess.CompletedProcess[str]:
    """``scriptorium hook --state STATE`` with ``payload`` on stdin, in this process."""
    return console(["hook", "--state", str(state)], env={**HOOK_ENV, **env}, stdin=_body(payload))


def hook_process(state: Path, payload: Any, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``scriptorium hook --state STATE [FLAGS]`` as a real process of the installed script."""
    return subprocess.run(
        [str(SCRIPT), "hook", "--state", str(state), *flags],
        input=_body(payload),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **HOOK_ENV, **env},
    )


def common(event: str, session: str = "cc-hooks", transcript: Path | None = None, **fields: Any) -> dict[str, Any]:
    """A hook payload: the common fields and ``fields``."""
    payload: dict[str, Any] = {"session_id": session, "cwd": "/srv/app", "hook_event_name": event, **fields}
    if transcript is not None:
        payload["transcript_path"] = str(transcript)
    return payload


def history(state: Path) -> list[dict[str, Any]]:
    """The writer history of the workspace at ``state``, oldest first."""
    path = state / "memory" / ".scriptorium" / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def context(out: subprocess.CompletedProcess[str], event: str) -> str:
    """The ``additionalContext`` a hook printed for ``event`` (asserting it exited 0 with that shape)."""
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    text = answer["hookSpecificOutput"]["additionalContext"]
    assert isinstance(text, str)
    return text


def recall_cache_is_current(memory: Path) -> bool:
    """Whether the recall index's disk cache of workspace ``memory`` is of its installed files (the gate it
    was saved under is ``state.json``'s signature now): a process loading it re-reads nothing."""
    found = IndexCache(memory / ".scriptorium" / "cache" / CACHE_DIR).load()
    return found is not None and found["gate"] == signature(memory / ".scriptorium" / "state.json")
