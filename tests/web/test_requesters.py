"""Requesters over real HTTP (`scriptorium serve`): who sees what, and the hold queue end to end.

Two requesters with private sessions and a shared one: each finds its own and the shared records and never
the other's — by search, get, the core and the runtime routes; the owner finds all. A propose token's
change is held (nothing changes), listed, approved (the revision moves once) or rejected (nothing changes),
across restarts; a stale proposal and one from a revoked token are refused with their reason codes; a
write token changes its own records only. The history names requester and approver.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scriptorium.workspace.paths import conversation_file, source_path
from scriptorium.workspace.threads import read_entry
from tests.conftest import git_log, tree_bytes
from tests.helpers.hooks import SCRIPT
from tests.helpers.requesters import Served, copy_served, requesters_template
from tests.requesters_fixtures import (
    ALICE_SEES,
    BOB_SEES,
    EVERYTHING,
    SHARED_ONLY,
    World,
    source_of,
)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[World, dict[str, str]]:
    """One world and its tokens per module; each test that changes it gets a copy."""
    return requesters_template(tmp_path_factory)


@pytest.fixture(scope="module")
def shared_served(tmp_path_factory: pytest.TempPathFactory, template: tuple[World, dict[str, str]]) -> Iterator[Served]:
    """One server for the tests that only read."""
    made = copy_served(template, tmp_path_factory.mktemp("requesters"))
    yield made
    made.server.close()


@pytest.fixture
def served(tmp_path: Path, template: tuple[World, dict[str, str]]) -> Iterator[Served]:
    made = copy_served(template, tmp_path)
    yield made
    made.server.close()


def last_commit_message(state: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(state / "memory"), "log", "-1", "--format=%B"], capture_output=True, text=True, check=True
    )
    return out.stdout


def _found(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    return {hit["memory_id"] for hit in response.json()["results"]}


def test_each_requester_finds_its_own_and_the_shared_records(shared_served: Served) -> None:
    s, world = shared_served, shared_served.world
    search = {"q": "memo", "limit": 50}
    assert _found(s.call("alice", "GET", "/api/memory/search", params=search)) == world.ids(*ALICE_SEES)
    assert _found(s.call("bob", "GET", "/api/memory/search", params=search)) == world.ids(*BOB_SEES)
    assert _found(s.call("owner", "GET", "/api/memory/search", params=search)) == world.ids(*EVERYTHING)
    runtime = {"q": "memo", "limit": 20}
    assert _found(s.call("runtime-alice", "GET", "/api/runtime/search", params=runtime)) == world.ids(*ALICE_SEES)
    assert _found(s.call("runtime", "GET", "/api/runtime/search", params=runtime)) == world.ids(*SHARED_ONLY)
    hits = s.call("owner", "GET", "/api/memory/search", params=search).json()["results"]
    marks = {hit["memory_id"]: hit["audience"] for hit in hits}
    assert all(marks[i] == ["alice", "bob"] for i in world.ids("mixed"))
    assert all(marks[i] is None for i in world.ids("shared-s"))
    refused = s.call("alice", "GET", "/api/memory/search", params={**search, "include_pending": "true"})
    assert refused.status_code == 403 and refused.json()["reason"] == "FORBIDDEN"


def test_a_record_the_requester_may_not_see_is_not_found_like_one_that_does_not_exist(shared_served: Served) -> None:
    s, world = shared_served, shared_served.world
    for who, hidden in [("alice", world.ids("bob-s", "mixed")), ("bob", world.ids("alice-s", "core-alice", "mixed"))]:
        absent = s.call(who, "GET", "/api/memory/records/m-000000000000")
        for memory_id in hidden:
            answer = s.call(who, "GET", f"/api/memory/records/{memory_id}")
            assert answer.status_code == absent.status_code == 404
            body = answer.json()
            assert body == {**absent.json(), "message": f"no record ^{memory_id}"}
    for memory_id in world.ids(*ALICE_SEES):
        assert s.call("alice", "GET", f"/api/memory/records/{memory_id}").status_code == 200
    (mixed,) = world.ids("mixed")
    assert s.call("owner", "GET", f"/api/memory/records/{mixed}").json()["audience"] == ["alice", "bob"]


def test_the_core_is_filtered_per_runtime_token(shared_served: Served) -> None:
    s = shared_served
    alice = s.call("runtime-alice", "GET", "/api/runtime/core").json()["effective"]
    anyone = s.call("runtime", "GET", "/api/runtime/core").json()["effective"]
    assert "alice drinks oolong" in alice and "standups are short" in alice
    assert "oolong" not in anyone and "standups are short" in anyone


def test_a_runtime_token_posts_sessions_of_its_own_audience_only(served: Served) -> None:
    s = served
    body = {
        "nodes": [
            {"id": "n1", "kind": "user", "content": "memo alice likes green tea", "created_at": "2026-11-21T09:00:00Z"}
        ],
        "head": "n1",
        "audience": "bob",
    }
    refused = s.call("runtime-alice", "POST", "/api/sessions/s-new/nodes", json=body)
    assert refused.status_code == 403 and refused.json()["reason"] == "FORBIDDEN"
    posted = s.call("runtime-alice", "POST", "/api/sessions/s-new/nodes", json={**body, "audience": "alice"})
    assert posted.status_code == 200, posted.text
    again = s.call("runtime", "POST", "/api/sessions/s-new/nodes", json={**body, "audience": "bob"})
    assert again.status_code == 400 and again.json()["reason"] == "INVALID_ARGUMENT"  # set once, never changed
    into_bobs = {**body, "audience": None, "nodes": [{**body["nodes"][0], "id": "x1"}]}
    assert s.call("runtime-alice", "POST", "/api/sessions/bob-s/nodes", json=into_bobs).status_code == 403
    # the session's turns are archived as alice's
    idle = {"type": "session.idle", "workspace": "default", "session_id": "s-new"}
    assert s.call("runtime-alice", "POST", "/api/events", json=idle).status_code == 202
    memory, source = s.state / "memory", source_path("runtime", "s-new", "n1")
    from tests.cluster.conftest import wait_for

    wait_for(lambda: (memory / conversation_file(source)).exists(), 30, "the idle pass")
    assert b'audience: "alice"' in read_entry(memory, source)


def _create(text: str, source: str, topic: str = "topics/notes.md") -> dict[str, Any]:
    return {
        "message": f"note {text}",
        "memory_changes": [
            {
                "op": "create_record",
                "content": text,
                "time": "2026-11-21",
                "sources": [{"source": source, "label": "memo"}],
                "destination": {"topic_path": topic},
            }
        ],
    }


def _memory_bytes(state: Path) -> dict[str, bytes]:
    return {p: b for p, b in tree_bytes(state / "memory").items() if not p.startswith(".scriptorium/")}


def test_a_held_change_is_listed_approved_once_and_named_in_the_history(served: Served) -> None:
    s = served
    before, files, log = s.revision(), _memory_bytes(s.state), git_log(s.state / "memory")
    held = s.call("alice", "POST", "/api/memory/changes", json=_create("Memo: tea at four.", source_of("shared-s")))
    assert held.status_code == 202, held.text
    proposal = held.json()
    assert proposal["held"] is True and proposal["state"] == "held" and proposal["baseline_revision"] == before
    assert "+" in proposal["dry_run"]["diff"] and "Memo: tea at four." in proposal["dry_run"]["diff"]
    assert s.revision() == before and _memory_bytes(s.state) == files and git_log(s.state / "memory") == log

    s.restart()  # proposals are durable
    listed = s.call("owner", "GET", "/api/memory/proposals").json()["proposals"]
    assert [(p["id"], p["requester"], p["state"]) for p in listed] == [(proposal["id"], "alice", "held")]
    assert listed[0]["token_revoked"] is False
    assert [p["id"] for p in s.call("alice", "GET", "/api/memory/proposals").json()["proposals"]] == [proposal["id"]]
    assert s.call("bob", "GET", "/api/memory/proposals").json()["proposals"] == []
    assert s.call("bob", "GET", f"/api/memory/proposals/{proposal['id']}").status_code == 404
    assert s.call("alice", "POST", f"/api/memory/proposals/{proposal['id']}/approve").status_code == 403

    approved = s.call("owner", "POST", f"/api/memory/proposals/{proposal['id']}/approve")
    assert approved.status_code == 200, approved.text
    decided = approved.json()
    assert decided["state"] == "approved" and decided["result"]["previous_revision"] == before
    after = s.revision()
    assert after == decided["result"]["revision"] != before
    commits = git_log(s.state / "memory")
    assert len(commits) == len(log) + 1, "the revision moved once"
    body = last_commit_message(s.state)
    assert f"Approved-proposal: {proposal['id']}" in body
    assert "Requested-by: alice (propose)" in body and "Approved-by: owner" in body
    (created,) = decided["result"]["created_ids"]
    assert s.call("alice", "GET", f"/api/memory/records/{created}").status_code == 200
    again = s.call("owner", "POST", f"/api/memory/proposals/{proposal['id']}/approve")
    assert again.status_code == 409 and again.json()["reason"] == "PROPOSAL_CLOSED"
    assert s.revision() == after
    assert s.call("alice", "GET", f"/api/memory/proposals/{proposal['id']}").json()["state"] == "approved"


def test_a_rejected_proposal_changes_nothing_but_the_history(served: Served) -> None:
    s = served
    held = s.call("alice", "POST", "/api/memory/changes", json=_create("Memo: never mind.", source_of("alice-s")))
    assert held.status_code == 202
    pid = held.json()["id"]
    before, files = s.revision(), _memory_bytes(s.state)
    rejected = s.call("owner", "POST", f"/api/memory/proposals/{pid}/reject", json={"why": "not needed"})
    assert rejected.status_code == 200 and rejected.json()["state"] == "rejected"
    assert s.revision() == before and _memory_bytes(s.state) == files
    body = last_commit_message(s.state)
    assert (
        f"Rejected-proposal: {pid}" in body and "Requested-by: alice (propose)" in body and "Rejected-by: owner" in body
    )
    log = subprocess.run(
        [str(SCRIPT), "memory", "log", "--json", "--state", str(s.state)], capture_output=True, text=True, check=True
    )
    assert '"rejected_by": "owner"' in log.stdout and '"requested_by": "alice (propose)"' in log.stdout
    closed = s.call("owner", "POST", f"/api/memory/proposals/{pid}/approve")
    assert closed.status_code == 409 and closed.json()["reason"] == "PROPOSAL_CLOSED"


def test_a_change_that_could_never_apply_is_refused_at_once(served: Served) -> None:
    """Each refused with its reason code, and every stored byte as it was (the request's evidence is not
    archived for a change that is refused)."""
    s = served
    before = s.revision()
    stored = _memory_bytes(s.state)
    (bobs,) = sorted(s.world.ids("bob-s"))[:1]
    cases = [
        ({"memory_changes": [{"op": "delete_record", "memory_id": "m-000000000000"}]}, 404, "NOT_FOUND"),
        ({"memory_changes": [{"op": "delete_record", "memory_id": bobs}]}, 404, "NOT_FOUND"),  # not alice's to see
        (_create("Memo: bob's keys.", source_of("bob-s")), 422, "INVALID_SOURCE"),
        ({"changes": [{"path": "topics/x.md", "action": "create", "content": "# X\n"}]}, 403, "FORBIDDEN"),
    ]
    for body, status, reason in cases:
        answer = s.call("alice", "POST", "/api/memory/changes", json=body)
        assert (answer.status_code, answer.json()["reason"]) == (status, reason), body
    assert s.call("owner", "GET", "/api/memory/proposals").json()["proposals"] == []
    assert s.revision() == before
    assert _memory_bytes(s.state) == stored


def test_a_stale_proposal_stays_marked_with_the_reason(served: Served) -> None:
    s = served
    (shared,) = sorted(s.world.ids("core-shared"))
    change = {
        "op": "update_record",
        "memory_id": shared,
        "content": "Core memo: standups are tiny.",
        "time": None,
        "sources": [{"source": source_of("shared-s"), "label": "memo"}],
    }
    held = s.call("alice", "POST", "/api/memory/changes", json={"memory_changes": [change]})
    assert held.status_code == 202, held.text
    pid = held.json()["id"]
    deleted = s.call(
        "owner", "POST", "/api/memory/changes", json={"memory_changes": [{"op": "delete_record", "memory_id": shared}]}
    )
    assert deleted.status_code == 200, deleted.text
    before = s.revision()
    refused = s.call("owner", "POST", f"/api/memory/proposals/{pid}/approve")
    assert refused.status_code == 404 and refused.json()["reason"] == "NOT_FOUND"
    stale = s.call("owner", "GET", f"/api/memory/proposals/{pid}").json()
    assert stale["state"] == "stale" and stale["refusal"]["reason"] == "NOT_FOUND"
    assert s.revision() == before
    assert s.call("owner", "POST", f"/api/memory/proposals/{pid}/reject").json()["state"] == "rejected"


def test_a_proposal_from_a_revoked_token_is_not_applied(served: Served) -> None:
    s = served
    held = s.call("alice", "POST", "/api/memory/changes", json=_create("Memo: revoked.", source_of("shared-s")))
    pid = held.json()["id"]
    token_id = s.tokens["alice"].split("_")[1]
    subprocess.run([str(SCRIPT), "token", "revoke", token_id, "--state", str(s.state)], check=True, timeout=60)
    s.restart()
    assert s.call("alice", "GET", "/api/memory/proposals").status_code == 403
    listed = s.call("owner", "GET", "/api/memory/proposals").json()["proposals"]
    assert [p["token_revoked"] for p in listed] == [True]
    before = s.revision()
    refused = s.call("owner", "POST", f"/api/memory/proposals/{pid}/approve")
    assert refused.status_code == 409 and refused.json()["reason"] == "REQUESTER_REVOKED"
    assert s.revision() == before
    assert s.call("owner", "POST", f"/api/memory/proposals/{pid}/reject").json()["state"] == "rejected"


def test_a_write_token_changes_its_own_records_directly_and_nothing_else(served: Served) -> None:
    s = served
    before = s.revision()
    written = s.call(
        "bob", "POST", "/api/memory/changes", json=_create("Memo: vault code rotates.", source_of("bob-s"))
    )
    assert written.status_code == 200, written.text
    (created,) = written.json()["created_ids"]
    assert written.json()["previous_revision"] == before
    body = last_commit_message(s.state)
    assert "Requested-by: bob (write)" in body
    assert s.call("alice", "GET", f"/api/memory/records/{created}").status_code == 404
    own = {
        "op": "update_record",
        "memory_id": created,
        "content": "Memo: vault code rotates weekly.",
        "time": None,
        "sources": [{"source": source_of("bob-s"), "label": "memo"}],
    }
    assert s.call("bob", "POST", "/api/memory/changes", json={"memory_changes": [own]}).status_code == 200
    (shared,) = sorted(s.world.ids("core-shared"))
    beside = sorted(s.world.ids("shared-s"))[0]
    record = s.call("owner", "GET", f"/api/memory/records/{beside}").json()
    anchored = _create("Memo: the vault is in the cellar.", source_of("bob-s"))
    anchored["memory_changes"][0]["destination"] = {
        "topic_path": record["topic_path"],
        "headings": record["headings"],
        "position": "after",
        "anchor_memory_id": beside,
    }
    placed = s.call("bob", "POST", "/api/memory/changes", json=anchored)
    assert placed.status_code == 200, f"a record of its own beside a shared one it may see: {placed.text} {record}"
    at = s.revision()
    for body_, status, reason in [
        ({"memory_changes": [{"op": "delete_record", "memory_id": shared}]}, 403, "FORBIDDEN"),
        (
            {"memory_changes": [{"op": "delete_record", "memory_id": sorted(s.world.ids("alice-s"))[0]}]},
            404,
            "NOT_FOUND",
        ),
        ({"patch": "--- a/topics/x.md\n+++ b/topics/x.md\n"}, 403, "FORBIDDEN"),
        (_create("Memo: a path too long.", "runtime/bob-s/bob-s-1/extra"), 422, "INVALID_SOURCE"),
    ]:
        answer = s.call("bob", "POST", "/api/memory/changes", json=body_)
        assert (answer.status_code, answer.json()["reason"]) == (status, reason), body_
    assert s.revision() == at
