"""The page's sign-in over real HTTP: a random session per sign-in, ended by signing in again or out, its CSRF
token its own; and no page that loads scripts from elsewhere."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scriptorium.web.page import COOKIE
from scriptorium.workspace import MemoryWorkspace, SourceMessage
from tests.helpers.served import ThreadServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ThreadServer]:
    state = tmp_path / "state"
    ws = MemoryWorkspace.init(state / "memory")
    with ws.lock():
        paths = ws.archive_sources([SourceMessage("test", "t1", "m1", "user", "2026-11-01T00:00:00Z", "tea")])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.close()
    running = ThreadServer(state)
    yield running
    running.close()


def _sign_in(server: ThreadServer, cookie: str | None = None) -> str:
    signed = httpx.post(
        f"{server.url}/memory/login", data={"token": server.token}, cookies={COOKIE: cookie} if cookie else None
    )
    assert signed.status_code == 303
    fresh = signed.cookies.get(COOKIE)
    assert fresh and server.token not in fresh
    assert "max-age=43200" in signed.headers["set-cookie"].lower()
    return fresh


def _csrf(server: ThreadServer, cookie: str) -> str:
    page = httpx.get(f"{server.url}/memory", cookies={COOKIE: cookie})
    assert page.status_code == 200
    marker = 'name="csrf" value="'
    return page.text.split(marker, 1)[1].split('"', 1)[0]


def _revision(server: ThreadServer) -> str:
    return str(server.client.get("/api/memory/status").json()["revision"])


def _save(server: ThreadServer, cookie: str, csrf: str) -> httpx.Response:
    form = {
        "path": "topics/notes.md",
        "content": "# Notes\n\n2026-11-01: Saved from the page [tea](test/t1/m1).\n",
        "csrf": csrf,
    }
    return httpx.post(
        f"{server.url}/memory/save", data={**form, "expected_revision": _revision(server)}, cookies={COOKIE: cookie}
    )


def test_each_sign_in_is_a_new_session_and_ends_the_one_it_came_with(server: ThreadServer) -> None:
    first = _sign_in(server)
    other = _sign_in(server)  # another browser: both live
    assert first != other
    first_csrf, other_csrf = _csrf(server, first), _csrf(server, other)
    assert first_csrf != other_csrf
    before = _revision(server)
    # One session's CSRF token is refused in another's.
    assert _save(server, first, other_csrf).status_code == 403
    assert _revision(server) == before

    rotated = _sign_in(server, cookie=first)  # signing in again from the first browser
    assert rotated != first
    assert httpx.get(f"{server.url}/memory", cookies={COOKIE: first}).status_code == 401
    assert _save(server, first, first_csrf).status_code == 401
    assert _revision(server) == before
    assert httpx.get(f"{server.url}/memory", cookies={COOKIE: other}).status_code == 200
    saved = _save(server, other, other_csrf)
    assert saved.status_code == 303, saved.text[-3000:]  # its own token is the one it takes
    assert _revision(server) != before


def test_sign_out_ends_the_session_and_needs_its_csrf(server: ThreadServer) -> None:
    cookie = _sign_in(server)
    csrf = _csrf(server, cookie)
    forged = httpx.post(f"{server.url}/memory/logout", data={"csrf": "guess"}, cookies={COOKIE: cookie})
    assert forged.status_code == 403  # a cross-site form cannot sign the owner out
    assert httpx.get(f"{server.url}/memory", cookies={COOKIE: cookie}).status_code == 200

    out = httpx.post(f"{server.url}/memory/logout", data={"csrf": csrf}, cookies={COOKIE: cookie})
    assert out.status_code == 303
    cleared = out.headers["set-cookie"].lower()
    assert cleared.startswith(f"{COOKIE}=") and ("max-age=0" in cleared or "expires=" in cleared)
    before = _revision(server)
    assert httpx.get(f"{server.url}/memory", cookies={COOKIE: cookie}).status_code == 401
    assert _save(server, cookie, csrf).status_code == 401
    assert _revision(server) == before


def test_no_docs_page_loads_foreign_script_and_the_schema_stays(server: ThreadServer) -> None:
    for page in ("/docs", "/redoc"):
        assert httpx.get(f"{server.url}{page}").status_code == 404, page
    assert httpx.get(f"{server.url}/openapi.json").json()["info"]["title"] == "Scriptorium memory API"
