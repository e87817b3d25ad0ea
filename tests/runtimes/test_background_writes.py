"""The writing hooks off the turn's critical path: the command returns at once, the import and the pass run
afterwards (in the hook daemon's queue, or a detached process), one at a time, and nothing is lost."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from scriptorium.runtimes.hooks import daemon as hook_daemon
from scriptorium.runtimes.hooks.command import writing_turn
from tests.checks import tree_problems
from tests.cluster.conftest import wait_for
from tests.helpers.hooks import common, history, hook, recall_cache_is_current
from tests.helpers.transcripts import claude_transcript
from tests.helpers.written import clean

BACKGROUND = {"SCRIPTORIUM_HOOK_WRITES": "background"}


def writing_turn_held(state: Path) -> contextlib.AbstractContextManager[None]:
    """Hold the state folder's writing turn, as a long pass would: no background write can start."""
    return writing_turn(state)


def passes(state: Path, session: str = "cc-hooks") -> list[dict[str, object]]:
    return [h for h in history(state) if h["op"] == "write" and h.get("session") == session]


def test_a_writing_hook_returns_before_its_pass_and_the_pass_still_comes(state: Path, tmp_path: Path) -> None:
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
    with writing_turn_held(state):
        out = hook(state, common("SessionEnd", transcript=transcript, reason="exit"), **BACKGROUND)
        assert (out.returncode, out.stdout) == (0, "")
        assert passes(state) == [], "the hook ran its pass before returning"
    wait_for(lambda: clean(state, "cc-hooks", 4), 60, "the handed-off pass to write the session")
    assert [p["force"] for p in passes(state)] == [True]


def test_what_a_background_write_logs_is_kept_in_the_state_private(state: Path, tmp_path: Path) -> None:
    """No terminal reads a detached process: its log goes to ``<state>/logs/background.log``, 0600."""
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 2)
    hook(state, common("SessionEnd", transcript=transcript, reason="exit"), SCRIPTORIUM_LOG_LEVEL="INFO", **BACKGROUND)
    log = state / "logs" / "background.log"
    wait_for(lambda: log.exists() and '"hook.done"' in log.read_text(), 60, "the background write's log line")
    done = [json.loads(line) for line in log.read_text().splitlines() if '"hook.done"' in line]
    assert [d["hook"] for d in done] == ["SessionEnd"]
    assert (log.stat().st_mode & 0o777, log.parent.stat().st_mode & 0o777) == (0o600, 0o700)


def test_writing_hooks_in_the_background_run_in_turn_and_write_each_turn_once(state: Path, tmp_path: Path) -> None:
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 2)
    with writing_turn_held(state):
        hook(state, common("Stop", transcript=transcript), **BACKGROUND)
        claude_transcript(transcript, 4, start=2)
        hook(state, common("Stop", transcript=transcript), **BACKGROUND)
        hook(state, common("SessionEnd", transcript=transcript, reason="exit"), **BACKGROUND)
    wait_for(lambda: len(passes(state)) == 3, 60, "the three handed-off hooks to run")
    assert clean(state, "cc-hooks", 4)
    assert sorted(p["force"] for p in passes(state)) == [False, False, True]


def test_inline_writes_are_done_when_the_hook_returns(state: Path, tmp_path: Path) -> None:
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
    hook(state, common("SessionEnd", transcript=transcript, reason="exit"), SCRIPTORIUM_HOOK_WRITES="inline")
    assert clean(state, "cc-hooks", 4)


@pytest.fixture
def daemon_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    runtime = Path(tempfile.mkdtemp(prefix="sr-"))
    values = {
        "SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "1",
        "XDG_RUNTIME_DIR": str(runtime),
        "SCRIPTORIUM_WATCH": "false",
        "SCRIPTORIUM_TRIGGER_TOKENS": "0",
        **BACKGROUND,
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    yield values
    for lock in (runtime / "scriptorium").glob("*.lock"):
        if pid := lock.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGTERM)


def test_the_hook_daemon_queues_writing_hooks_and_stays_until_they_are_done(
    state: Path, tmp_path: Path, daemon_env: dict[str, str]
) -> None:
    """With a 1-second idle time, a daemon whose queued pass waits 3 seconds for its turn must not end
    before running it."""
    path = hook_daemon.socket_path(state.resolve())
    assert path is not None
    daemon = subprocess.Popen(
        [sys.executable, "-m", "scriptorium.runtimes.hooks.daemon", "--state", str(state), "--socket", str(path)],
        env={**os.environ, "SCRIPTORIUM_LOG_LEVEL": "info"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: path.exists(), 30, "the hook daemon")
        transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
        with writing_turn_held(state):
            out = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "import sys; from scriptorium.cli.entry import hook_command as command; "
                    "raise SystemExit(command(sys.argv[1:]))",
                    "--state",
                    str(state),
                ],
                input=json.dumps(common("SessionEnd", transcript=transcript, reason="exit")),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert (out.returncode, out.stdout) == (0, "")
            with contextlib.suppress(subprocess.TimeoutExpired):
                daemon.wait(3)
            assert daemon.poll() is None, "the daemon went idle with a pass in its queue"
        wait_for(lambda: clean(state, "cc-hooks", 4), 60, "the daemon's queued pass")
        daemon.wait(30)  # and then it does end
    finally:
        if daemon.poll() is None:
            daemon.kill()
        logged, _ = daemon.communicate(timeout=30)
    done = [line for line in logged.splitlines() if "hook.done" in line]
    assert len(done) == 1 and "SessionEnd" in done[0], "the daemon, not a detached process, ran it"


