"""A schemathesis run against the served OpenAPI document with each token kind: generated requests find no
500s, and no 2xx where the token's scope is not one the route declares."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange
from tests.helpers.served import ThreadServer
from tests.helpers.tokens import runtime_token, scoped_token


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    state: Path = tmp_path_factory.mktemp("fuzz") / "state"
    ws = MemoryWorkspace.init(state / "memory")
    with ws.lock():
        paths = ws.archive_sources(
            [SourceMessage("test", "t1", f"m{n}", "user", "2026-11-01T00:00:00Z", f"m{n}") for n in range(4)]
        )
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes([TopicChange("topics/a.md", "create", "# A\n\nTea [tea](test/t1/m1).\n")], message="seed")
    ws.close()
    server = ThreadServer(state)
    yield server
    server.close()


def test_generated_requests_never_get_a_server_error_nor_pass_a_scope(live: ThreadServer) -> None:
    """Every operation, with every token kind: no 5xx, ever; and with a token whose scope the operation does
    not declare, never a 2xx (the guard refuses it whatever the generated request holds)."""
    # schemathesis's pytest plugin does not run under this pytest; its strategies drive hypothesis directly.
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    document = httpx.get(f"{live.url}/openapi.json", timeout=10).json()
    declared = {
        (method.upper(), path): set(op["x-scopes"])
        for path, methods in document["paths"].items()
        for method, op in methods.items()
    }
    tokens = {
        "owner": live.token,
        "runtime": runtime_token(live.state),
        "propose": scoped_token(live.state, "propose", "--requester", "helper"),
        "write": scoped_token(live.state, "write", "--requester", "scheduler"),
    }
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17  # every /api route is in the document
    seen: dict[tuple[str, str], set[int]] = {}
    for kind, token in tokens.items():
        for operation in operations:
            allowed = kind in declared[(operation.method.upper(), operation.path)]
            seen[(kind, operation.label)] = _fuzz(live, operation, kind, token, allowed)
    assert {label for _kind, label in seen} == {op.label for op in operations}
    assert any(200 <= code < 300 for (kind, _), codes in seen.items() if kind in ("propose", "write") for code in codes)


def _fuzz(live: ThreadServer, operation: Any, kind: str, token: str, allowed: bool) -> set[int]:
    """Generated requests for one operation with one token; the statuses they got."""
    statuses: set[int] = set()
    headers = {"Authorization": f"Bearer {token}"}

    @given(case=operation.as_strategy())
    @settings(max_examples=25 if allowed else 4, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def call(case: schemathesis.Case) -> None:
        response = case.call(base_url=live.url, headers=headers, timeout=30)
        where = f"{kind} token: {case.method} {case.formatted_path}"
        assert response.status_code < 500, f"{where}: {response.status_code} {response.text}"
        if not allowed:
            assert response.status_code == 403, f"{where}: {response.status_code} where the scope forbids it"
        if response.status_code in (400, 404, 409, 422):  # refusals carry something a client can act on
            assert response.json(), response.text
        statuses.add(response.status_code)

    call()
    return statuses
