"""The hook inbox (:mod:`scriptorium.runtimes.hooks.inbox`): setup's SessionEnd hook is a shell command that
leaves the payload in a file, no Python started on the runtime's way out; the hook daemon, else the next
sweep, gives it the forced write the command would have."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from scriptorium.runtimes.base import is_our_hook
from scriptorium.runtimes.hooks import daemon as hook_daemon
from scriptorium.runtimes.hooks import inbox
from scriptorium.settings import Settings
from tests.checks import records_citing
from tests.cluster.conftest import wait_for
from tests.helpers.daemon import socket_for
from tests.helpers.hooks import common, hook
from tests.helpers.transcripts import claude_transcript

TURNS = {f"claude-code/cc-hooks/e{n}" for n in range(4)}


def session_end(state: Path, transcript: Path) -> None:
    """Run setup's SessionEnd command as a runtime does (``sh -c``), with no Python on PATH."""
    payload = json.dumps(common("SessionEnd", transcript=transcript, reason="exit"))
    command = inbox.command(state)
    assert is_our_hook({"type": "command", "command": command}), "uninstall must know it for ours"
    done = subprocess.run(
        ["/bin/sh", "-c", command], input=payload, text=True, capture_output=True, env={"PATH": "/usr/bin:/bin"}
    )
    assert done.returncode == 0, done.stderr


def written(state: Path) -> dict[str, int]:
    return {k: v for k, v in records_citing(state / "memory").items() if k in TURNS}


def test_setup_hands_session_end_to_the_inbox(tmp_path: Path) -> None:
    from scriptorium.runtimes.setup.command import install

    state = tmp_path / "state"
    install("claude-code", state, home=tmp_path / "home", project=tmp_path)
    settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    (end,) = [h for g in settings["hooks"]["SessionEnd"] for h in g["hooks"]]
    assert end["command"] == inbox.command(state) and "python" not in end["command"]
    assert (state / "hook-inbox").is_dir() and (state / "hook-inbox").stat().st_mode & 0o777 == 0o700
    (subagent,) = [h for g in settings["hooks"]["SubagentStop"] for h in g["hooks"]]
    assert " hook --state " in subagent["command"] and subagent["command"] != end["command"]


def test_the_hook_daemon_gives_what_session_end_left_the_forced_write(state: Path, env: dict[str, str]) -> None:
    hook(state, common("UserPromptSubmit", prompt="when do releases ship?"), **env)  # starts the daemon
    path = socket_for(state)
    wait_for(lambda: path.exists() and hook_daemon.is_running(path), 30, "the hook daemon")
    transcript = claude_transcript(state.parent / "cc-hooks.jsonl", 4)
    session_end(state, transcript)
    wait_for(lambda: written(state) == dict.fromkeys(TURNS, 1), 60, "the session's turns, written by the daemon")
    assert os.listdir(state / "hook-inbox") == []


def test_with_no_daemon_the_next_sweep_gives_it_the_forced_write(state: Path, tmp_path: Path) -> None:
    from scriptorium.runtimes.hooks.watcher import sweep

    inbox.prepare(state)
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
    session_end(state, transcript)
    assert written(state) == {} and len(os.listdir(state / "hook-inbox")) == 1
    nowhere = tmp_path / "no-runtime-folders"
    nowhere.mkdir()
    counts = sweep(Settings(state=state, hook_transcript_roots=str(nowhere), trigger_tokens=10**9))
    assert counts["session_ends"] == 1 and os.listdir(state / "hook-inbox") == []
    wait_for(lambda: written(state) == dict.fromkeys(TURNS, 1), 60, "the session's turns, written after the sweep")


def test_a_payload_still_being_written_waits_and_one_that_never_completes_is_set_aside(tmp_path: Path) -> None:
    state = tmp_path / "state"
    inbox.prepare(state)
    folder = state / "hook-inbox"
    (folder / "end-1.json").write_text('{"hook_event_name": "Sess')  # cat has written half of it
    assert inbox.drain(state) == [] and (folder / "end-1.json").exists()
    (folder / "end-1.json").write_text('{"hook_event_name": "SessionEnd"}')
    (folder / "end-2.json").write_text('{"hook_event_name": "Sess')
    assert inbox.drain(state) == [b'{"hook_event_name": "SessionEnd"}']
    assert inbox.drain(state, now=time.time() + inbox.STALE_S + 1) == []
    assert sorted(os.listdir(folder)) == ["end-2.bad"], "set aside, never read again"