def leftovers(state: Path) -> list[str]:
    """Temporary source files and archive registers a killed pass left behind."""
    memory = state / "memory"
    found = [str(p.relative_to(memory)) for p in (memory / "sources").rglob("*.tmp")]
    archiving = memory / ".scriptorium" / "archiving"
    return found + ([str(p.relative_to(memory)) for p in archiving.iterdir()] if archiving.is_dir() else [])


def test_a_preparation_killed_before_its_install_leaves_nothing_once_a_context_hook_ran(
    state: Path, tmp_path: Path
) -> None:
    """A pass killed between archiving its sources' temporary files and installing them: the next context
    hook (which reads the files without writing) opens the workspace first, and recovery removes them."""
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, signal, sys\n"
            "from scriptorium.workspace import MemoryWorkspace\n"
            "from scriptorium.workspace.sources import SourceMessage\n"
            "ws = MemoryWorkspace(__import__('pathlib').Path(sys.argv[1]))\n"
            "ws.archive.prepare([SourceMessage('claude-code', 'killed', f'm{n}', 'user', '2026-12-02T10:00:00Z', "
            "'Secret plans', 'trusted') for n in range(3)])\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n",
            str(state / "memory"),
        ],
        capture_output=True,
        text=True,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert len(leftovers(state)) == 2, "the conversation's temporary file (its three messages) and the register"
    out = hook(state, common("UserPromptSubmit", prompt="what are the plans?"))
    assert out.returncode == 0, out.stderr
    assert leftovers(state) == [] and tree_problems(state / "memory") == []


STEPS = (
    "sources-prepared",
    "objects-written",
    "staged-files-written",
    "journal-written",
    "files-installed",
    "ref-updated",
    "state-written",
    "journal-removed",
)
KILLED_AT = (
    "import os, signal, sys\n"
    "from scriptorium.workspace import install, threads\n"
    "def crash(step):\n"
    "    if step == sys.argv[1]:\n"
    "        os.kill(os.getpid(), signal.SIGKILL)\n"
    "install.crash_point = crash\n"
    "put_in_place = threads.ConversationArchive.commit\n"
    "def commit(archive, prepared):  # the sources written aside, before they are put in place\n"
    "    crash('sources-prepared')\n"
    "    return put_in_place(archive, prepared)\n"
    "threads.ConversationArchive.commit = commit\n"
    "from scriptorium.runtimes.hooks.command import main\n"
    "main(sys.argv[2:])\n"
)


def test_a_detached_forced_write_killed_at_any_point_leaves_head_equal_to_the_files(
    state: Path, tmp_path: Path
) -> None:
    """The detached forced write (what SessionEnd hands off) SIGKILLed 20 times, each at a step drawn at
    random, from its sources' temporary files to the install's last: after the next hook of any kind, HEAD
    is the installed files and nothing temporary is left; the last write writes every turn once. The
    transcript is whole before each write starts: the write waits no settle time for the runtime's turn."""
    rng = random.Random(20261202)
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 2)
    payload = json.dumps(common("SessionEnd", transcript=transcript, reason="exit"))
    kinds = ["SessionStart", "UserPromptSubmit", "Stop"]
    env = {
        **os.environ,
        "SCRIPTORIUM_TRIGGER_TOKENS": "0",
        "SCRIPTORIUM_WATCH": "false",
        "SCRIPTORIUM_HOOK_WRITE_SETTLE_S": "0",
    }
    for run in range(20):
        claude_transcript(transcript, 2 * run + 4, start=2 * run + 2)
        step = rng.choice(STEPS)
        argv = [sys.executable, "-c", KILLED_AT, step, "--state", str(state), "--background"]
        killed = subprocess.run(argv, input=payload, capture_output=True, text=True, env=env, timeout=120)
        assert killed.returncode == -signal.SIGKILL, f"run {run} was not killed at {step}: {killed.stderr[-500:]}"
        kind = kinds[run % len(kinds)]
        extra = {"prompt": "plans?"} if kind == "UserPromptSubmit" else {"source": "startup"}
        out = hook(state, {**common(kind, transcript=transcript), **extra}, SCRIPTORIUM_WATCH="false")
        assert out.returncode == 0, out.stderr
        problems = leftovers(state) + tree_problems(state / "memory")
        assert problems == [], f"run {run}: killed at {step}, then {kind}"
    out = hook(state, common("SessionEnd", transcript=transcript, reason="exit"))
    assert out.returncode == 0, out.stderr
    assert clean(state, "cc-hooks", 42)


def test_the_hook_daemon_leaves_the_recall_cache_current_after_its_writes_before_any_prompt(
    state: Path, tmp_path: Path, daemon_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the writes it queued, the daemon brings its recall index and the disk cache up to them: the next
    prompt's search re-reads nothing (at a year, ~200 ms), and a daemon killed then leaves a current cache."""
    monkeypatch.setenv("SCRIPTORIUM_HOOK_DAEMON_IDLE_S", "120")  # it stays (leaving saves the cache too)
    path = hook_daemon.socket_path(state.resolve())
    assert path is not None
    memory = state / "memory"
    daemon = subprocess.Popen(
        [sys.executable, "-m", "scriptorium.runtimes.hooks.daemon", "--state", str(state), "--socket", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: path.exists(), 30, "the hook daemon")
        transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
        through_the_daemon = {**BACKGROUND, "SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "120"}
        hook(state, common("SessionEnd", transcript=transcript, reason="exit"), **through_the_daemon)
        wait_for(lambda: clean(state, "cc-hooks", 4), 60, "the daemon's queued pass")
        wait_for(lambda: recall_cache_is_current(memory), 30, "the disk cache to be current")
        assert daemon.poll() is None, "saved by the daemon after its writes, not on leaving"
    finally:
        daemon.kill()
        daemon.wait(30)
