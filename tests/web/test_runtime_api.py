"""Runtime routes over real HTTP: events, session nodes, trusted reads and hooks, behind runtime tokens."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.checks import records_citing
from tests.cluster.conftest import wait_for
from tests.conftest import trusted_and_pending_world
from tests.helpers.served import ThreadServer
from tests.helpers.tokens import nodes, runtime_token

SCRIPT = Path(sys.executable).with_name("scriptorium")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One world and runtime token per module; each test serves a copy of it."""
    state = tmp_path_factory.mktemp("runtime-api") / "state"
    trusted_and_pending_world(state / "memory")
    return state, runtime_token(state, "--requester", "claude")


def serve_copy(template: tuple[Path, str], folder: Path) -> tuple[ThreadServer, dict[str, str]]:
    source, token = template
    shutil.copytree(source, folder / "state", symlinks=True)
    return ThreadServer(folder / "state", SCRIPTORIUM_TRIGGER_TOKENS="0"), {"Authorization": f"Bearer {token}"}


@pytest.fixture
def served(tmp_path: Path, template: tuple[Path, str]) -> Iterator[tuple[ThreadServer, dict[str, str]]]:
    server, auth = serve_copy(template, tmp_path)
    yield server, auth
    server.close()


@pytest.fixture(scope="module")
def refusing(
    tmp_path_factory: pytest.TempPathFactory, template: tuple[Path, str]
) -> Iterator[tuple[ThreadServer, dict[str, str]]]:
    """One server for the tests of what is refused: a refusal changes nothing, which each of them checks."""
    server, auth = serve_copy(template, tmp_path_factory.mktemp("refusing"))
    yield server, auth
    server.close()


def node(node_id: str, parent: str | None, kind: str, content: str, at: str) -> dict[str, Any]:
    return {"id": node_id, "parent_id": parent, "kind": kind, "content": content, "created_at": at}


def event(kind: str = "session.idle", session: str = "rt1", **fields: Any) -> dict[str, Any]:
    return {"type": kind, "workspace": "default", "session_id": session, **fields}


