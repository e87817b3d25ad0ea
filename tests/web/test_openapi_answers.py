"""What ``/openapi.json`` promises about answers, held against the app ``scriptorium serve`` serves (in this
process): every route's success has a model and every refusal the one error body; the refusals, whoever makes
them, are that body (:func:`scriptorium.errors.error_body`); and the models describe the real answers, key for
key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from scriptorium.errors import ScriptoriumError, error_body
from scriptorium.schemas import api
from scriptorium.web.limits import MAX_BODY_BYTES
from tests.helpers.served import AppServer, api_world
from tests.helpers.worlds import copied

ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
BODY_KEYS = set(error_body(ScriptoriumError("x")))
"""The six keys of every refusal."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    made = AppServer(copied("api-seed", api_world, tmp_path_factory, tmp_path_factory.mktemp("answers") / "state"))
    yield made
    made.close()


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            yield f"{method.upper()} {path}", operation


def _model(document: dict[str, Any], schema: dict[str, Any]) -> type[BaseModel]:
    """The model of :mod:`scriptorium.schemas.api` a response schema names (its component's title)."""
    name = schema["$ref"].rsplit("/", 1)[1]
    assert name in document["components"]["schemas"], name
    model = getattr(api, name)
    assert isinstance(model, type) and issubclass(model, BaseModel), name
    return model


def test_every_route_describes_its_answer_and_refers_its_refusals_to_the_error_body(server: AppServer) -> None:
    document = server.client.get("/openapi.json").json()
    operations = dict(_operations(document))
    assert len(operations) >= 20 and all(" /api/" in where for where in operations)
    for where, operation in operations.items():
        responses = operation["responses"]
        successes = {code: r for code, r in responses.items() if code.startswith("2")}
        assert successes, f"{where} declares no success"
        for code, response in successes.items():
            schema = response.get("content", {}).get("application/json", {}).get("schema", {})
            assert schema, f"{where} {code} has no schema"
            model = _model(document, schema)
            component = document["components"]["schemas"][model.__name__]
            assert component.get("properties") or component.get("additionalProperties"), f"{where}: {component}"
        refusals = {code: r for code, r in responses.items() if code.startswith(("4", "5"))}
        assert {"401", "403", "422"} <= set(refusals), f"{where} documents {sorted(refusals)}"
        for code, response in refusals.items():
            assert response["content"]["application/json"]["schema"] == ERROR_REF, f"{where} {code}"
    assert "HTTPValidationError" not in document["components"]["schemas"]  # FastAPI's own 422 is not ours
    declared = set(document["components"]["schemas"]["ErrorBody"]["required"])
    assert declared == BODY_KEYS


def test_every_refusal_is_the_one_error_body(server: AppServer) -> None:
    """A route's error, a request failing its schema, a body too large to read, a request without a token:
    the builder's six keys (a schema failure and a token refusal add ``detail``), and a reason code."""
    missing = server.client.get("/api/memory/records/m-000000000000")
    invalid = server.client.get("/api/memory/search", params={"q": "tea", "limit": 0})
    too_large = server.client.post(
        "/api/memory/changes", content=b" " * (MAX_BODY_BYTES + 1), headers={"content-type": "application/json"}
    )
    with server.anonymous() as anonymous:
        no_token = anonymous.get("/api/memory/status")  # the routes' guard
        no_token_body = anonymous.post("/api/memory/changes", json={})  # the body limits, before the body
    answers = {
        "error": (missing, 404, "NOT_FOUND", BODY_KEYS),
        "validation": (invalid, 422, "INVALID_ARGUMENT", BODY_KEYS | {"detail"}),
        "too large": (too_large, 413, "PAYLOAD_TOO_LARGE", BODY_KEYS),
        "guard": (no_token, 401, "UNAUTHORIZED", BODY_KEYS | {"detail"}),
        "limits": (no_token_body, 401, "UNAUTHORIZED", BODY_KEYS | {"detail"}),
    }
    for kind, (answer, status, reason, keys) in answers.items():
        body = answer.json()
        assert answer.status_code == status, f"{kind}: {answer.status_code} {body}"
        assert set(body) == keys, f"{kind}: {sorted(body)}"
        assert body["reason"] == reason and body["message"] and body["retryable"] is False, f"{kind}: {body}"
        assert api.ErrorBody.model_validate(body).reason == reason
    assert isinstance(invalid.json()["detail"], list) and invalid.json()["message"].startswith("query.limit")


def test_the_models_describe_the_real_answers_key_for_key(server: AppServer) -> None:
    """Each read's real answer parses with the model the document names for it, and the model gives back
    exactly that answer: no key dropped, none added, no value changed."""
    document = server.client.get("/openapi.json").json()
    (hit,) = server.client.get("/api/memory/search", params={"q": "tea"}).json()["results"]
    reads = {
        "/api/memory/search": {"q": "tea"},
        "/api/memory/status": None,
        "/api/memory/topics": None,
        "/api/memory/topics/{path}": None,
        "/api/memory/core": None,
        "/api/memory/records/{memory_id}": None,
        "/api/memory/records/{memory_id}/provenance": None,
        "/api/memory/sources": {"thread": "test/t1"},
        "/api/memory/proposals": None,
    }
    for template, params in reads.items():
        url = template.replace("{path}", "topics/a.md").replace("{memory_id}", hit["memory_id"])
        answer = server.client.get(url, params=params)
        assert answer.status_code == 200, f"{url}: {answer.text}"
        schema = document["paths"][template]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        model = _model(document, schema)
        parsed = model.model_validate(answer.json())
        assert parsed.model_dump(mode="json", exclude_unset=True) == answer.json(), url
    record = server.client.get(f"/api/memory/records/{hit['memory_id']}").json()
    with pytest.raises(ValidationError):  # a model holds what it lists
        api.Record.model_validate({**record, "headings": "A"})
    with pytest.raises(ValidationError):
        api.Record.model_validate({key: value for key, value in record.items() if key != "memory_id"})


def test_a_change_answers_as_its_model_says(server: AppServer) -> None:
    """A change's answer (200 applied, 202 held: the route answers them itself) is the model the document
    names, a dry run's own keys included, key for key."""
    document = server.client.get("/openapi.json").json()
    responses = document["paths"]["/api/memory/changes"]["post"]["responses"]
    assert _model(document, responses["202"]["content"]["application/json"]["schema"]) is api.HeldProposal
    model = _model(document, responses["200"]["content"]["application/json"]["schema"])
    create = {
        "op": "create_record",
        "content": "Coffee too.",
        "time": None,
        "sources": [{"source": "test/t1/m2", "label": "coffee"}],
        "destination": {"topic_path": "topics/a.md"},
    }
    answer = server.client.post("/api/memory/changes", json={"memory_changes": [create], "dry_run": True})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["dry_run"] is True and "Coffee too." in body["diff"]
    assert model.model_validate(body).model_dump(mode="json", exclude_unset=True) == body
