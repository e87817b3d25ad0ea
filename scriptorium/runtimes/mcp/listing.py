"""What the MCP server answers before any workspace is open: the listing the front serves, written from the
server itself (``python -m scriptorium.runtimes.mcp.listing``; a test fails when the two differ), and the
in-process stdio round trip that asks it."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp.server import Server

from scriptorium.audience import OWNER_PRINCIPAL
from scriptorium.runtimes.mcp.front import LISTING
from scriptorium.runtimes.mcp.server import MemoryMCP
from scriptorium.settings import Settings


def listing() -> dict[str, Any]:
    """What the stdio server answers to open a connection and to :data:`LISTS`, in both eras of the
    protocol: ``initialize`` (at each handshake version), and, for each version of the handshake-less
    protocol, ``server/discover``. This is the front's
    :data:`~scriptorium.runtimes.mcp.front.LISTING`, written from the server itself so that the two never
    differ."""
    import mcp_types.version as versions

    def answers(messages: list[dict[str, Any]]) -> dict[Any, Any]:
        return asyncio_roundtrip(MemoryMCP(Settings(), OWNER_PRINCIPAL).server(), messages)

    handshake = answers(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize_params("1")},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "resources/list"},
            {"jsonrpc": "2.0", "id": 4, "method": "resources/templates/list"},
        ]
    )
    initialize = dict(handshake[1])
    initialize.pop("protocolVersion")
    modern = {}
    for version in versions.MODERN_PROTOCOL_VERSIONS:
        params = {"_meta": modern_meta(version)}
        found = answers(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": params},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": params},
                {"jsonrpc": "2.0", "id": 3, "method": "resources/list", "params": params},
                {"jsonrpc": "2.0", "id": 4, "method": "resources/templates/list", "params": params},
            ]
        )
        modern[version] = {"server/discover": found[1], **dict(zip(LISTS, (found[2], found[3], found[4]), strict=True))}
    return {
        "handshake_versions": list(versions.HANDSHAKE_PROTOCOL_VERSIONS),
        "initialize": initialize,
        "lists": dict(zip(LISTS, (handshake[2], handshake[3], handshake[4]), strict=True)),
        "modern": modern,
    }


LISTS = ("tools/list", "resources/list", "resources/templates/list")
"""The lists the front answers from the listing (none depends on the workspace nor on who asks)."""


def initialize_params(version: str) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "listing", "version": "1"}}


def modern_meta(version: str) -> dict[str, Any]:
    """The ``_meta`` every request of the handshake-less protocol carries (who asks, at which version)."""
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "listing", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def asyncio_roundtrip(server: Server[Any], messages: list[dict[str, Any]]) -> dict[Any, Any]:
    """``server``'s answers (by request id) to ``messages`` sent over its stdio transport, in process: its
    input ends once every request is answered."""
    import threading

    from mcp.server.stdio import stdio_server

    wanted = {m["id"] for m in messages if "id" in m}
    lines = [json.dumps(m) + "\n" for m in messages]
    answers: dict[Any, Any] = {}
    answered = threading.Event()

    class Given:
        def readline(self) -> str:
            if lines:
                return lines.pop(0)
            answered.wait(30)
            return ""

    class Written:
        def write(self, text: str) -> int:
            for line in text.splitlines():
                if line.strip() and "id" in (answer := json.loads(line)):
                    answers[answer["id"]] = answer.get("result", answer.get("error"))
            if wanted <= answers.keys():
                answered.set()
            return len(text)

        def flush(self) -> None:
            pass

    async def main() -> None:
        async with stdio_server(anyio.wrap_file(Given()), anyio.wrap_file(Written())) as (read, write):  # type: ignore[arg-type]
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    return answers


def write_listing() -> None:
    """``python -m scriptorium.runtimes.mcp.listing``: rewrite the front's listing from the server."""
    text = json.dumps(listing(), indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    with open(LISTING, "w", encoding="utf-8") as handle:
        handle.write(text)


if __name__ == "__main__":
    write_listing()
