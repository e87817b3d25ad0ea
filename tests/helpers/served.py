"""The owner REST API as the tests reach it: :class:`AppServer`, the app ``scriptorium serve`` serves, in this
process through the test client; :class:`ThreadServer`, the same app behind uvicorn as the command runs it,
in a thread of this process on a free port (a real socket, for clients that need a URL); :class:`Server`,
the command itself, for what needs a process of its own (its memory measured, a second process on the same
state, the command end to end)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from starlette.testclient import TestClient

from scriptorium.settings import Settings
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


@contextmanager
def served_settings(state: Path, env: dict[str, str]) -> Iterator[Settings]:
    """The settings ``scriptorium serve --state STATE`` reads with ``env`` in the environment (set for the
    block), under the command's private umask, the owner token made as the command makes it."""
    from scriptorium.access.owner import owner_token
    from scriptorium.locations import private_umask

    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        with umask_kept():
            private_umask()
            settings = Settings(state=state)
            owner_token(settings.state)
            yield settings
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class ThreadServer:
    """``scriptorium serve --state STATE`` in a thread of this process: the app :func:`create_app` builds behind
    uvicorn with the command's connection admission (:mod:`scriptorium.web.serving`), on a free port; ``env``
    is in the environment and the command's umask set while it serves. The same attributes as :class:`Server`."""

    def __init__(self, state: Path, **env: str) -> None:
        import uvicorn
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        from scriptorium.web.app import create_app
        from scriptorium.web.serving import Admission, descriptor_share, guarded, trusted_proxies

        self.state = state
        self._settings = served_settings(state, env)
        settings = self._settings.__enter__()
        try:
            self.port = free_port()
            admission = Admission(
                descriptor_share(settings.max_connections, 2),
                settings.max_client_connections,
                trusted_proxies(settings.forwarded_allow_ips),
            )
            config = uvicorn.Config(
                create_app(settings),
                host="127.0.0.1",
                port=self.port,
                log_level="warning",
                http=guarded(AutoHTTPProtocol, admission, settings.header_timeout_s),
                timeout_keep_alive=settings.keep_alive_s,
            )
            self.uvicorn = uvicorn.Server(config)
            self.thread = threading.Thread(target=self.uvicorn.run, name="scriptorium-serve", daemon=True)
            self.thread.start()
            wait_for(lambda: self.uvicorn.started or not self.thread.is_alive(), 30, "the API server")
            assert self.uvicorn.started, "the server thread ended before it served"
            self.url = f"http://127.0.0.1:{self.port}"
            self.token = (state / "owner-token").read_text().strip()
            self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        except BaseException:
            self._settings.__exit__(None, None, None)
            raise

    def anonymous(self) -> httpx.Client:
        """A client without a token (close it after)."""
        return httpx.Client(base_url=self.url, timeout=30)

    def close(self) -> None:
        try:
            self.client.close()
            self.uvicorn.should_exit = True
            self.thread.join(30)
            assert not self.thread.is_alive(), "the server thread did not stop"
        finally:
            self._settings.__exit__(None, None, None)


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
        from scriptorium.web.app import create_app

        self.state = state
        self._settings = served_settings(state, env)
        settings = self._settings.__enter__()
        try:
            self.app = create_app(settings)
            self.token = (state / "owner-token").read_text().strip()
            self.client = self._client({"Authorization": f"Bearer {self.token}"})
            self.client.__enter__()  # the lifespan: the watcher, the MCP session manager
        except BaseException:
            self._settings.__exit__(None, None, None)
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
            self._settings.__exit__(None, None, None)
