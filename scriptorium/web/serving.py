"""How ``scriptorium serve`` runs uvicorn: its own settings where they serve, and the connection limits it
has no setting for.

uvicorn accepts every connection and waits as long as it takes for a request head; its
``limit_concurrency`` answers 503 only once a head has come, while every connection waiting for one holds
a file descriptor. 1,100 connections trickling a sign-in held a server under a 1,024-descriptor limit
("Too many open files"), and a normal GET timed out. So each connection is admitted here first
(:class:`Admission`, wrapped around the protocol uvicorn would use):

* one client address (an IPv6 client's /64) holds at most ``max_client_connections`` at once, and the
  server ``max_connections`` in all (at most half its descriptor limit); a connection past either is
  answered 429 or 503 ``RATE_LIMITED`` and closed before anything is read from it (a client that sent its
  request already may see only the close). A trusted proxy's connections are all its clients', so they
  count toward the total only;
* a request head must be whole within ``header_timeout_s`` of its first byte (of the connection, for the
  first request): past it, 408 ``REQUEST_TIMEOUT`` and the connection closes.

The event loop accepts up to uvicorn's ``backlog`` connections at one go, before any of them is seen here:
that is kept to a sixteenth of the descriptor limit, so a burst cannot take every descriptor first. The
body's deadline is the body reader's (:mod:`scriptorium.web.limits`); an idle kept-alive connection closes
after uvicorn's ``timeout_keep_alive``; h11 refuses a head over 16 KiB (400). The client address and
scheme a request is taken to have are uvicorn's ``proxy_headers``: ``X-Forwarded-For`` and
``X-Forwarded-Proto`` are believed only from ``forwarded_allow_ips`` (none by default; uvicorn's own
default believes 127.0.0.1, so any local process could claim another address past the sign-in limit).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

from scriptorium.errors import RateLimited, RequestTimeout, ScriptoriumError, error_body
from scriptorium.settings import Settings
from scriptorium.web.limits import client_key


def trusted_proxies(spec: str) -> Callable[[str | None], bool]:
    """Whether a peer address is one of ``spec`` (uvicorn's ``forwarded_allow_ips``: comma-separated
    addresses and networks, or ``*``)."""
    entries = [entry.strip() for entry in spec.split(",") if entry.strip()]
    if "*" in entries:
        return lambda host: True
    networks, literals = [], set()
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            literals.add(entry)

    def trusted(host: str | None) -> bool:
        if not host:
            return False
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return host in literals
        return any(address in network for network in networks)

    return trusted


def descriptor_share(wanted: int, part: int) -> int:
    """``wanted``, or ``1/part`` of the process's soft file-descriptor limit when that is less."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return wanted
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return wanted if soft == resource.RLIM_INFINITY else max(1, min(wanted, soft // part))


class Admission:
    """The connections open now, in all and per client; everything here runs on the event loop's thread."""

    def __init__(self, max_connections: int, max_per_client: int, trusted: Callable[[str | None], bool]) -> None:
        self.max_connections = max_connections
        self.max_per_client = max_per_client
        self.trusted = trusted
        self.total = 0
        self.per_client: dict[str, int] = {}

    def admit(self, host: str | None) -> tuple[int, ScriptoriumError] | None:
        """Count a new connection from ``host`` in, or say why it is refused (the status and the error)."""
        guidance = "Close idle connections, or retry after a moment."
        if self.total >= self.max_connections:
            return 503, RateLimited(f"the server holds {self.max_connections} connections, its most", guidance=guidance)
        key = client_key(host)
        if not self.trusted(host) and self.per_client.get(key, 0) >= self.max_per_client:
            return 429, RateLimited(
                f"this address holds {self.max_per_client} connections, its most", guidance=guidance
            )
        self.total += 1
        self.per_client[key] = self.per_client.get(key, 0) + 1
        return None

    def release(self, host: str | None) -> None:
        key = client_key(host)
        self.total -= 1
        left = self.per_client.get(key, 1) - 1
        if left > 0:
            self.per_client[key] = left
        else:
            self.per_client.pop(key, None)


def _raw_answer(status: int, error: ScriptoriumError) -> bytes:
    """A whole HTTP/1.1 response with the reason-code body, written before any request was read."""
    body = json.dumps(error_body(error)).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nretry-after: 1\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def guarded(inner: type[asyncio.Protocol], admission: Admission, header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol ``inner``, behind :class:`Admission` and the head deadline."""

    class Guarded(asyncio.Protocol):
        def __init__(self, **arguments: Any) -> None:
            self.inner: Any = inner(**arguments)
            if not hasattr(self.inner, "cycle"):  # how a request in flight is told (below): fail loudly
                raise RuntimeError(f"{inner.__name__} keeps no request cycle: the head deadline cannot run")
            self.loop = arguments.get("_loop") or asyncio.get_event_loop()
            self.transport: asyncio.Transport | None = None
            self.host: str | None = None
            self.admitted = False
            self.deadline: asyncio.TimerHandle | None = None
            self.heard = False
            """Bytes of a head not yet whole have come (else the connection is only idle)."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport
            peer = transport.get_extra_info("peername")
            self.host = str(peer[0]) if isinstance(peer, tuple) and peer else None
            refusal = admission.admit(self.host)
            if refusal is not None:
                transport.write(_raw_answer(*refusal))
                transport.close()
                return
            self.admitted = True
            self.inner.connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if not self.admitted:
                return
            self.admitted = False
            admission.release(self.host)
            self._disarm()
            self.inner.connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if not self.admitted:
                return  # refused: closing
            if not self._in_flight():
                self.heard = True
                if self.deadline is None:
                    self._arm()
            self.inner.data_received(data)
            if self._in_flight():  # the head is whole: the body has its own deadline (limits.py)
                self._disarm()
                self.heard = False

        def eof_received(self) -> bool | None:
            return self.inner.eof_received() if self.admitted else None

        def pause_writing(self) -> None:
            self.inner.pause_writing()

        def resume_writing(self) -> None:
            self.inner.resume_writing()

        def _in_flight(self) -> bool:
            cycle = self.inner.cycle
            return cycle is not None and not getattr(cycle, "response_complete", False)

        def _arm(self) -> None:
            self._disarm()
            self.deadline = self.loop.call_later(header_timeout_s, self._late)

        def _disarm(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
                self.deadline = None

        def _late(self) -> None:
            self.deadline = None
            transport = self.transport
            if transport is None or transport.is_closing() or transport.get_protocol() is not self:
                return  # closed already, or handed to another protocol (an upgrade)
            if self._in_flight():
                return
            if self.heard:
                error = RequestTimeout(f"the request head did not arrive within {header_timeout_s:g} s")
                transport.write(_raw_answer(408, error))
            transport.close()

    return Guarded


def serve(
    settings: Settings,
    host: str,
    port: int,
    forwarded_allow_ips: str | None = None,
    ssl_certfile: Path | None = None,
    ssl_keyfile: Path | None = None,
) -> None:
    """Run the app of ``settings`` until stopped."""
    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    from scriptorium.web.app import create_app

    proxies = settings.forwarded_allow_ips if forwarded_allow_ips is None else forwarded_allow_ips
    # Admitted connections take at most half the descriptors, those accepted at one go (refused or not yet
    # seen) a few sixteenths: the rest is for the session store, the workspace and git.
    admitted = descriptor_share(settings.max_connections, 2)
    admission = Admission(admitted, settings.max_client_connections, trusted_proxies(proxies))
    config = uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_level="warning",
        http=guarded(AutoHTTPProtocol, admission, settings.header_timeout_s),
        timeout_keep_alive=settings.keep_alive_s,
        backlog=descriptor_share(settings.backlog, 16),
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or None,
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )
    scheme = "https" if ssl_certfile else "http"

    class Announcing(uvicorn.Server):
        """uvicorn's server, saying where it listens once it does (the port it bound: ``--port 0`` too)."""

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.should_exit:
                return
            ports = [s.getsockname()[1] for server in self.servers for s in server.sockets] or [port]
            url = listening_url(scheme, host, ports[0])
            print(f"serving the Memory page at {url}/memory and the API at {url}/api/memory (Ctrl-C stops)", flush=True)

    Announcing(config).run()


def listening_url(scheme: str, host: str, port: int) -> str:
    """The address to open for a server listening on ``host`` (a wildcard one: this machine's loopback)."""
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    return f"{scheme}://{f'[{shown}]' if ':' in shown else shown}:{port}"
