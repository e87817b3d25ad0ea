"""The first answers of ``scriptorium mcp`` over stdio, given before the MCP SDK has loaded.

A runtime starts its MCP servers beside its first model request and lists only the tools of the servers
that have answered by then; importing the SDK, pydantic and the memory takes this server seconds, so
the tools would miss the first request. The front, standard library only, answers the handshake at once:

* ``initialize``, with the answer the SDK server gives (the protocol version negotiated the SDK's way),
* ``tools/list``, with the SDK server's own listing,

both read from :data:`LISTING`, a file written from the SDK server itself (``python -m
scriptorium.runtimes.mcp --write-listing``; a test fails when it differs from what the server answers).
Meanwhile the real server (:func:`scriptorium.runtimes.mcp.run_stdio`) loads in a thread; it is handed
every line in order, the ``initialize`` included so that its session is set up the same way, and its own
answer to that ``initialize`` is dropped: the client sees one answer per request. Every other message
(tool calls, resources, ``ping``) waits for it.

A first message other than ``initialize`` (a client of the handshake-less protocol) is passed through
untouched, as is everything when the listing cannot be read. Like the SDK's own stdio transport, the
front keeps the protocol's descriptors to itself: fd 0 reads the null device and fd 1 writes to stderr,
so a handler's stray output never reaches the wire.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

TYPE_CHECKING = False  # not typing's: this module runs before anything heavy is imported
if TYPE_CHECKING:
    from typing import Any, BinaryIO, TextIO

LISTING = Path(__file__).with_name("mcp_listing.json")
STOP_WAIT_S = 10.0
"""How long the front waits for the server to finish once the client closed stdin."""

_handoff: Handoff | None = None


class Wire:
    """The protocol's stdout, shared by the front and the server: whole lines, one writer at a time."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.drop_id: object = None
        """The id of the ``initialize`` the front answered: the server's own answer to it is dropped."""

    def send(self, message: dict[str, Any]) -> None:
        self.line(json.dumps(message, separators=(",", ":")))

    def line(self, text: str) -> None:
        with self.lock:
            self.out.write(text.encode("utf-8") + b"\n")
            self.out.flush()


class ServerOutput:
    """A text file for the SDK's stdio transport: what it writes goes to the wire, but for the answer to
    the ``initialize`` the front already gave."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            if line.strip() and not self._is_dropped(line):
                self.wire.line(line)
        return len(text)

    def _is_dropped(self, line: str) -> bool:
        if self.wire.drop_id is None:
            return False
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if isinstance(message, dict) and message.get("id") == self.wire.drop_id and "method" not in message:
            self.wire.drop_id = None
            return True
        return False

    def flush(self) -> None:
        pass


class Handoff:
    """What the real server reads and writes instead of the process's own stdin and stdout."""

    def __init__(self, reader: TextIO, output: ServerOutput) -> None:
        self.reader = reader
        self.output = output


def handoff() -> Handoff | None:
    """The streams the SDK server must serve when the front runs (None: serve stdio as usual)."""
    return _handoff


class Front:
    def __init__(self, listing: dict[str, Any], wire: Wire, to_server: BinaryIO) -> None:
        self.listing = listing
        self.wire = wire
        self.to_server = to_server
        self.first = True
        self.answering = False
        """Whether this connection opened with ``initialize`` (the front answers the handshake)."""

    def take(self, raw: bytes) -> None:
        message = _parse(raw)
        if self.first and raw.strip():
            self.first = False
            self.answering = self._answer_initialize(message)
        elif self.answering and self._answer_listing(message):
            return  # answered here; the server never sees it
        self.to_server.write(raw if raw.endswith(b"\n") else raw + b"\n")
        self.to_server.flush()

    def _answer_initialize(self, message: Any) -> bool:
        if not isinstance(message, dict) or message.get("method") != "initialize" or "id" not in message:
            return False
        params = message.get("params")
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        if not isinstance(requested, str):
            return False  # malformed: the server's own error answers it
        versions = self.listing["handshake_versions"]
        result = {**self.listing["initialize"], "protocolVersion": requested if requested in versions else versions[-1]}
        self.wire.drop_id = message["id"]
        self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
        return True

    def _answer_listing(self, message: Any) -> bool:
        if not isinstance(message, dict) or message.get("method") != "tools/list" or "id" not in message:
            return False
        params = message.get("params")
        if isinstance(params, dict) and params.get("cursor"):
            return False  # the listing has one page; a cursor is the server's to refuse
        self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": self.listing["tools/list"]})
        return True


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _read_listing() -> dict[str, Any] | None:
    try:
        listing = json.loads(LISTING.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(listing, dict) or not {"initialize", "tools/list", "handshake_versions"} <= listing.keys():
        return None
    return listing


def _claim_descriptors() -> tuple[BinaryIO, BinaryIO]:
    """The protocol's own copies of fd 0 and fd 1; fd 0 then reads the null device, fd 1 writes to stderr."""
    wire_in = os.fdopen(os.dup(0), "rb", buffering=0)
    wire_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout.flush()
    os.dup2(2, 1)
    return wire_in, wire_out


def serve(run_server: Callable[[], int]) -> int:
    """Answer the handshake while ``run_server`` (the CLI's ``mcp`` command) loads and then serves the
    rest; its exit code is the process's."""
    global _handoff
    listing = _read_listing()
    if listing is None:
        return run_server()
    wire_in, wire_out = _claim_descriptors()
    wire = Wire(wire_out)
    read_end, write_end = os.pipe()
    to_server = os.fdopen(write_end, "wb")
    _handoff = Handoff(os.fdopen(read_end, "r", encoding="utf-8", errors="replace"), ServerOutput(wire))
    front = Front(listing, wire, to_server)

    finished, eof = threading.Event(), threading.Event()
    code: list[int] = []

    def server() -> None:
        try:
            code.append(run_server())
        except SystemExit as exc:
            code.append(exc.code if isinstance(exc.code, int) else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
            code.append(1)
        finally:
            finished.set()

    def client() -> None:
        try:
            for raw in iter(wire_in.readline, b""):
                front.take(raw)
        except (OSError, ValueError):  # the server ended and closed its end: nothing more to hand on
            pass
        finally:
            eof.set()
            with contextlib.suppress(OSError):
                to_server.close()  # the server sees the end of its input and stops

    threading.Thread(target=server, name="mcp-server", daemon=True).start()
    threading.Thread(target=client, name="mcp-client", daemon=True).start()
    while not finished.wait(0.2):  # the server stops at the end of input, or earlier when it could not start
        if eof.is_set():
            finished.wait(STOP_WAIT_S)
            break
    sys.stderr.flush()
    return code[0] if code else 1
