"""Limits checked before a body is read (OWASP API4), over real HTTP: no token, 401 with the body unread;
a token and a body over the limit, 413 unread (or, sent chunked, read only up to the limit); too many
operations, 422 with a reason code. The server's memory stays flat."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scriptorium.web.limits import MAX_BODY_BYTES
from tests.helpers.attacks import create
from tests.helpers.served import Server, api_world
from tests.helpers.tokens import scoped_token


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``scriptorium serve`` itself (a real socket, a process whose memory is measured), on a seeded workspace:
    one for the module's tests, each of which it refuses (none changes the memory: each checks)."""
    state = tmp_path_factory.mktemp("limits") / "state"
    api_world(state)
    live = Server(state)
    yield live
    live.close()


def raw_answer(live: Server, path: str, headers: dict[str, str], timeout: float = 5.0) -> tuple[int, bytes]:
    """Send a request's head declaring a huge body and none of it: the status, had the live waited to read
    the body it would not answer within ``timeout``."""
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{live.port}", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    with socket.create_connection(("127.0.0.1", live.port), timeout=timeout) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            (int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0
        )
        while len(rest) < length and (chunk := sock.recv(65536)):
            rest += chunk
        return int(head.split()[1]), rest


def rss_kib(live: Server) -> int:
    for line in Path(f"/proc/{live.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def body_routes(live: Server) -> dict[str, list[str]]:
    """Every route taking a body, as a request path → the scopes it declares."""
    spec = httpx.get(f"{live.url}/openapi.json").json()
    return {
        path.replace("{session_id}", "s").replace("{proposal_id}", "p-000000000000"): ops["post"]["x-scopes"]
        for path, ops in sorted(spec["paths"].items())
        if "post" in ops
    }


def test_a_body_is_not_read_before_the_token_is_checked_nor_past_the_limit(server: Server) -> None:
    routes = body_routes(server)
    assert "/api/memory/changes" in routes and "/api/hooks" in routes
    runtime = scoped_token(server.state, "runtime")
    before = rss_kib(server)
    huge = str(300 * 1024 * 1024)
    for path, scopes in routes.items():
        status, _ = raw_answer(server, path, {"Content-Length": huge})
        assert status == 401, path
        status, _ = raw_answer(server, path, {"Content-Length": huge, "Authorization": "Bearer nope"})
        assert status == 403, path
        # A token the server knows, of a scope the route does not take: 403 too, the body unread.
        taken, other = (server.token, runtime) if "owner" in scopes else (runtime, server.token)
        status, body = raw_answer(server, path, {"Content-Length": huge, "Authorization": f"Bearer {other}"})
        assert status == 403 and b"this route takes" in body, (path, body)
        status, body = raw_answer(server, path, {"Content-Length": huge, "Authorization": f"Bearer {taken}"})
        assert status == 413 and b"PAYLOAD_TOO_LARGE" in body, (path, body)
    assert rss_kib(server) - before < 50 * 1024, "nothing was buffered"


def test_a_chunked_body_is_read_only_up_to_the_limit(server: Server) -> None:
    revision = server.client.get("/api/memory/status").json()["revision"]

    def chunks() -> Iterator[bytes]:
        yield b'{"message": "x", "patch": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 8):
            yield b"a" * 65536
        yield b'"}'

    answer = server.client.post("/api/memory/changes", content=chunks(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and answer.json()["reason"] == "PAYLOAD_TOO_LARGE", answer.text
    assert server.client.get("/api/memory/status").json()["revision"] == revision


def test_too_many_operations_are_refused_with_a_reason(server: Server) -> None:
    revision = server.client.get("/api/memory/status").json()["revision"]
    one = create("Memo.", "test/t1/m1")["memory_changes"][0]
    body = {"message": "many", "memory_changes": [one] * 1001}
    answer = server.client.post("/api/memory/changes", json=body)
    assert answer.status_code == 422 and answer.json()["reason"] == "INVALID_ARGUMENT", answer.text[:500]
    assert "memory_changes" in answer.json()["message"]
    assert server.client.get("/api/memory/status").json()["revision"] == revision


def test_the_owner_token_is_never_printed(tmp_path: Path) -> None:
    live = Server(tmp_path / "state")
    try:
        token = live.token
    finally:
        live.close()
    _out, err = live.proc.communicate(timeout=10)
    assert token not in err and "owner-token" in err
