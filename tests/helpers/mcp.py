"""``scriptorium mcp`` as the MCP SDK's own client reaches it: over stdio in a subprocess (:func:`run`), and over
HTTP (:func:`mcp_http`); a tool result's payload; the stdio handshake's messages (:func:`initialize`) and an
exchange of lines with a server process (:func:`exchange`)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from scriptorium.runtimes.mcp.front import LISTING
from tests.cluster.conftest import free_port, wait_for
from tests.helpers.hooks import SCRIPT
from tests.helpers.reports import show_logs


async def _session(state: Path, work: Any) -> Any:
    params = StdioServerParameters(command=str(SCRIPT), args=["mcp", "--state", str(state)], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await work(session)


@contextmanager
def mcp_http(state: Path) -> Iterator[str]:
    """``scriptorium mcp --http`` on a free port; yields its URL once it answers (401 without a token). When the
    block fails, the server's log (its stderr, beside ``state``) is printed with the failure."""
    port = free_port()
    log = state.parent / f"mcp-http-{port}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(SCRIPT), "mcp", "--http", "--port", str(port), "--state", str(state)],
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:

        def up() -> bool:
            try:
                return httpx.post(url, json={}, timeout=1).status_code == 401
            except httpx.HTTPError:
                return False

        wait_for(up, 30, "the MCP HTTP server")
        yield url
    except BaseException:
        show_logs([log])  # what the server said of a request that failed is in its log alone
        raise
    finally:
        proc.terminate()
        proc.wait(10)


def run(state: Path, work: Any) -> Any:
    return anyio.run(_session, state, work)


def payload(result: types.CallToolResult) -> dict[str, Any]:
    (content,) = result.content
    assert isinstance(content, types.TextContent)
    data = json.loads(content.text)
    assert data == result.structured_content and result.is_error is (not data["ok"])
    return data  # type: ignore[no-any-return]


VERSIONS = [*json.loads(Path(LISTING).read_text())["handshake_versions"], "1999-01-01"]


def initialize(request_id: Any, version: str) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def exchange(command: list[str], messages: list[dict[str, Any]], env: dict[str, str] | None = None) -> list[Any]:
    """Every line the server writes for ``messages``, stdin closed once each request is answered."""
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or dict(os.environ)
    )
    assert proc.stdin is not None and proc.stdout is not None
    wanted = {m["id"] for m in messages if "id" in m}
    watchdog = threading.Timer(60, proc.kill)  # a request nobody answers fails the test, not the suite
    watchdog.start()
    for message in messages:
        proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    lines: list[Any] = []
    try:
        while wanted - {line.get("id") for line in lines}:
            raw = proc.stdout.readline()
            assert raw, f"the server closed its output: {proc.stderr.read().decode() if proc.stderr else ''}"
            lines.append(json.loads(raw))
        proc.stdin.close()
        lines += [json.loads(raw) for raw in proc.stdout.read().splitlines() if raw.strip()]
        assert proc.wait(30) == 0
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    return lines