def test_runtime_routes_refuse_no_token_the_owner_token_and_revoked_tokens(
    served: tuple[ThreadServer, dict[str, str]],
) -> None:
    server, auth = served
    spec = httpx.get(f"{server.url}/openapi.json").json()
    routes = [
        (method, path)
        for path, ops in spec["paths"].items()
        for method in ops
        if path.startswith(("/api/events", "/api/sessions", "/api/runtime", "/api/hooks"))
    ]
    assert len(routes) == 5, routes
    owner = {"Authorization": f"Bearer {server.token}"}
    for method, path in routes:
        url = server.url + path.replace("{session_id}", "s")
        assert httpx.request(method, url).status_code == 401
        assert httpx.request(method, url, headers=owner).status_code == 403, "the owner token is not a runtime token"
        assert (
            httpx.request(method, url, headers={"Authorization": "Bearer sct_000000000000_x" + "y" * 30}).status_code
            == 403
        )
    assert httpx.get(f"{server.url}/api/memory/status", headers=auth).status_code == 403, (
        "a runtime token is not the owner's"
    )
    listed = subprocess.run(
        [str(SCRIPT), "token", "list", "--state", str(server.state), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (record,) = json.loads(listed.stdout)["tokens"]
    assert record["scope"] == "runtime" and record["requester"] == "claude" and "digest" not in record
    assert auth["Authorization"].split()[-1] not in (server.state / "tokens.json").read_text(), "stored hashed"
    assert (server.state / "tokens.json").stat().st_mode & 0o777 == 0o600
    subprocess.run([str(SCRIPT), "token", "revoke", record["id"], "--state", str(server.state)], check=True)
    assert httpx.get(f"{server.url}/api/runtime/core", headers=auth).status_code == 403


def test_an_expired_token_is_refused(served: tuple[ThreadServer, dict[str, str]]) -> None:
    server, _auth = served
    token = runtime_token(server.state, "--expires", "1m")
    path = server.state / "tokens.json"
    body = json.loads(path.read_text())
    for entry in body["tokens"]:
        if token.split("_")[1] == entry["id"]:
            entry["expires"] = "2000-01-01T00:00:00+00:00"
    path.write_text(json.dumps(body))
    assert httpx.get(f"{server.url}/api/runtime/core", headers={"Authorization": f"Bearer {token}"}).status_code == 403


def test_nodes_then_an_event_write_the_session_once(served: tuple[ThreadServer, dict[str, str]]) -> None:
    server, auth = served
    added = httpx.post(f"{server.url}/api/sessions/rt1/nodes", json=nodes("rt1", 4), headers=auth)
    assert added.status_code == 200
    assert added.json() == {"session_id": "rt1", "added": 4, "head": "n3", "branch_left": None}
    again = httpx.post(f"{server.url}/api/sessions/rt1/nodes", json=nodes("rt1", 4), headers=auth)
    assert again.json()["added"] == 0, "nodes are stored idempotently by ID"
    body = event(event_id=uuid.uuid4().hex)
    first = httpx.post(f"{server.url}/api/events", json=body, headers=auth)
    assert first.status_code == 202 and first.json()["duplicate"] is False and first.json()["mode"] == "embedded"
    duplicate = httpx.post(f"{server.url}/api/events", json=body, headers=auth)
    assert duplicate.status_code == 202 and duplicate.json() == {**first.json(), "duplicate": True}
    memory = server.state / "memory"
    wait_for(lambda: len([k for k in records_citing(memory) if "/rt1/" in k]) == 4, 30, "the background pass")
    assert set(records_citing(memory)[k] for k in records_citing(memory) if "/rt1/" in k) == {1}


def test_nodes_that_move_the_head_to_another_branch_write_the_branch_left(
    served: tuple[ThreadServer, dict[str, str]],
) -> None:
    """A runtime that posts a re-ask (a fork from n1, head at its tip): the branch left is written at once."""
    server, auth = served
    assert httpx.post(f"{server.url}/api/sessions/rt3/nodes", json=nodes("rt3", 4), headers=auth).status_code == 200
    fork = {"nodes": [node("f2", "n1", "user", "asked again", "2026-11-05T11:00:00Z")], "head": "f2"}
    moved = httpx.post(f"{server.url}/api/sessions/rt3/nodes", json=fork, headers=auth)
    assert moved.status_code == 200 and moved.json()["branch_left"] == "n3"
    memory = server.state / "memory"
    wait_for(lambda: len([k for k in records_citing(memory) if "/rt3/" in k]) == 4, 30, "the left branch's pass")
    assert {k.rsplit("/", 1)[1] for k in records_citing(memory) if "/rt3/" in k} == {"n0", "n1", "n2", "n3"}
    along = {"nodes": [node("f3", "f2", "assistant", "ok", "2026-11-05T11:01:00Z")], "head": "f3"}
    assert httpx.post(f"{server.url}/api/sessions/rt3/nodes", json=along, headers=auth).json()["branch_left"] is None


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (b"{not json", "not JSON"),
        (json.dumps({"type": "turn.ended", "workspace": "default"}).encode(), "no session"),
        (json.dumps(event(extra_field=1)).encode(), "unknown field"),
        (json.dumps(event(workspace="other")).encode(), "another workspace"),
        (json.dumps({**event(), "session_id": "x" * 20_000}).encode(), "oversized"),
    ],
)
def test_a_malformed_event_gets_its_reason_code(
    refusing: tuple[ThreadServer, dict[str, str]], body: bytes, what: str
) -> None:
    server, auth = refusing
    answer = httpx.post(f"{server.url}/api/events", content=body, headers={**auth, "content-type": "application/json"})
    assert answer.status_code in (400, 422), what
    assert answer.json()["reason"] == "INVALID_ARGUMENT", what


