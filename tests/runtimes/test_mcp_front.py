"""The stdio front of ``scriptorium mcp``: the handshake answered before the server has loaded, with the
server's own answers, and every other message handed to the server, each answered once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from scriptorium.runtimes.mcp.front import LISTING
from scriptorium.runtimes.mcp.listing import asyncio_roundtrip, listing, modern_meta
from scriptorium.runtimes.mcp.server import MemoryMCP
from scriptorium.settings import Settings
from tests.helpers.mcp import INITIALIZED, VERSIONS, exchange, initialize

SCRIPT = Path(sys.executable).with_name("scriptorium")


def test_the_listing_is_what_the_server_answers() -> None:
    assert json.loads(Path(LISTING).read_text()) == listing(), (
        "the front's listing is stale: run `python -m scriptorium.runtimes.mcp.listing`"
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_the_front_answers_the_handshake_as_the_server_does(state: Path, version: str) -> None:
    messages = [initialize(1, version), INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    served = exchange([str(SCRIPT), "mcp", "--state", str(state)], messages)
    server = asyncio_roundtrip(MemoryMCP(Settings(state=state)).server(), messages)
    assert {line["id"]: line["result"] for line in served} == server
    assert served[0]["result"]["protocolVersion"] == (version if version in VERSIONS[:-1] else VERSIONS[-2])


MODERN = [*json.loads(Path(LISTING).read_text())["modern"], "2099-01-01"]


@pytest.mark.parametrize("version", MODERN)
def test_the_front_opens_a_handshake_less_connection_as_the_server_does(state: Path, version: str) -> None:
    """Claude Code opens with ``server/discover`` and sends the version and its name in every request."""
    meta = {**modern_meta(version), "io.modelcontextprotocol/clientInfo": {"name": "claude-code", "version": "2"}}
    messages = [
        {"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 0, "method": "resources/list", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"_meta": meta, "name": "memory_status"}},
    ]
    served = exchange([str(SCRIPT), "mcp", "--state", str(state)], messages)
    server = asyncio_roundtrip(MemoryMCP(Settings(state=state)).server(), messages)
    assert sorted(map(str, (line["id"] for line in served))) == ["0", "1", "2", "probe"]
    answers = {line["id"]: line.get("result", line.get("error")) for line in served}
    assert answers["probe"] == server["probe"] and answers[1] == server[1] and answers[0] == server[0]
    if version in MODERN[:-1]:
        assert json.loads(answers[2]["content"][0]["text"])["ok"] is True


def test_each_request_is_answered_once_and_calls_reach_the_server(state: Path) -> None:
    messages = [
        initialize("a", VERSIONS[-2]),
        INITIALIZED,
        {"jsonrpc": "2.0", "id": "b", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "c", "method": "ping"},
        {"jsonrpc": "2.0", "id": "d", "method": "tools/call", "params": {"name": "memory_status", "arguments": {}}},
        {"jsonrpc": "2.0", "id": "e", "method": "resources/list"},
        {"jsonrpc": "2.0", "id": "f", "method": "tools/list", "params": {"cursor": "x"}},
    ]
    lines = exchange([str(SCRIPT), "mcp", "--state", str(state)], messages)
    assert sorted(line["id"] for line in lines) == ["a", "b", "c", "d", "e", "f"]
    by_id = {line["id"]: line for line in lines}
    status = json.loads(by_id["d"]["result"]["content"][0]["text"])
    assert status["ok"] is True and status["records"] > 0
    assert [r["uri"] for r in by_id["e"]["result"]["resources"]] == ["scriptorium://core"]


def test_a_connection_that_does_not_open_with_initialize_is_the_servers(state: Path) -> None:
    messages = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]
    served = exchange([str(SCRIPT), "mcp", "--state", str(state)], messages)
    server = asyncio_roundtrip(MemoryMCP(Settings(state=state)).server(), messages)
    assert len(served) == 1 and "error" in served[0] and served[0]["error"] == server[1]


OPENINGS = {
    "initialize": [
        initialize(1, VERSIONS[-2]),
        INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/list"},
    ],
    "server/discover": [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta(MODERN[0])}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": modern_meta(MODERN[0])}},
        {"jsonrpc": "2.0", "id": 4, "method": "resources/list", "params": {"_meta": modern_meta(MODERN[0])}},
    ],
}


@pytest.mark.parametrize("opening", OPENINGS)
def test_the_opening_is_answered_while_the_server_is_still_loading(state: Path, tmp_path: Path, opening: str) -> None:
    """The server is held before it loads until the test has its answers to the opening and the listing:
    they cannot have come from it."""
    go = tmp_path / "go"
    program = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from scriptorium.runtimes.mcp.front import serve

        def server():
            while not Path({str(go)!r}).exists():
                time.sleep(0.02)
            from scriptorium.cli.main import main
            return main(["mcp", "--state", {str(state)!r}])

        raise SystemExit(serve(server))
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    watchdog = threading.Timer(60, proc.kill)  # a front that waits for the server would block forever
    watchdog.start()
    try:
        for message in OPENINGS[opening]:
            proc.stdin.write((json.dumps(message) + "\n").encode())
        call = {"name": "memory_status", **({"_meta": modern_meta(MODERN[0])} if opening == "server/discover" else {})}
        proc.stdin.write(
            (json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}) + "\n").encode()
        )
        proc.stdin.flush()
        first, second = json.loads(proc.stdout.readline()), json.loads(proc.stdout.readline())
        resources = json.loads(proc.stdout.readline())
        assert not go.exists() and (first["id"], second["id"], resources["id"]) == (1, 2, 4)
        assert [r["uri"] for r in resources["result"]["resources"]] == ["scriptorium://core"]
        assert [t["name"] for t in second["result"]["tools"]] == [
            "memory_status",
            "memory_get",
            "memory_search",
            "memory_update",
            "memory_remember",
            "hook",
        ]
        go.touch()
        third = json.loads(proc.stdout.readline())
        assert third["id"] == 3 and json.loads(third["result"]["content"][0]["text"])["ok"] is True
        proc.stdin.close()
        assert proc.wait(30) == 0
        assert proc.stdout.read() == b"", "the server's own answer to initialize reached the client"
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()


def test_a_server_that_cannot_start_ends_the_process_with_its_error(state: Path) -> None:
    env = {**os.environ, "SCRIPTORIUM_TOKEN": "not-a-token"}
    proc = subprocess.run(
        [str(SCRIPT), "mcp", "--state", str(state)],
        input=(json.dumps(initialize(1, VERSIONS[-2])) + "\n").encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode != 0 and b"FORBIDDEN" in proc.stderr


def test_stray_output_of_the_server_never_reaches_the_wire(state: Path, tmp_path: Path) -> None:
    program = textwrap.dedent(
        f"""
        import os
        from scriptorium.runtimes.mcp.front import serve

        def server():
            print("stray print")
            os.write(1, b"stray write\\n")
            from scriptorium.cli.main import main
            return main(["mcp", "--state", {str(state)!r}])

        raise SystemExit(serve(server))
        """
    )
    messages = [initialize(1, VERSIONS[-2]), INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    lines = exchange([sys.executable, "-c", program], messages)
    assert [line["id"] for line in lines] == [1, 2]


def test_a_session_that_calls_nothing_never_loads_the_server(state: Path, tmp_path: Path) -> None:
    loaded = tmp_path / "loaded"
    program = textwrap.dedent(
        f"""
        from pathlib import Path
        from scriptorium.runtimes.mcp.front import serve

        def server():
            Path({str(loaded)!r}).touch()
            from scriptorium.cli.main import main
            return main(["mcp", "--state", {str(state)!r}])

        raise SystemExit(serve(server))
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "SCRIPTORIUM_TOKEN"}
    listed = exchange([sys.executable, "-c", program], OPENINGS["server/discover"], env=env)
    assert [line["id"] for line in listed] == [1, 2, 4] and not loaded.exists()
    called = [*OPENINGS["server/discover"], {"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {}}]
    assert [line["id"] for line in exchange([sys.executable, "-c", program], called, env=env)] == [1, 2, 4, 5]
    assert loaded.exists()


def _ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("end", ["SIGINT", "SIGINT, started ignoring it", "end of input"])
def test_the_runtimes_way_of_stopping_a_server_ends_it_at_once_and_quietly(state: Path, end: str) -> None:
    """Claude Code stops a stdio server with SIGINT and polls for its exit; Codex closes its input. Either
    ends the front within a moment, with exit status 0 and nothing on stderr — SIGINT too when the process was
    started with it ignored (a disposition exec keeps: a shell's background job, or the test run's worker,
    where this hung the full suite now and then)."""
    proc = subprocess.Popen(
        [str(SCRIPT), "mcp", "--state", str(state)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_ignoring_sigint if end == "SIGINT, started ignoring it" else None,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write((json.dumps(initialize(1, "2025-06-18")) + "\n").encode())
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 1
    started = time.monotonic()
    if end.startswith("SIGINT"):
        proc.send_signal(signal.SIGINT)
    else:
        proc.stdin.close()
    assert proc.wait(10) == 0
    assert time.monotonic() - started < 1.0, "the runtime waits for this exit before its own"
    assert proc.stderr.read() == b""


_POKED = """
import os, signal, sys, threading
from scriptorium.runtimes.mcp import front as mcp_front

def poke():
    os.read(int(sys.argv[1]), 1)  # the test has its answer: the main thread waits for the client's end
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # to this thread, not the main one

threading.Thread(target=poke, daemon=True).start()
sys.exit(mcp_front.serve(lambda: 0, None))
"""


def test_a_sigint_the_kernel_hands_to_another_thread_still_ends_the_server() -> None:
    """A process-wide SIGINT may land on any thread that does not block it; Python then only sets a flag, and
    a main thread blocked in one long wait never ran the handler: the front ignored Claude Code's stop (the
    full suite's rare hang). Delivered here to a thread that is not the main one, it still ends the process."""
    go_read, go_write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", _POKED, str(go_read)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(go_read,),
    )
    os.close(go_read)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write((json.dumps(initialize(1, "2025-06-18")) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        os.write(go_write, b"!")
        assert proc.wait(10) == 0
    finally:
        os.close(go_write)
        if proc.poll() is None:
            proc.kill()
    assert proc.stderr.read() == b""


def test_the_front_loads_no_json_module_and_speaks_json_as_the_json_module_does() -> None:
    """:mod:`json` brings :mod:`re` and :mod:`enum` (a third of the time to the first answer): the front uses
    the same C accelerator through :mod:`scriptorium.runtimes.mcp.wire_json`, with the same results."""
    from scriptorium.runtimes.mcp import wire_json

    root = str(Path(wire_json.__file__).resolve().parents[2])
    probe = "import scriptorium.cli.entry, scriptorium.runtimes.mcp.front; print(sorted(sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.append({root!r}); {probe}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "'json'" not in loaded and "'re'" not in loaded and "'typing'" not in loaded
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"text": 'caf\u00e9 \u2014 "quoted"\n\t\\', "n": [1, -2.5e-3, None, True]},
        },
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "hook", "arguments": {"prompt": "\U0001f600"}}},
    ]
    for message in messages:
        assert wire_json.dumps(message) == json.dumps(message, separators=(",", ":"))
        assert wire_json.loads(" " + json.dumps(message, indent=2) + "\n") == message
    for broken in ['{"id": 1', '{"id": 1} {}', "", '"open']:
        with pytest.raises(ValueError):
            wire_json.loads(broken)
