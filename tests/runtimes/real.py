"""A user's machine for the released runtime CLIs: a home of its own, the per-user memory setup made, and
the scripted model server (:mod:`tests.model_server`) as every runtime's model.

The CLIs are the pinned releases of ``tests/runtimes/clis`` (installed from npm by the ``runtime-clis``
requirement); each runs headless with an environment built here from nothing but ``PATH``, so that no
setting of the machine running the tests reaches them. That ``PATH`` has them first, as a user who installed
them has them (``scriptorium setup`` asks the runtime on ``PATH`` its version before it writes), with an
``openclaw`` that runs the pinned OpenClaw on the Node it needs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scriptorium.sessions import open_store
from scriptorium.settings import Settings
from tests.checks import by_message, exactly_once, records_citing
from tests.cluster.conftest import wait_for
from tests.model_server import ModelServer
from tests.requirements import OPENCLAW, OPENCLAW_NODE, RUNTIME_CLIS, cli, require

SCRIPT = Path(sys.executable).with_name("scriptorium")


@dataclass
class Machine:
    home: Path
    project: Path
    model: ModelServer
    runtime_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def state(self) -> Path:
        """The per-user memory setup records (``$XDG_DATA_HOME/scriptorium``)."""
        return self.home / ".local" / "share" / "scriptorium"

    @property
    def path(self) -> str:
        """``PATH`` with the pinned runtime CLIs first (and ``openclaw`` on its own Node: :func:`openclaw_on_path`)."""
        folders = [self.runtime_dir / "bin", RUNTIME_CLIS / "node_modules" / ".bin"]
        return os.pathsep.join([*map(str, folders), os.environ["PATH"]])

    @property
    def env(self) -> dict[str, str]:
        return {
            "PATH": self.path,
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
            "ANTHROPIC_BASE_URL": self.model.url,
            "ANTHROPIC_API_KEY": "sk-scripted",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "SCRIPTED_API_KEY": "sk-scripted",
            "CODEX_HOME": str(self.home / ".codex"),
            **self.extra_env,
        }

    def run(self, argv: list[str], timeout: float = 120, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=self.project, env=self.env, input=input, capture_output=True, text=True, timeout=timeout
        )

    def scriptorium(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.run([str(SCRIPT), *args])
        assert done.returncode == 0, done.stderr
        return done

    def claude(self, prompt: str, *flags: str, timeout: float = 120) -> dict[str, Any]:
        """``claude -p PROMPT --output-format json``: its result object."""
        done = self.run([str(cli("claude")), "-p", prompt, "--output-format", "json", *flags], timeout=timeout)
        assert done.returncode == 0, f"claude -p failed: {done.stdout[-2000:]} {done.stderr[-2000:]}"
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def popen(
        self,
        argv: list[str],
        stdin: int = subprocess.DEVNULL,
        stderr: int = subprocess.PIPE,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[str]:
        """``argv`` started in the project with this machine's environment (or ``env``), stdout piped (text)."""
        return subprocess.Popen(
            argv,
            cwd=self.project,
            env=env or self.env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # its own group: a kill reaches the CLI and what it started
        )

    def codex_config(self) -> None:
        """Codex's own config: the scripted server as its model provider (Responses API)."""
        codex_home = self.home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "gpt-5"\n'
            'model_provider = "scripted"\n'
            "[model_providers.scripted]\n"
            'name = "scripted"\n'
            f'base_url = "{self.model.url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "SCRIPTED_API_KEY"\n'
        )

    def pi_config(self) -> None:
        """pi's own models file: the scripted server as a provider of its own (Anthropic Messages)."""
        agent = self.home / ".pi" / "agent"
        agent.mkdir(parents=True, exist_ok=True)
        provider = {"baseUrl": self.model.url, "api": "anthropic-messages", "apiKey": "sk-scripted"}
        models = {"providers": {"scripted": {**provider, "models": [{"id": "scripted-model", "name": "Scripted"}]}}}
        (agent / "models.json").write_text(json.dumps(models))

    def pi(self, prompt: str, *flags: str) -> None:
        """``pi -p PROMPT`` on the scripted provider, offline."""
        argv = [str(cli("pi")), "-p", "--offline", "--provider", "scripted", "--model", "scripted-model", *flags]
        done = self.run([*argv, prompt], timeout=120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    def openclaw_config(self, context_window: int | None = None) -> None:
        """OpenClaw's own config: the scripted server as a provider of its own (Anthropic Messages), its model's
        context window ``context_window`` tokens when given (OpenClaw compacts as the reported usage nears it).
        The pinned OpenClaw is installed first: setup asks the ``openclaw`` on ``PATH`` its version."""
        require("openclaw")
        folder = self.home / ".openclaw"
        folder.mkdir(parents=True, exist_ok=True)
        provider = {"baseUrl": self.model.url, "apiKey": "sk-scripted", "api": "anthropic-messages"}
        model: dict[str, Any] = {"id": "scripted-model", "name": "Scripted"}
        if context_window is not None:
            model |= {"contextWindow": context_window, "maxTokens": context_window // 8}
        config = {
            "agents": {"defaults": {"model": {"primary": "scripted/scripted-model"}}},
            "models": {"mode": "merge", "providers": {"scripted": {**provider, "models": [model]}}},
        }
        (folder / "openclaw.json").write_text(json.dumps(config, indent=2) + "\n")

    @property
    def openclaw_env(self) -> dict[str, str]:
        """This machine's environment with the pinned Node OpenClaw needs first on ``PATH``."""
        return {**self.env, "PATH": f"{OPENCLAW_NODE}{os.pathsep}{self.env['PATH']}"}

    def openclaw_argv(self, prompt: str, *flags: str) -> list[str]:
        """``openclaw agent --local -m PROMPT``: one embedded turn, no gateway."""
        require("openclaw")
        return [str(OPENCLAW / "node_modules" / ".bin" / "openclaw"), "agent", "--local", "-m", prompt, *flags]

    def openclaw(self, prompt: str, *flags: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """:meth:`openclaw_argv` run to its end on the pinned Node."""
        argv, env = self.openclaw_argv(prompt, *flags), self.openclaw_env
        done = subprocess.run(argv, cwd=self.project, env=env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done

    def session_ids(self) -> set[str]:
        """The sessions this machine's store holds."""
        store = open_store(Settings(state=self.state).session_store_url)
        try:
            return {session.id for session in store.list_sessions()}
        finally:
            store.close()

    def written_once(self, session: str) -> dict[str, int] | None:
        """Exactly-once counts over the session's content turns (None until it has some)."""
        store = open_store(Settings(state=self.state).session_store_url)
        try:
            nodes = sorted(store.content_node_ids(session))
            if not nodes:
                return None
            return exactly_once(self.state / "memory", store, [(session, node) for node in nodes])
        finally:
            store.close()

    def clean(self, session: str, turns: int) -> bool:
        """The session has ``turns`` content turns, each written exactly once. Polled while the runtime's
        background writes run: the store's turns and the topics' citations are read first, and the checks that
        run git (the install against HEAD) only once those already agree."""
        store = open_store(Settings(state=self.state).session_store_url)
        try:
            nodes = store.content_node_ids(session)
        finally:
            store.close()
        cited = by_message(records_citing(self.state / "memory"))
        if len(nodes) != turns or any(cited.get(node, 0) != 1 for node in nodes):
            return False
        return self.written_once(session) == {
            "turns": turns,
            "lost": 0,
            "duplicated": 0,
            "unmarked": 0,
            "partial_installs": 0,
        }

    def wait_written(self, session: str, turns: int, timeout: float, what: str) -> None:
        """Wait until :meth:`clean`; a timeout says what was found instead: the counts, the writer history
        and the background log (the hook daemon's, the watcher's and the background writes')."""
        try:
            wait_for(lambda: self.clean(session, turns), timeout, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnostics(session)}") from None

    def diagnostics(self, session: str) -> str:
        def tail(path: Path, lines: int = 40) -> str:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else "(none)"

        return "\n".join(
            [
                f"counts: {self.written_once(session)}",
                f"history:\n{tail(self.state / 'memory' / '.scriptorium' / 'history.jsonl')}",
                f"seen: {tail(self.state / 'watcher-seen.json')}",
                f"background log:\n{tail(self.state / 'logs' / 'background.log')}",
            ]
        )

    def stop_daemons(self) -> None:
        """End the hook daemons this machine's hooks started (their lock files hold their PIDs). A lock file
        can be empty (a daemon that found another up opens it and leaves): no PID, nothing to end — and
        never ``kill(0)``, which would end this process's whole group."""
        pids = {
            int(p)
            for lock in (self.runtime_dir / "scriptorium").glob("*.lock")
            if (p := lock.read_text().strip()).isdigit()
        }
        pids |= starting_daemons(self.state)
        for pid in pids - {0}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


def starting_daemons(state: Path) -> set[int]:
    """The hook daemons of ``state`` that have no lock yet: one a hook started just before the runtime
    exited is still starting when the test ends (and would make the runtime folder again, and idle for a
    quarter hour)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"scriptorium.runtimes.hooks.daemon" in argv and str(state).encode() in argv:
            found.add(int(entry.name))
    return found


@contextlib.contextmanager
def machine(tmp_path: Path, **extra_env: str) -> Iterator[Machine]:
    require("runtime-clis")
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    runtime_dir = Path(tempfile.mkdtemp(prefix="sr-"))  # short: a socket's path has a length limit
    openclaw_on_path(runtime_dir / "bin")
    model = ModelServer()
    found = Machine(home, project, model, runtime_dir, dict(extra_env))
    try:
        yield found
    finally:
        found.stop_daemons()
        model.close()
        shutil.rmtree(runtime_dir, ignore_errors=True)


def openclaw_on_path(folder: Path) -> None:
    """An ``openclaw`` in ``folder`` that runs the pinned OpenClaw on the pinned Node (the machine's own may be
    older than OpenClaw needs), as ``npm install -g openclaw`` gives a user with that Node."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "openclaw"
    shim.write_text(
        f"#!/bin/sh\nPATH={shlex.quote(str(OPENCLAW_NODE))}:$PATH exec "
        f'{shlex.quote(str(OPENCLAW / "node_modules" / ".bin" / "openclaw"))} "$@"\n'
    )
    shim.chmod(0o755)


def kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


APP_SERVER_HANG_S = 240.0
"""How long an app-server that still runs may take to answer before it counts as hung."""


class AppServer:
    """``codex app-server`` over stdio (JSON-RPC lines): what an IDE drives, and the one way to revert a
    thread (``thread/revert``)."""

    def __init__(self, user: Machine) -> None:
        self.proc = user.popen([str(cli("codex")), "app-server"], stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.messages: list[dict[str, Any]] = []
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {"clientInfo": {"name": "scriptorium-tests", "version": "1"}})
        self._send({"method": "initialized"})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.messages.append(json.loads(line))

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        ask = self.next_id
        self._send({"id": ask, "method": method, "params": params})
        answer = self._wait(lambda: next((m for m in self.messages if m.get("id") == ask), None), method)
        assert "result" in answer, answer
        return answer["result"]  # type: ignore[no-any-return]

    def turn(self, thread: str, text: str) -> str:
        """Run one turn to its end; its turn ID."""
        seen = len(self.messages)
        started = self.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": text}]})
        self._wait(lambda: any(m.get("method") == "turn/completed" for m in self.messages[seen:]), f"turn {text!r}")
        return str(started["turn"]["id"])

    def _wait(self, found: Callable[[], Any], what: str) -> Any:
        """Wait for ``found`` while the app-server runs: until it is found or the process ends. A fixed limit
        (it was 60 s for an answer) is reached on a loaded machine, where a thread's start runs its MCP server
        and hooks; only a hang runs into this bound, inside pytest-timeout's 300 s."""
        wait_for(lambda: found() or self.proc.poll() is not None, APP_SERVER_HANG_S, what)
        value = found()
        assert value, f"codex app-server exited ({self.proc.returncode}) before {what}: {self.messages[-5:]}"
        return value

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