@pytest.mark.parametrize(
    ("body", "what"),
    [
        ({"nodes": []}, "no nodes"),
        ({"nodes": [{"id": "a", "kind": "banana"}]}, "unknown kind"),
        ({"nodes": [{"id": "a", "kind": "user", "secret": 1}]}, "unknown field"),
        ({"nodes": [{"id": "../a", "kind": "user"}]}, "path-like ID"),
        ({"nodes": [{"id": "a", "kind": "user", "content": "x" * 200_001}]}, "content too long"),
        ({"nodes": [{"id": f"a{i}", "kind": "user", "content": "y" * 9000} for i in range(1000)]}, "oversized"),
    ],
)
def test_malformed_nodes_are_refused_and_store_nothing(
    refusing: tuple[ThreadServer, dict[str, str]], body: dict[str, Any], what: str
) -> None:
    server, auth = refusing
    answer = httpx.post(f"{server.url}/api/sessions/bad1/nodes", json=body, headers=auth)
    # Over the server's body limit (8 MiB), the body is refused unread (scriptorium/web/limits.py).
    expected = (413, "PAYLOAD_TOO_LARGE") if what == "oversized" else (400, "INVALID_ARGUMENT")
    assert (answer.status_code, answer.json()["reason"]) == expected, what
    from scriptorium.sessions import open_store

    store = open_store(f"sqlite:///{server.state / 'sessions' / 'sessions.db'}")
    assert store.get_session("bad1") is None, what
    store.close()


def test_trusted_reads_and_hooks_over_http(served: tuple[ThreadServer, dict[str, str]]) -> None:
    server, auth = served
    core = httpx.get(f"{server.url}/api/runtime/core", headers=auth).json()
    assert "The user is called Sam" in core["effective"]
    found = httpx.get(f"{server.url}/api/runtime/search", params={"q": "yacht Kiel"}, headers=auth).json()
    assert found["results"] == [], "pending-backed records are not a runtime's to read"
    prompt = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "when do releases ship"}
    answer = httpx.post(f"{server.url}/api/hooks", json=prompt, headers=auth).json()
    assert "Releases ship on Thursdays" in answer["hookSpecificOutput"]["additionalContext"]
    garbage = httpx.post(f"{server.url}/api/hooks", content=b"nope", headers=auth)
    assert garbage.status_code == 200 and garbage.json() == {}, "a memory failure never fails the agent"


def test_http_hooks_import_only_transcripts_under_the_runtimes_folders(tmp_path: Path) -> None:
    from tests.helpers.hooks import common, history, recall_cache_is_current
    from tests.helpers.transcripts import claude_transcript

    state = tmp_path / "state"
    trusted_and_pending_world(state / "memory")
    auth = {"Authorization": f"Bearer {runtime_token(state)}"}
    allowed = tmp_path / "claude" / "projects"
    allowed.mkdir(parents=True)
    inside = claude_transcript(allowed / "cc-hooks.jsonl", 2)
    outside = claude_transcript(tmp_path / "elsewhere.jsonl", 2)
    server = ThreadServer(state, SCRIPTORIUM_TRIGGER_TOKENS="0", SCRIPTORIUM_HOOK_TRANSCRIPT_ROOTS=str(allowed))
    try:
        refused = httpx.post(f"{server.url}/api/hooks", json=common("Stop", transcript=outside), headers=auth)
        assert refused.status_code == 200 and refused.json() == {}
        # A writing hook is answered at once and run in turn by the server (scriptorium/runtimes/hooks/writes.py).
        wait_for(lambda: bool(history(state)), 30, "the refused import to be recorded")
        assert history(state)[-1]["reason"] == "FORBIDDEN" and "outside" in history(state)[-1]["message"]
        assert not any("/cc-hooks/" in k for k in records_citing(state / "memory"))
        taken = httpx.post(f"{server.url}/api/hooks", json=common("Stop", transcript=inside), headers=auth)
        assert taken.status_code == 200 and taken.json() == {}
        wait_for(
            lambda: sum(1 for k in records_citing(state / "memory") if "/cc-hooks/" in k) == 2, 30, "the Stop's pass"
        )
        # After its writes the server brings its recall index and the disk cache up to them, off any prompt's path.
        wait_for(lambda: recall_cache_is_current(state / "memory"), 30, "the recall cache to be current")
    finally:
        server.close()


def test_posting_nodes_never_changes_an_existing_sessions_provider(served: tuple[ThreadServer, dict[str, str]]) -> None:
    server, auth = served
    first = {**nodes("rt2", 2), "provider": "claude-code", "title": "First"}
    assert httpx.post(f"{server.url}/api/sessions/rt2/nodes", json=first, headers=auth).status_code == 200
    later = {**nodes("rt2", 2, start=2), "provider": "other", "title": "Renamed"}
    assert httpx.post(f"{server.url}/api/sessions/rt2/nodes", json=later, headers=auth).json()["added"] == 2
    from scriptorium.sessions import open_store

    store = open_store(f"sqlite:///{server.state / 'sessions' / 'sessions.db'}")
    session = store.get_session("rt2")
    store.close()
    assert (
        session is not None and session.metadata["provider"] == "claude-code" and session.metadata["title"] == "First"
    )
    assert session.head == "n3"


