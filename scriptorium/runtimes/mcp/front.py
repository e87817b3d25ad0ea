"""The first answers of ``scriptorium mcp`` over stdio, given before the MCP SDK has loaded.

A runtime starts its MCP servers beside its first model request and lists only the tools of the servers
that have answered by then; importing the SDK, pydantic and the memory takes this server seconds, so
the tools would miss the first request. The front, standard library only, answers the handshake at once:

* how the connection opens: ``initialize`` (the handshake; the protocol version negotiated the SDK's way)
  or, in the protocol without a handshake, ``server/discover`` (Claude Code's first request),
* ``tools/list``, ``resources/list`` and ``resources/templates/list``, with the SDK server's own lists for
  that era (none depends on the workspace or on who asks: topics are a template, not a list),

both read from :data:`LISTING`, a file written from the SDK server itself (``python -m
scriptorium.runtimes.mcp.listing``; a test fails when it differs from what the server answers).
The real server (:func:`scriptorium.runtimes.mcp.server.run_stdio`) loads in a thread at the first request only
it can answer (a tool call, a read, a ``ping``), so a session that calls no tool never pays for it. It is
handed every line in order, the opening included so that its connection is set up the same way, and its
own answer to that opening is dropped: the client sees one answer per request.

The front also answers the ``hook`` tool (:data:`HOOK_TOOL`), which a runtime's ``mcp_tool`` hooks call with
their event (Codex's per-turn hooks, :mod:`scriptorium.runtimes.codex`): it hands the event to the hook
daemon (:func:`scriptorium.runtimes.hooks.client.relay`), so a hook costs the runtime no process and the
server no load. With no daemon up, the front answers it in process with the hook's own imports, not the SDK
server's (a quarter of their time, on a cold first prompt's critical path), and starts one for the next.

A connection that opens otherwise (or at a version the listing does not hold) is passed through
untouched, as is everything when the listing cannot be read. Like the SDK's own stdio transport, the
front keeps the protocol's descriptors to itself: fd 0 reads the null device and fd 1 writes to stderr,
so a handler's stray output never reaches the wire.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from scriptorium.defaults import HOOK_TOOL
from scriptorium.runtimes.mcp import wire_json as json

TYPE_CHECKING = False  # not typing's: this module runs before anything heavy is imported
if TYPE_CHECKING:
    from typing import Any, BinaryIO, TextIO

LISTING = os.path.join(os.path.dirname(__file__), "listing.json")
"""A path string: pathlib and contextlib would add a tenth to the time to the first answer."""
STOP_WAIT_S = 30.0
"""How long the front waits for the server to finish once the client closed stdin: a hang's bound, well past a
server still loading on a loaded machine (10 s was reached in a CI run, and the process ended 0 before the
server could refuse its token). A runtime stopping its servers signals them and does not wait on this."""
HELD_BYTES = 16 << 10
"""Most bytes of notifications the front holds for a server not started yet (a pipe holds 64 KiB)."""
SIGNAL_POLL_S = 0.05
"""How often the main thread's waits return to run a pending signal handler (a SIGINT the kernel handed to
another thread)."""

_handoff: Handoff | None = None


class Wire:
    """The protocol's stdout, shared by the front and the server: whole lines, one writer at a time."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.drop_id: object = None
        """The id of the ``initialize`` the front answered: the server's own answer to it is dropped."""

    def send(self, message: dict[str, Any]) -> None:
        self.line(json.dumps(message))

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


VERSION_META = "io.modelcontextprotocol/protocolVersion"


