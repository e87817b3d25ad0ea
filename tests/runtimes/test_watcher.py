"""The session watcher where no cluster runs: sessions whose runtime never sent SessionEnd are written anyway.

The runtimes' transcript folders are the test's own (``CLAUDE_CONFIG_DIR``); the hooks run as the command
a runtime starts, the sweep as the detached process SessionStart starts, the hook daemon and the server as
themselves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scriptorium.sessions import Session
from scriptorium.settings import Settings
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writing.outcomes import Failed, NothingDue, Pending, Written
from scriptorium.writing.watcher import HandledLedger, due_sessions, settles
from tests.checks import records_citing
from tests.cluster.conftest import wait_for
from tests.helpers.hooks import common, history, hook
from tests.helpers.runtime_setup import setup
from tests.helpers.transcripts import cc, rollout, write
from tests.helpers.written import clean, written

SESSION = "cc-killed"


@pytest.fixture
def claude_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "claude"
    (home / "projects" / "-srv-app").mkdir(parents=True)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home))
    return home


def transcript(home: Path, turns: range, session: str = SESSION, at: datetime | None = None) -> Path:
    """Claude Code's transcript of ``session``, extended by ``turns`` (dated ``at`` when given)."""
    path = home / "projects" / "-srv-app" / f"{session}.jsonl"
    with path.open("a") as handle:
        for n in turns:
            entry = json.loads(cc(n, f"e{n - 1}" if n else None, "user" if n % 2 == 0 else "assistant"))
            entry["sessionId"] = session
            if at is not None:
                entry["timestamp"] = (at + timedelta(seconds=n)).isoformat().replace("+00:00", "Z")
            handle.write(json.dumps(entry) + "\n")
    return path


WATCH = {"SCRIPTORIUM_WATCH": "true", "SCRIPTORIUM_TRIGGER_TOKENS": "99999"}
"""The watcher on, and a trigger no test session reaches: only forced writes write."""