def test_a_runtime_names_the_session_a_new_one_came_from(served: tuple[ThreadServer, dict[str, str]]) -> None:
    server, auth = served
    body = {**nodes("kid", 2), "parent_session_id": "rt-parent", "spawn": "subagent"}
    assert httpx.post(f"{server.url}/api/sessions/kid/nodes", json=body, headers=auth).status_code == 200
    from scriptorium.sessions import open_store, spawned_from

    store = open_store(f"sqlite:///{server.state / 'sessions' / 'sessions.db'}")
    try:
        session = store.get_session("kid")
        assert session is not None and spawned_from(session) == ("rt-parent", "subagent")
    finally:
        store.close()
    bad = {**nodes("kid2", 1), "spawn": "adopted"}
    answer = httpx.post(f"{server.url}/api/sessions/kid2/nodes", json=bad, headers=auth)
    assert answer.status_code in (400, 422) and answer.json()["reason"] == "INVALID_ARGUMENT"


def test_a_compaction_summary_posted_as_the_head_is_never_written(served: tuple[ThreadServer, dict[str, str]]) -> None:
    """A runtime compacts and puts the summary at the head: it restates written turns, so it stays out."""
    server, auth = served
    assert httpx.post(f"{server.url}/api/sessions/cs1/nodes", json=nodes("cs1", 2), headers=auth).status_code == 200
    summary = {
        "nodes": [
            node("sum", "n1", "compaction_summary", "SUMMARY: the release train", "2026-11-05T12:00:00Z"),
            node("n9", "sum", "user", "after the compaction, a new question", "2026-11-05T12:01:00Z"),
        ],
        "head": "n9",
    }
    assert httpx.post(f"{server.url}/api/sessions/cs1/nodes", json=summary, headers=auth).status_code == 200
    done = httpx.post(f"{server.url}/api/events", json=event(session="cs1"), headers=auth)
    assert done.status_code == 202
    memory = server.state / "memory"
    wait_for(lambda: len([k for k in records_citing(memory) if "/cs1/" in k]) == 3, 30, "the forced pass")
    assert {k.rsplit("/", 1)[1] for k in records_citing(memory) if "/cs1/" in k} == {"n0", "n1", "n9"}
    assert not any("SUMMARY" in p.read_text() for p in (memory / "topics").rglob("*.md"))


def test_posted_nodes_and_title_are_stored_without_their_secrets(served: tuple[ThreadServer, dict[str, str]]) -> None:
    """The nodes route redacts as the importers do, before anything is stored."""
    from scriptorium.redaction import PLACEHOLDER
    from tests.helpers.secrets import SECRETS, holding

    server, auth = served
    body = nodes("rt-secret", 2)
    body["title"] = f"Rotate {SECRETS['github']}"
    body["nodes"][0]["content"] = f"my key is {SECRETS['aws-access-key']}"
    body["nodes"][1]["content"] = f"Noted: {SECRETS['aws-access-key']} goes."
    body["nodes"][1]["metadata"] = {"tool_input": f"export STRIPE={SECRETS['stripe']}"}
    added = httpx.post(f"{server.url}/api/sessions/rt-secret/nodes", json=body, headers=auth)
    assert added.status_code == 200 and added.json()["added"] == 2, added.text
    from scriptorium.sessions import open_store

    store = open_store(f"sqlite:///{server.state / 'sessions' / 'sessions.db'}")
    try:
        session = store.get_session("rt-secret")
        stored = [n.content for n in store.get_branch("rt-secret")]
    finally:
        store.close()
    assert session is not None and session.title.startswith("Rotate [redacted: github-token #")
    assert len({p for text in stored for p in PLACEHOLDER.findall(text)}) == 1, "one placeholder for both"
    assert holding(server.state, SECRETS) == {}
