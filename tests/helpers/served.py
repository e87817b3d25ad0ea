"""The owner REST API as the tests reach it: :class:`AppServer`, the app ``scriptorium serve`` serves, in this
process; :class:`Server`, the command itself on a free port, for what needs a real process and socket
(connection limits, a browser, a second process on the same state, the command end to end)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from starlette.testclient import TestClient

from tests.cluster.conftest import free_port, wait_for
from tests.helpers.edge import umask_kept

ROOT = Path(__file__).resolve().parents[2]


def api_world(state: Path) -> None:
    """A workspace at ``state/memory``: four archived sources (test/t1/m0..m3) and topics/a.md citing m1."""
    from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange

    ws = MemoryWorkspace.init(state / "memory")
    with ws.lock():
        paths = ws.archive_sources(
            [SourceMessage("test", "t1", f"m{n}", "user", "2026-11-01T00:00:00Z", f"m{n}") for n in range(4)]
        )
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes(
        [TopicChange("topics/a.md", "create", "# A\n\n2026-11-01: Tea [tea](test/t1/m1).\n")], message="seed"
    )
    ws.close()


class Server:
    """``scriptorium serve --state STATE`` on a free port, with ``env`` added to its environment."""

    def __init__(self, state: Path, **env: str) -> None:
        self.state = state
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scriptorium.cli.main", "serve", "--state", str(state), "--port", str(self.port)],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        wait_for(lambda: up(self.url), 30, "the API server")
        self.token = (state / "owner-token").read_text().strip()
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)

    def anonymous(self) -> httpx.Client:
        """A client without a token (close it after)."""
        return httpx.Client(base_url=self.url, timeout=30)

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(10)


def up(url: str) -> bool:
    """Whether the API at ``url`` answers its OpenAPI document."""
    try:
        return httpx.get(f"{url}/openapi.json", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


class _Beside(TestClient):
    """A test client on an app another client runs: entering it starts no second lifespan."""

    def __enter__(self) -> _Beside:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class AppServer:
    """The app ``scriptorium serve --state STATE`` serves, built as the command builds it (the settings it
    reads, with ``env`` in the environment while this serves; the owner token; :func:`create_app`), its
    lifespan running, reached through Starlette's test client from a loopback address: no process, no socket.

    The same attributes as :class:`Server`: ``client`` carries the owner token, :meth:`anonymous` none."""

    url = "http://127.0.0.1"
    peer = ("127.0.0.1", 50000)

    def __init__(self, state: Path, **env: str) -> None:
        from scriptorium.access.owner import owner_token
        from scriptorium.settings import Settings
        from scriptorium.web.app import create_app

        self.state = state
        self._env = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        self._umask = umask_kept()
        self._umask.__enter__()
        from scriptorium.locations import private_umask

        private_umask()  # as the command runs: what the server creates is the user's alone
        try:
            settings = Settings(state=state)
            owner_token(settings.state)  # as `scriptorium serve` makes it before serving
            self.app = create_app(settings)
            self.token = (state / "owner-token").read_text().strip()
            self.client = self._client({"Authorization": f"Bearer {self.token}"})
            self.client.__enter__()  # the lifespan: the watcher, the MCP session manager
        except BaseException:
            self._restore()
            raise

    def _client(self, headers: dict[str, str] | None = None) -> TestClient:
        return TestClient(self.app, base_url=self.url, headers=headers, follow_redirects=False, client=self.peer)

    def anonymous(self) -> TestClient:
        """A client without a token, on the same running app (usable in a ``with`` block)."""
        other = _Beside(self.app, base_url=self.url, follow_redirects=False, client=self.peer)
        other.portal = self.client.portal
        return other

    def close(self) -> None:
        try:
            self.client.__exit__(None, None, None)
        finally:
            self._restore()

    def _restore(self) -> None:
        self._umask.__exit__(None, None, None)
        for name, value in self._env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