class Front:
    def __init__(
        self,
        listing: dict[str, Any],
        wire: Wire,
        to_server: BinaryIO,
        need_server: Callable[[], None],
        argv: list[str] | None = None,
    ) -> None:
        self.listing = listing
        self.wire = wire
        self.to_server = to_server
        self.to_server_lock = threading.Lock()
        self.need_server = need_server
        """Start the server (once): a request came that only it can answer."""
        self.argv = argv
        """The ``mcp`` command's arguments (its ``--state``): the front relays ``hook`` calls to that state's
        hook daemon. None: it does not (the server answers them)."""
        self.forwarded = 0
        self.first = True
        self.lists: dict[str, Any] | None = None
        """The answers to ``tools/list`` and the resource lists in this connection's era, once the front
        answered how it opened (None: the connection is the server's alone)."""

    def take(self, raw: bytes) -> None:
        message = _parse(raw)
        if self.first and raw.strip():
            self.first = False
            self._answer_opening(message)
            if self.lists is None:
                self.need_server()  # the connection is the server's alone
        elif self.lists is not None and self._answer_listing(message):
            return  # answered here; the server never sees it
        elif self.lists is not None and self._relay_hook(message, raw):
            return  # answered from another thread (or handed on from there)
        elif self.lists is None or (isinstance(message, dict) and "id" in message) or message is None:
            self.need_server()  # a connection the front does not answer, a request, or a line to refuse
        self._forward(raw)

    def _forward(self, raw: bytes) -> None:
        with self.to_server_lock:
            self.forwarded += len(raw) + 1
            if self.forwarded > HELD_BYTES:
                self.need_server()  # what waits for the server must fit in the pipe it will read
            self.to_server.write(raw if raw.endswith(b"\n") else raw + b"\n")
            self.to_server.flush()

    def _relay_hook(self, message: Any, raw: bytes) -> bool:
        """A ``tools/call`` of :data:`HOOK_TOOL`: the hook daemon answers it, off the reading thread (a recall
        must not hold up the next request); with none up, the server does. False: not one the front takes
        (a server started with a token answers for that token, not the front)."""
        if self.argv is None or not isinstance(message, dict) or message.get("method") != "tools/call":
            return False
        params = message.get("params")
        if not isinstance(params, dict) or params.get("name") != HOOK_TOOL or "id" not in message:
            return False
        arguments = params.get("arguments")
        if not isinstance(arguments, dict) or os.environ.get("SCRIPTORIUM_TOKEN"):
            return False
        argv = self.argv

        def relay() -> None:
            from scriptorium.runtimes.hooks.client import relay

            try:
                answer = relay(argv, json.dumps(arguments).encode("utf-8"))
            except Exception:  # whatever went wrong, the server answers instead
                answer = None
            if answer is None:
                answer = _answer_here(argv, arguments)
            if answer is None:
                self.need_server()
                self._forward(raw)
                return
            result = {"content": [{"type": "text", "text": answer}], "isError": False}
            self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

        threading.Thread(target=relay, name="mcp-hook", daemon=True).start()
        return True

    def _answer_opening(self, message: Any) -> None:
        """``initialize`` (the handshake) or ``server/discover`` (the protocol without one), answered as the
        server would; the server still gets it, and its own answer is dropped."""
        if not isinstance(message, dict) or "id" not in message or not isinstance(message.get("params"), dict):
            return
        params = message["params"]
        if message.get("method") == "initialize" and isinstance(params.get("protocolVersion"), str):
            requested = params["protocolVersion"]
            versions = self.listing["handshake_versions"]
            negotiated = requested if requested in versions else versions[-1]
            result = {**self.listing["initialize"], "protocolVersion": negotiated}
            self.lists = self.listing["lists"]
        elif message.get("method") == "server/discover" and (era := self._modern(params)) is not None:
            result = era["server/discover"]
            self.lists = {method: answer for method, answer in era.items() if method != "server/discover"}
        else:
            return  # malformed, or a version the listing does not hold: the server answers
        self.wire.drop_id = message["id"]
        self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    def _modern(self, params: dict[str, Any]) -> Any:
        meta = params.get("_meta")
        version = meta.get(VERSION_META) if isinstance(meta, dict) else None
        return self.listing.get("modern", {}).get(version) if isinstance(version, str) else None

    def _answer_listing(self, message: Any) -> bool:
        assert self.lists is not None
        if not isinstance(message, dict) or message.get("method") not in self.lists or "id" not in message:
            return False
        params = message.get("params")
        if isinstance(params, dict) and params.get("cursor"):
            return False  # each list has one page; a cursor is the server's to refuse
        self.wire.send({"jsonrpc": "2.0", "id": message["id"], "result": self.lists[message["method"]]})
        return True


def _answer_here(argv: list[str], arguments: dict[str, Any]) -> str | None:
    """With no hook daemon up, the hook answered in this process as the command answers it (and a daemon
    started for the next): the hook's imports only, a quarter of the SDK server's, which a cold first prompt
    would otherwise wait for within the runtime's hook timeout. None: the settings could not be loaded (the
    server answers, and says why)."""
    from scriptorium.launch import with_site

    try:
        with_site()
        from pathlib import Path

        from scriptorium.runtimes.hooks.client import named_state
        from scriptorium.runtimes.hooks.daemon import answer_mcp_hook
        from scriptorium.settings import Settings

        state = named_state(argv)
        settings = Settings(state=Path(state)) if state is not None else Settings()
    except Exception:
        return None
    return answer_mcp_hook(settings, arguments)


def _warm_relay(argv: list[str]) -> None:
    """Import the hook client and name the daemon's socket ahead of the first ``hook`` call (SessionStart
    comes right after the handshake; these cost it several milliseconds otherwise)."""
    from scriptorium.runtimes.hooks.client import daemon_socket

    daemon_socket(argv)


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _read_listing() -> dict[str, Any] | None:
    try:
        listing = json.loads(_read(LISTING))
    except (OSError, ValueError):
        return None
    if not isinstance(listing, dict) or not {"initialize", "lists", "handshake_versions"} <= listing.keys():
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


