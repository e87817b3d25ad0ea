"""The hook daemon: the context hooks answered without the command loading the settings or the index."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from scriptorium.runtimes.hooks import client as hook_client
from scriptorium.runtimes.hooks import daemon as hook_daemon
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.cluster.conftest import wait_for
from tests.helpers.daemon import client, socket_for
from tests.helpers.hooks import common, context, hook_process


def test_the_hook_daemon_answers_as_the_command_does_without_its_imports(state: Path, env: dict[str, str]) -> None:
    prompt = common("UserPromptSubmit", prompt="when do releases ship?")
    in_process = hook_process(state, prompt, SCRIPTORIUM_HOOK_DAEMON_IDLE_S="0").stdout
    assert "Releases ship on Thursdays" in in_process
    first = hook_process(state, prompt, **env)  # no daemon yet: answered in process, one started
    assert first.stdout == in_process
    path = socket_for(state)
    wait_for(lambda: path.exists() and hook_daemon.is_running(path), 30, "the hook daemon")
    out, loaded = client(state, prompt)
    assert out == in_process and loaded == []
    start, loaded = client(state, common("SessionStart", source="startup"))
    assert "<memory-context" in context(subprocess.CompletedProcess([], 0, start, ""), "SessionStart") and loaded == []
    # It answers from the installed files as they are now, not as they were when it started.
    with MemoryWorkspace(state / "memory") as ws:
        change = "# Garden\n\nThe roses are watered on Fridays [k](test/t1/m1).\n"
        ws.apply_changes([TopicChange("topics/garden.md", "create", change)], message="garden")
    out, loaded = client(state, common("UserPromptSubmit", prompt="when are the roses watered"))
    assert "roses are watered on Fridays" in out and loaded == []
    # A writing event goes to its queue: the command returns with nothing heavy loaded either.
    out, loaded = client(state, common("Stop"))
    assert out == "" and loaded == []


def test_a_stopped_daemon_leaves_nothing_behind_and_the_next_hook_starts_another(
    state: Path, env: dict[str, str]
) -> None:
    prompt = common("UserPromptSubmit", prompt="when do releases ship?")
    hook_process(state, prompt, **env)
    path = socket_for(state)
    wait_for(lambda: path.exists() and hook_daemon.is_running(path), 30, "the hook daemon")
    pid = int(path.with_suffix(".lock").read_text())
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not path.exists() and not hook_daemon.is_running(path), 30, "the daemon to end")
    out = hook_process(state, prompt, **env)  # answered in process again, and a new one started
    assert "Releases ship on Thursdays" in out.stdout
    wait_for(lambda: path.exists() and hook_daemon.is_running(path), 30, "the hook daemon")
    assert int(path.with_suffix(".lock").read_text()) != pid


def test_the_daemon_exits_when_idle(state: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCRIPTORIUM_HOOK_DAEMON_IDLE_S", "1")
    hook_process(state, common("SessionStart", source="startup"), **{**env, "SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "1"})
    path = socket_for(state)
    wait_for(lambda: path.exists(), 30, "the hook daemon")
    wait_for(lambda: not path.exists() and not hook_daemon.is_running(path), 30, "the daemon to end")


def test_other_settings_or_another_state_never_reach_a_running_daemon(
    tmp_path: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    here = hook_daemon.socket_path(tmp_path / "a")
    assert here == hook_daemon.socket_path(tmp_path / "a")
    assert here != hook_daemon.socket_path(tmp_path / "b")
    monkeypatch.setenv("SCRIPTORIUM_SEARCH_MODE", "hybrid")
    assert here != hook_daemon.socket_path(tmp_path / "a")


def test_a_socket_path_too_long_for_the_kernel_means_no_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("x" * 80)))
    assert hook_daemon.runtime_folder() is not None and hook_daemon.socket_path(tmp_path) is None


def test_a_socket_folder_open_to_others_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    (shared / "scriptorium").mkdir(parents=True)
    (shared / "scriptorium").chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    assert hook_daemon.runtime_folder() is None and hook_daemon.socket_path(tmp_path) is None


def test_a_daemon_that_takes_a_payload_and_stalls_yields_no_context_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "stall.sock"
    assert hook_daemon.ask(path, b"{}") is None, "nobody listening: the command answers itself"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    monkeypatch.setattr(hook_client, "ANSWER_TIMEOUT_S", 0.3)
    started = time.monotonic()
    assert hook_daemon.ask(path, b'{"hook_event_name": "UserPromptSubmit"}') == ""
    assert time.monotonic() - started < 3
    server.close()


def test_a_sigterm_between_the_socket_and_the_serving_loop_leaves_no_socket(
    state: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's SIGTERM handler exits (``SystemExit``) wherever it lands; landing right after the socket
    is made (a full run of the runtime tests hit that once) must not leave a socket nobody serves."""
    path = Path(tempfile.mkdtemp(prefix="sr-")) / "daemon.sock"
    made: list[Path] = []
    chmod = os.chmod

    def terminated_after_the_socket(target: Any, mode: int, *args: Any, **kwargs: Any) -> None:
        if Path(target) == path:  # the socket exists now: the SIGTERM comes
            made.append(path)
            raise SystemExit(0)
        chmod(target, mode, *args, **kwargs)

    handler = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(os, "chmod", terminated_after_the_socket)
    try:
        with pytest.raises(SystemExit):
            hook_daemon.serve(path, state)
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert made == [path], "the socket was made before the termination"
    assert not path.exists(), "a SIGTERM just after the socket was made left it behind"
    shutil.rmtree(path.parent, ignore_errors=True)