def sweep(state: Path, **env: str) -> None:
    """One sweep, run as SessionStart runs it (the same module, in its own process), waited for."""
    done = subprocess.run(
        [sys.executable, "-m", "scriptorium.runtimes.hooks.watcher", "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **WATCH, **env},
    )
    assert done.returncode == 0, done.stderr


def test_a_session_killed_before_session_end_is_written_whole_after_the_idle_time(
    claude_home: Path, tmp_path: Path
) -> None:
    """Stop imported four turns and wrote none (below the trigger); the runtime was killed after two more
    turns reached the transcript and before any hook read them. The next session's SessionStart sweeps:
    the grown transcript is imported and the idle session gets the forced write — every turn, once."""
    state = tmp_path / "state"
    path = transcript(claude_home, range(4))
    assert hook(state, common("Stop", session=SESSION, transcript=path), **WATCH).returncode == 0
    assert written(state, SESSION) == 0, "below the trigger: Stop wrote nothing"
    transcript(claude_home, range(4, 6))  # the turn the killed runtime wrote; no hook ever saw it

    started = hook(state, common("SessionStart", session="cc-next", source="startup"), **WATCH)
    assert started.returncode == 0, started.stderr
    wait_for(lambda: clean(state, SESSION, 6), 60, "the killed session's six turns, each written once")
    forced = [h for h in history(state) if h["op"] == "write" and h["session"] == SESSION and h["force"]]
    assert len(forced) == 1 and forced[0]["ok"] and forced[0]["nodes_written"] == 6
    assert HandledLedger(state / "memory" / ".scriptorium").load().keys() == {SESSION}

    sweep(state)  # handled and unchanged since: not written again
    assert clean(state, SESSION, 6)
    assert len([h for h in history(state) if h["op"] == "write" and h["session"] == SESSION and h["force"]]) == 1


def test_a_session_killed_in_its_first_turn_is_found_through_the_transcript_its_hooks_named(
    claude_home: Path, tmp_path: Path
) -> None:
    """No writing hook ever ran, so no import cursor names the transcript: the context hooks' word that a
    live session writes it is what lets the sweep find it. Outside the runtimes' folders it is not read."""
    state = tmp_path / "state"
    MemoryWorkspace.init(state / "memory").close()  # as setup leaves it
    path = transcript(claude_home, range(2))
    hook(state, common("UserPromptSubmit", session=SESSION, transcript=path, prompt="hello"), **WATCH)
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(path.read_text().replace(SESSION, "cc-outside"))
    hook(state, common("UserPromptSubmit", session="cc-outside", transcript=outside, prompt="hi"), **WATCH)
    sweep(state)
    assert clean(state, SESSION, 2) and written(state, "cc-outside") == 0
    assert json.loads((state / "watcher-seen.json").read_text()).keys() == {str(outside)}, (
        "an imported transcript is left to its cursor"
    )


def test_session_start_sweeps_at_most_once_per_interval(claude_home: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = transcript(claude_home, range(2))
    hook(state, common("Stop", session=SESSION, transcript=path), **WATCH)
    stamp = state / "watcher.started"
    hook(state, common("SessionStart", session="a", source="startup"), **WATCH)
    first = stamp.stat().st_mtime_ns
    wait_for(lambda: clean(state, SESSION, 2), 60, "the first sweep's write")
    hook(state, common("SessionStart", session="b", source="startup"), **WATCH)
    assert stamp.stat().st_mtime_ns == first, "within the interval (5 minutes): no second sweep"
    hook(state, common("SessionStart", session="c", source="startup"), **WATCH, SCRIPTORIUM_SWEEP_INTERVAL_S="0.01")
    assert stamp.stat().st_mtime_ns > first, "past the interval: a new sweep"


def test_a_session_still_in_use_waits_for_its_idle_time(claude_home: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = transcript(claude_home, range(2), at=datetime.now(UTC))
    hook(state, common("Stop", session=SESSION, transcript=path), **WATCH)
    sweep(state)
    assert written(state, SESSION) == 0, "last message seconds ago: not idle after 30 minutes"
    time.sleep(0.5)
    sweep(state, SCRIPTORIUM_IDLE_MINUTES="0.005")  # idle after 0.3 s
    assert clean(state, SESSION, 2)


def test_the_watcher_off_writes_nothing_and_starts_nothing(claude_home: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    path = transcript(claude_home, range(2))
    hook(state, common("Stop", session=SESSION, transcript=path), **WATCH)
    hook(state, common("SessionStart", session="b", source="startup"), **{**WATCH, "SCRIPTORIUM_WATCH": "false"})
    assert not (state / "watcher.started").exists()
    sweep(state, SCRIPTORIUM_WATCH="false")  # run by hand, the module still sweeps: the switch is for the hosts
    assert clean(state, SESSION, 2)


def test_only_transcripts_under_the_runtimes_folders_are_read_again(claude_home: Path, tmp_path: Path) -> None:
    """A transcript ingested by hand from elsewhere is not the watcher's to reread; it is written as stored."""
    state = tmp_path / "state"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = transcript(claude_home, range(2))
    moved = elsewhere / path.name
    path.rename(moved)
    hook(state, common("Stop", session=SESSION, transcript=moved), **WATCH)
    with moved.open("a") as handle:
        handle.write(cc(2, "e1", "user").replace("inc-session", SESSION) + "\n")
    sweep(state)
    assert clean(state, SESSION, 2) and written(state, SESSION) == 2


def test_the_hook_daemon_sweeps_every_interval_without_any_hook(
    claude_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = tmp_path / "state"
    path = transcript(claude_home, range(2))
    hook(state, common("Stop", session=SESSION, transcript=path), **WATCH)
    runtime = tmp_path / "rt"
    runtime.mkdir()
    env = {**os.environ, **WATCH, "SCRIPTORIUM_SWEEP_INTERVAL_S": "0.3", "XDG_RUNTIME_DIR": str(runtime)}
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "scriptorium.runtimes.hooks.daemon",
            "--state",
            str(state),
            "--socket",
            str(runtime / "d.sock"),
        ],
        env={**env, "SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "30"},
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: clean(state, SESSION, 2), 60, "the daemon's sweep to write the idle session")
    finally:
        daemon.terminate()
        daemon.wait(30)


def test_the_server_sweeps_every_interval(claude_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from scriptorium.web.app import create_app

    state = tmp_path / "state"
    path = transcript(claude_home, range(2))
    hook(state, common("Stop", session=SESSION, transcript=path), **WATCH)
    settings = Settings(state=state, watch=True, sweep_interval_s=0.3, trigger_tokens=99999)
    with TestClient(create_app(settings)):
        wait_for(lambda: clean(state, SESSION, 2), 60, "the server's sweep to write the idle session")


# -- the rule, shared with the cluster's beat sweep -----------------------------------------------


def _session(sid: str, updated: datetime) -> Session:
    return Session(sid, head="h", created_at=updated, updated_at=updated)


@pytest.fixture
def now() -> Iterator[datetime]:
    yield datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_idle_and_unhandled_is_due_and_handled_since_its_last_change_is_not(now: datetime) -> None:
    idle = _session("idle", now - timedelta(minutes=31))
    active = _session("active", now - timedelta(minutes=5))
    never_pending = lambda _sid: None  # noqa: E731
    assert [d.session_id for d in due_sessions([idle, active], {}, now, 1800, 7200, never_pending)] == ["idle"]
    handled = {"idle": idle.updated_at.timestamp()}
    assert due_sessions([idle], handled, now, 1800, 7200, never_pending) == []
    earlier = {"idle": idle.updated_at.timestamp() - 1}  # handled, then the session changed
    assert [d.why for d in due_sessions([idle], earlier, now, 1800, 7200, never_pending)] == ["idle"]


def test_unwritten_turns_past_the_pending_bound_are_due_even_in_a_busy_session(now: datetime) -> None:
    busy = _session("busy", now - timedelta(minutes=1))
    old = lambda _sid: now - timedelta(hours=3)  # noqa: E731
    fresh = lambda _sid: now - timedelta(minutes=10)  # noqa: E731
    assert [d.why for d in due_sessions([busy], {}, now, 1800, 7200, old)] == ["stale"]
    assert due_sessions([busy], {}, now, 1800, 7200, fresh) == []


def test_a_pending_outcome_is_tried_again_and_any_other_settles() -> None:
    from scriptorium.errors import ReasonCode

    assert settles(NothingDue()) and settles(Written("r", (), 1, 1))
    assert settles(Failed(ReasonCode.COMMIT_REJECTED, "rejected twice"))
    assert not settles(Pending(ReasonCode.LOCK_HELD, "held"))


def test_a_torn_ledger_reads_as_empty_and_marks_merge(tmp_path: Path) -> None:
    ledger = HandledLedger(tmp_path)
    (tmp_path / "watcher.json").write_text("{not json")
    assert ledger.load() == {}
    ledger.mark({"a": 1.0})
    ledger.mark({"b": 2.0})
    assert ledger.load() == {"a": 1.0, "b": 2.0}


def test_a_session_no_hook_reported_is_found_in_a_folder_memory_reads_from(claude_home: Path, tmp_path: Path) -> None:
    """A session whose hooks never reached memory (``setup --server`` while the server was down): its
    transcript, new since the previous sweep in a folder an import read from, is imported and written; one
    that was there before that sweep (history from before memory) is left alone."""
    state = tmp_path / "state"
    MemoryWorkspace.init(state / "memory").close()  # as setup leaves it
    idle = {"SCRIPTORIUM_IDLE_MINUTES": "0.005"}
    known = transcript(claude_home, range(2))
    hook(state, common("Stop", session=SESSION, transcript=known), **WATCH)
    older = transcript(claude_home, range(2), session="cc-older")
    time.sleep(0.05)
    sweep(state, **idle)
    assert written(state, "cc-older") == 0, "the first sweep has no previous one to compare with"
    time.sleep(0.05)
    sweep(state, **idle)
    assert written(state, "cc-older") == 0, f"{older.name} changed before the previous sweep began"
    transcript(claude_home, range(4), session="cc-unreported")
    time.sleep(0.5)
    sweep(state, **idle)
    assert written(state, "cc-unreported") == 4, "every turn of it (the same texts as the others': no clean())"
    assert written(state, "cc-older") == 0


def test_a_transcript_named_before_the_runtime_writes_it_survives_a_sweep_in_between(
    claude_home: Path, tmp_path: Path
) -> None:
    """The prompt's hook names the transcript before the runtime has written it; a sweep runs then (the
    file is not there yet), and the runtime is killed after writing it: the next sweep still finds it."""
    state = tmp_path / "state"
    MemoryWorkspace.init(state / "memory").close()
    path = claude_home / "projects" / "-srv-app" / f"{SESSION}.jsonl"
    hook(state, common("UserPromptSubmit", session=SESSION, transcript=path, prompt="hello"), **WATCH)
    sweep(state)
    assert str(path) in json.loads((state / "watcher-seen.json").read_text()), "not there yet: kept"
    transcript(claude_home, range(2))
    time.sleep(0.5)
    sweep(state, SCRIPTORIUM_IDLE_MINUTES="0.005")
    assert clean(state, SESSION, 2)


def codex_cited(state: Path, session: str) -> dict[str, int]:
    """How many records cite each of the Codex session's messages."""
    return {k: n for k, n in records_citing(state / "memory").items() if k.startswith(f"codex/{session}/")}


def test_codex_sessions_run_before_its_hooks_were_trusted_are_imported_and_written_by_the_sweep(
    tmp_path: Path,
) -> None:
    """``scriptorium setup codex`` without ``--trust-hooks``: ``codex exec`` skips the hooks, so nothing ever
    names its rollouts to memory. Once a sweep runs (the first trusted session's SessionStart starts one),
    every rollout Codex wrote since setup is imported and written, once — a rollout created empty included,
    once it has lines; the ones from before setup are history memory was never given."""
    home, state = tmp_path / "home", tmp_path / "state"
    sessions = home / ".codex" / "sessions" / "2026" / "12"
    before = write(sessions / "01" / "rollout-2026-12-01T09-00-00-019b0000-0001.jsonl", rollout("019b0000-0001"))
    os.utime(before, (time.time() - 3600, time.time() - 3600))
    setup(home, state, "codex", "--no-writer")
    untrusted = write(sessions / "06" / "rollout-2026-12-06T10-00-00-019b0000-0002.jsonl", rollout("019b0000-0002"))
    empty = sessions / "07" / "rollout-2026-12-07T09-00-00-019b0000-0003.jsonl"  # a day no import read from
    empty.parent.mkdir()
    empty.touch()
    env = {"CODEX_HOME": str(home / ".codex"), "SCRIPTORIUM_IDLE_MINUTES": "0.005"}

    sweep(state, **env)
    cited = codex_cited(state, "019b0000-0002")
    assert len(cited) == 4 and set(cited.values()) == {1}, f"{untrusted.name}: its four turns, each once: {cited}"
    assert codex_cited(state, "019b0000-0001") == {}, "from before setup: not imported"

    write(empty, rollout("019b0000-0003"))  # the session Codex had just opened writes its lines
    time.sleep(0.5)
    sweep(state, **env)
    cited = codex_cited(state, "019b0000-0003")
    assert len(cited) == 4 and set(cited.values()) == {1}, f"{empty.name}, read once it had lines: {cited}"
    assert set(codex_cited(state, "019b0000-0002").values()) == {1}, "not imported, nor written, twice"
    assert codex_cited(state, "019b0000-0001") == {}