def serve(run_server: Callable[[], int], argv: list[str] | None = None) -> int:
    """Answer how the connection opens and the lists, and start ``run_server`` (the CLI's ``mcp`` command)
    for the first request only it can answer: a session that never calls a tool never loads the server.
    ``argv``, the command's arguments, names the state whose hook daemon answers ``hook`` calls.
    With ``SCRIPTORIUM_TOKEN`` set the server starts at once, so that a token it refuses ends the process
    before any call. The exit code is the server's (0 when it never had to start)."""
    global _handoff
    listing = _read_listing()
    if listing is None:
        return run_server()
    wire_in, wire_out = _claim_descriptors()
    wire = Wire(wire_out)
    read_end, write_end = os.pipe()
    to_server = os.fdopen(write_end, "wb")
    _handoff = Handoff(os.fdopen(read_end, "r", encoding="utf-8", errors="replace"), ServerOutput(wire))

    started, finished, eof = threading.Event(), threading.Event(), threading.Event()
    woken = threading.Event()  # set after either of finished and eof: the main thread's one wait
    start_lock = threading.Lock()
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
            woken.set()

    def need_server() -> None:
        with start_lock:
            if not started.is_set():
                started.set()
                threading.Thread(target=server, name="mcp-server", daemon=True).start()

    front = Front(listing, wire, to_server, need_server, argv)
    if argv is not None:  # the first hook call must not wait for the client's imports and its socket's name
        threading.Thread(target=_warm_relay, args=(argv,), name="mcp-hook-warm", daemon=True).start()

    def client() -> None:
        try:
            for raw in iter(wire_in.readline, b""):
                front.take(raw)
        except (OSError, ValueError):  # the server ended and closed its end: nothing more to hand on
            pass
        finally:
            eof.set()
            try:  # noqa: SIM105 - no contextlib here (see LISTING)
                to_server.close()
            except OSError:
                pass  # the server sees the end of its input and stops
            woken.set()

    # SIGINT ends the process whatever it was started with: a parent that ignores it (a shell's background
    # job, a supervisor) hands that on through exec, and Python then leaves it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.environ.get("SCRIPTORIUM_TOKEN"):
        need_server()
    # The end of input ends the process at once (a runtime waits for its servers to exit before it does):
    # a server that was started gets up to STOP_WAIT_S to finish; one that could not start ends it earlier.
    # SIGINT is how Claude Code stops its servers (SIGTERM 100 ms later): the process ends then, quietly —
    # even while this thread still waits in start() for the client thread, which may have answered by then.
    # The waits poll: a signal the kernel hands to another of the process's threads only sets Python's flag,
    # and a main thread blocked in one long wait would never run the handler (the process would ignore the
    # SIGINT); a short wait returns, and the handler runs between two.
    try:
        threading.Thread(target=client, name="mcp-client", daemon=True).start()
        while not woken.wait(SIGNAL_POLL_S):
            pass
        deadline = time.monotonic() + STOP_WAIT_S
        while started.is_set() and not finished.wait(SIGNAL_POLL_S) and time.monotonic() < deadline:
            pass
    except KeyboardInterrupt:
        return 0
    sys.stderr.flush()
    return code[0] if code else 0


def stand_down() -> int:
    """A stdio server with nothing to offer: the Claude Code plugin's, where the settings files already
    name our server (:mod:`scriptorium.runtimes.plugin`), so the tools are not listed twice. It answers how
    the connection opens as the real server would, every list empty, ``ping``; any other request is an
    unknown method. Returns 0 when the client closes stdin."""
    listing = _read_listing()
    wire_in, wire_out = _claim_descriptors()
    wire = Wire(wire_out)
    lists: dict[str, Any] = {}
    for raw in iter(wire_in.readline, b""):
        message = _parse(raw)
        if not isinstance(message, dict) or "id" not in message:
            continue  # a notification, or a line that is no request
        method, params = message.get("method"), message.get("params")
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        result: Any = None
        if listing is not None and method == "initialize" and isinstance(params, dict):
            versions = listing["handshake_versions"]
            requested = params.get("protocolVersion")
            result = {**listing["initialize"], "protocolVersion": requested if requested in versions else versions[-1]}
            lists = _emptied(listing["lists"])
        elif listing is not None and method == "server/discover" and isinstance(params, dict):
            meta = params.get("_meta")
            version = meta.get(VERSION_META) if isinstance(meta, dict) else None
            era = listing.get("modern", {}).get(version) if isinstance(version, str) else None
            if isinstance(era, dict):
                result = era["server/discover"]
                lists = _emptied({m: answer for m, answer in era.items() if m != "server/discover"})
        elif method in lists:
            result = lists[method]
        elif method == "ping":
            result = {}
        if result is None:
            reply["error"] = {"code": -32601, "message": f"{method}: the settings files serve this memory"}
        else:
            reply["result"] = result
        wire.send(reply)
    return 0


def _emptied(lists: dict[str, Any]) -> dict[str, Any]:
    """Each list answer with its items left out (``tools``, ``resources``, ``resourceTemplates``)."""
    return {
        method: {key: [] if isinstance(value, list) else value for key, value in answer.items()}
        for method, answer in lists.items()
        if isinstance(answer, dict)
    }
