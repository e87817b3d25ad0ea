"""Function-level authorization over real HTTP: every route of the served OpenAPI document declares the
scopes it takes, refuses a request without a token (401) and one whose token lacks the scope (403)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import trusted_and_pending_world
from tests.helpers.hooks import SCRIPT
from tests.helpers.served import ThreadServer
from tests.helpers.tokens import runtime_token, scoped_token

PATH_PARAMS = {
    "memory_id": "m-000000000000",
    "path": "topics/none.md",
    "session_id": "s1",
    "proposal_id": "p-000000000000",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ThreadServer, dict[str, str]]]:
    state = tmp_path_factory.mktemp("scopes") / "state"
    trusted_and_pending_world(state / "memory")
    runtime = runtime_token(state, "--requester", "claude")
    propose = scoped_token(state, "propose", "--requester", "helper")
    write = scoped_token(state, "write", "--requester", "scheduler")
    revoked = runtime_token(state)
    token_id = revoked.split("_")[1]
    subprocess.run([str(SCRIPT), "token", "revoke", token_id, "--state", str(state)], check=True, timeout=60)
    server = ThreadServer(state)
    tokens = {
        "owner": server.token,
        "runtime": runtime,
        "propose": propose,
        "write": write,
        "revoked runtime": revoked,
        "forged": f"sct_{token_id}_{'x' * 43}",
        "garbage": "not-a-token",
    }
    yield server, tokens
    server.close()


def operations(server: ThreadServer) -> list[tuple[str, str, list[str]]]:
    """(method, concrete URL, declared scopes) for every operation of the served document."""
    document = httpx.get(f"{server.url}/openapi.json", timeout=10).json()
    found = []
    for template, methods in document["paths"].items():
        url = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: PATH_PARAMS[m.group(1)], template)
        for method, operation in methods.items():
            found.append((method.upper(), url, operation.get("x-scopes")))
    return found


def call(server: ThreadServer, method: str, url: str, authorization: str | None) -> httpx.Response:
    headers = {"Authorization": authorization} if authorization is not None else {}
    body = {} if method in ("POST", "PUT", "PATCH") else None
    return httpx.request(method, f"{server.url}{url}", headers=headers, json=body, params={"q": "tea"}, timeout=30)


def test_every_route_declares_its_scopes_and_refuses_the_others(served: tuple[ThreadServer, dict[str, str]]) -> None:
    server, tokens = served
    ops = operations(server)
    assert len(ops) >= 17, "the memory API, the proposals and the runtime routes"
    for method, url, scopes in ops:
        where = f"{method} {url}"
        assert scopes, f"{where} declares no scope"
        assert call(server, method, url, None).status_code == 401, where
        for kind, token in tokens.items():
            status = call(server, method, url, f"Bearer {token}").status_code
            if kind in scopes:
                assert status not in (401, 403), f"{where} refused the {kind} token it declares ({status})"
            else:
                assert status == 403, f"{where} answered {status} to a {kind} token"
        assert call(server, method, url, f"Basic {tokens['owner']}").status_code == 403, where


def test_the_owner_token_is_not_a_runtime_token_nor_the_reverse(served: tuple[ThreadServer, dict[str, str]]) -> None:
    server, tokens = served
    runtime_routes = [(m, u) for m, u, s in operations(server) if s == ["runtime"]]
    owner_routes = [(m, u) for m, u, s in operations(server) if s == ["owner"]]
    assert runtime_routes and owner_routes
    for method, url in runtime_routes:
        assert call(server, method, url, f"Bearer {tokens['owner']}").status_code == 403
    for method, url in owner_routes:
        assert call(server, method, url, f"Bearer {tokens['runtime']}").status_code == 403


def test_a_refusal_changes_nothing(served: tuple[ThreadServer, dict[str, str]]) -> None:
    server, tokens = served
    before = httpx.get(
        f"{server.url}/api/memory/status", headers={"Authorization": f"Bearer {tokens['owner']}"}, timeout=10
    ).json()["revision"]
    change = {"message": "x", "changes": [{"path": "topics/x.md", "action": "create", "content": "X [k](t/a/b).\n"}]}
    refused = httpx.post(
        f"{server.url}/api/memory/changes", json=change, headers={"Authorization": f"Bearer {tokens['runtime']}"}
    )
    assert refused.status_code == 403
    after = httpx.get(
        f"{server.url}/api/memory/status", headers={"Authorization": f"Bearer {tokens['owner']}"}, timeout=10
    ).json()["revision"]
    assert after == before
