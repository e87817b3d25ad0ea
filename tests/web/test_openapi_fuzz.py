"""A schemathesis run against the served OpenAPI document: generated requests find no 500s."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange
from tests.web.test_api import Server
from tests.web.test_runtime_api import runtime_token


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    state: Path = tmp_path_factory.mktemp("fuzz") / "state"
    ws = MemoryWorkspace.init(state / "memory")
    with ws.lock():
        paths = ws.archive_sources(
            [SourceMessage("test", "t1", f"m{n}", "user", "2026-11-01T00:00:00Z", f"m{n}") for n in range(4)]
        )
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes([TopicChange("topics/a.md", "create", "# A\n\nTea [tea](test/t1/m1).\n")], message="seed")
    ws.close()
    server = Server(state)
    yield server
    server.close()


RUNTIME_ROUTES = ("/api/events", "/api/sessions", "/api/runtime", "/api/hooks")


def test_generated_requests_never_get_a_server_error(live: Server) -> None:
    # schemathesis's pytest plugin does not run under this pytest; its strategies drive hypothesis directly.
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    owner = {"Authorization": f"Bearer {live.token}"}
    runtime = {"Authorization": f"Bearer {runtime_token(live.state)}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 8  # every /api/memory route is in the document
    seen: dict[str, set[int]] = {}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def call(case: schemathesis.Case) -> None:
            headers = runtime if case.operation.path.startswith(RUNTIME_ROUTES) else owner
            response = case.call(base_url=live.url, headers=headers, timeout=30)
            where = f"{case.method} {case.formatted_path}"
            assert response.status_code < 500, f"{where}: {response.status_code} {response.text}"
            if response.status_code in (400, 404, 409, 422):  # refusals carry something a client can act on
                assert response.json(), response.text
            seen.setdefault(case.operation.label, set()).add(response.status_code)

        call()
    assert set(seen) == {op.label for op in operations}
