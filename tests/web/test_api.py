"""The owner REST API: the app `scriptorium serve` serves, in this process (:class:`tests.helpers.served.AppServer`),
and the command itself on a free port once, end to end (:func:`test_scriptorium_serve_answers_over_real_http`)."""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange
from scriptorium.workspace.paths import source_path
from scriptorium.workspace.threads import read_entry
from tests.conftest import git_log
from tests.helpers.cli import run
from tests.helpers.served import AppServer, Server, api_world
from tests.helpers.worlds import copied


@pytest.fixture
def server(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    made = AppServer(copied("api-seed", api_world, tmp_path_factory, tmp_path / "state"))
    yield made
    made.close()


def test_scriptorium_serve_answers_over_real_http(tmp_path: Path) -> None:
    """The command end to end: a process on a port, the owner token made 0600 on the way, refusals without
    it, the API and the page with it."""
    state = tmp_path / "state"
    api_world(state)
    live = Server(state)
    try:
        assert (state / "owner-token").stat().st_mode & 0o777 == 0o600
        with live.anonymous() as anonymous:
            assert anonymous.get("/api/memory/status").status_code == 401
            assert anonymous.get("/api/memory/status", headers={"Authorization": "Bearer nope"}).status_code == 403
            assert anonymous.post("/memory/login", data={"token": live.token}).status_code == 303
            shown = anonymous.get("/memory", params={"section": "topics", "item": "topics/a.md"})
            assert shown.status_code == 200 and "Tea" in shown.text
        status = live.client.get("/api/memory/status")
        assert status.status_code == 200 and status.json()["records"] == 1
        assert "/api/memory/changes" in live.client.get("/openapi.json").json()["paths"]
    finally:
        live.close()


def test_every_route_needs_the_owner_token_and_refusals_touch_nothing(server: AppServer) -> None:
    before = server.client.get("/api/memory/status").json()["revision"]
    for method, path in [
        ("get", "/api/memory/status"),
        ("get", "/api/memory/core"),
        ("get", "/api/memory/topics"),
        ("get", "/api/memory/search?q=tea"),
        ("post", "/api/memory/changes"),
        ("put", "/api/memory/core"),
    ]:
        with server.anonymous() as anonymous:
            assert anonymous.request(method, path).status_code == 401
            assert anonymous.request(method, path, headers={"Authorization": "Bearer nope"}).status_code == 403
    assert server.client.get("/api/memory/status").json()["revision"] == before
    assert (server.state / "owner-token").stat().st_mode & 0o777 == 0o600


def test_reading_a_topic_on_the_page_changes_no_stored_byte(server: AppServer) -> None:
    """Rendering works on a copy: the topic file, the revision and the git log are as they were."""
    memory = server.state / "memory"
    topic = memory / "topics" / "a.md"

    def stored() -> tuple[bytes, str, list[str]]:
        return topic.read_bytes(), server.client.get("/api/memory/status").json()["revision"], git_log(memory)

    before = stored()
    page = server.anonymous()
    assert page.post("/memory/login", data={"token": server.token}).status_code == 303
    for view in ("preview", "edit"):
        shown = page.get("/memory", params={"section": "topics", "item": "topics/a.md", "view": view})
        assert shown.status_code == 200 and "Tea" in shown.text
    page.close()
    assert stored() == before


def test_the_three_formats_and_reads(server: AppServer) -> None:
    created = server.client.post(
        "/api/memory/changes",
        json={
            "memory_changes": [
                {
                    "op": "create_record",
                    "content": "Coffee too.",
                    "time": None,
                    "sources": [{"source": "test/t1/m2", "label": "coffee"}],
                    "destination": {"topic_path": "topics/a.md", "headings": ["A"], "position": "end"},
                }
            ]
        },
    )
    assert created.status_code == 200, created.text
    body = created.json()
    assert body["git_committed"] and body["created_ids"] and body["commit"]
    (rid,) = body["created_ids"]
    record = server.client.get(f"/api/memory/records/{rid}").json()
    assert record["sources"] == [{"source": "test/t1/m2", "label": "coffee"}]
    why = server.client.get(f"/api/memory/records/{rid}/provenance").json()["provenance"]
    assert [s["source"] for s in why["sources"]] == ["test/t1/m2"] and why["sources"][0]["trust"] == "trusted"
    assert why["introduced"]["commit"] == body["commit"] == why["last_changed"]["commit"]
    unknown = server.client.get("/api/memory/records/m-000000000000/provenance")
    assert unknown.status_code == 404 and unknown.json()["reason"] == "NOT_FOUND"
    conversation = server.client.get("/api/memory/sources", params={"thread": "test/t1"}).json()
    assert any(s["message"] == "m2" and rid in s["cited_by"] for s in conversation["sources"])
    neither = server.client.get("/api/memory/sources")
    assert neither.status_code == 400 and neither.json()["reason"] == "INVALID_ARGUMENT"
    whole = server.client.post(
        "/api/memory/changes",
        json={"changes": [{"path": "topics/b.md", "action": "create", "content": "Juice [juice](test/t1/m3).\n"}]},
    )
    assert whole.status_code == 200 and "topics/b.md" in whole.json()["changed_files"]
    assert server.client.get("/api/memory/topics").json()["topics"] == ["topics/a.md", "topics/b.md"]
    text = server.client.get("/api/memory/topics/topics/a.md").json()["content"]
    patch = "".join(
        __import__("difflib").unified_diff(
            text.splitlines(True), text.replace("Tea", "Green tea").splitlines(True), "a/topics/a.md", "b/topics/a.md"
        )
    )
    patched = server.client.post("/api/memory/changes", json={"patch": patch})
    assert patched.status_code == 200 and "topics/a.md" in patched.json()["changed_files"]
    status = server.client.get("/api/memory/status").json()
    assert status["revision"] == patched.json()["revision"] and status["records"] == 3
    assert "/api/memory/changes" in server.client.get("/openapi.json").json()["paths"]


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (
            {"changes": [{"path": "topics/c.md", "action": "create", "content": "Uncited.\n"}]},
            422,
            "INVALID_TOPIC_FORMAT",
        ),
        ({"changes": [{"path": "sources/x.md", "action": "create", "content": "x"}]}, 400, "INVALID_PATH"),
        ({"memory_changes": [{"op": "delete_record", "memory_id": "m-000000000000"}]}, 404, "NOT_FOUND"),
        ({"patch": "not a diff"}, 400, "INVALID_PATCH"),
    ],
)
def test_errors_carry_reason_codes_and_change_nothing(server: AppServer, body: dict, status: int, reason: str) -> None:  # type: ignore[type-arg]
    before = server.client.get("/api/memory/status").json()["revision"]
    answer = server.client.post("/api/memory/changes", json=body)
    assert answer.status_code == status and answer.json()["reason"] == reason and answer.json()["message"]
    assert server.client.get("/api/memory/status").json()["revision"] == before


def test_malformed_bodies_are_422_from_the_schema(server: AppServer) -> None:
    for body in (
        {},
        {"patch": "x", "changes": []},
        {"memory_changes": [{"op": "merge_records"}]},
        {"patch": "x", "provenance": "forged"},
    ):
        assert server.client.post("/api/memory/changes", json=body).status_code == 422


def test_core_is_a_consistent_snapshot_and_saves_compare_and_set(server: AppServer) -> None:
    core = server.client.get("/api/memory/core").json()
    assert core["content"] == "" and core["inject"] and core["budget"] == 2000
    saved = server.client.put(
        "/api/memory/core",
        json={"content": "Always answer briefly [brief](test/t1/m1).\n", "expected_revision": core["revision"]},
    )
    assert saved.status_code == 200, saved.text
    stale = server.client.put("/api/memory/core", json={"content": "x", "expected_revision": core["revision"]})
    assert stale.status_code == 409 and stale.json()["reason"] == "REVISION_CONFLICT"
    after = server.client.get("/api/memory/core").json()
    assert "answer briefly" in after["effective"] and after["tokens"] > 0 and after["size"] > 0
    # Reads during concurrent installs: each response's rendered block is the one of the revision it names.
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            current = server.client.get("/api/memory/core").json()
            server.client.put(
                "/api/memory/core",
                json={"content": f"Rule {n} [brief](test/t1/m1).\n", "expected_revision": current["revision"]},
            )

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        git = ["git", f"--git-dir={server.state / 'memory' / '.git'}"]
        for _ in range(15):
            snap = server.client.get("/api/memory/core").json()
            tree_core = subprocess.run(
                [*git, "cat-file", "-p", f"{snap['revision']}:core.md"], capture_output=True, text=True, check=True
            ).stdout
            assert snap["rendered"] == tree_core
    finally:
        stop.set()
        thread.join()


def test_backend_none_refuses_every_route_and_verb_before_creating_anything(tmp_path: Path) -> None:
    state = tmp_path / "disabled"
    server = AppServer(state, SCRIPTORIUM_BACKEND="none")
    try:
        assert server.client.get("/api/memory/status").status_code == 404
        assert server.client.post("/api/memory/changes", json={"patch": "x"}).status_code == 404
    finally:
        server.close()
    assert not (state / "memory").exists()
    out = run("memory", "init", "--state", str(state), env={"SCRIPTORIUM_BACKEND": "none"})
    assert out.returncode == 3 and "disabled" in out.stderr and not (state / "memory").exists()


def test_search_and_the_effective_core_leave_out_pending_backed_records(server: AppServer) -> None:
    ws = MemoryWorkspace(server.state / "memory")
    with ws.lock():
        paths = ws.archive_sources(
            [SourceMessage("web", "forum", "p1", "user", "2026-11-02T00:00:00Z", "hearsay", trust="pending")]
        )
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.close()
    core = server.client.get("/api/memory/core").json()
    content = "# Core\n\nThe user likes jasmine tea [tea](test/t1/m2).\n\nThe user owns a castle [c](web/forum/p1).\n"
    saved = server.client.put("/api/memory/core", json={"content": content, "expected_revision": core["revision"]})
    assert saved.status_code == 200, saved.text
    core = server.client.get("/api/memory/core").json()
    assert "castle" in core["rendered"] and "castle" in core["content"]
    assert "jasmine" in core["effective"] and "castle" not in core["effective"]
    automatic = server.client.get("/api/memory/search", params={"q": "castle jasmine"}).json()["results"]
    assert [r["trust"] for r in automatic] == ["trusted"] and "jasmine" in automatic[0]["snippet"]
    owner = server.client.get("/api/memory/search", params={"q": "castle", "include_pending": "true"}).json()
    shown = [(r["trust"], "castle" in r["snippet"]) for r in owner["results"]]
    assert shown[0] == ("pending", True) and set(shown[1:]) <= {("trusted", False)}, "a neighbour may follow"
    hybrid = server.client.get("/api/memory/search", params={"q": "jasmine tea", "mode": "hybrid"}).json()
    assert {r["trust"] for r in hybrid["results"]} == {"trusted"} and "jasmine" in hybrid["results"][0]["snippet"]
    for bad in ({"q": ""}, {"q": "tea", "limit": "0"}, {"q": "tea", "limit": "x"}, {}, {"q": "tea", "mode": "x"}):
        assert server.client.get("/api/memory/search", params=bad).status_code == 422, bad
    with server.anonymous() as anonymous:
        assert anonymous.get("/api/memory/search", params={"q": "tea"}).status_code == 401


def test_new_sources_through_the_api_are_the_owners_and_callers_cannot_set_trust(server: AppServer) -> None:
    record = {
        "op": "create_record",
        "content": "The wifi password is on the fridge.",
        "time": "undated",
        "sources": [{"source": "new-source-wifi", "label": "wifi"}],
        "destination": {"topic_path": "topics/home.md"},
    }
    sneaky = {
        "memory_changes": [record],
        "new_sources": [{"id": "new-source-wifi", "text": "wifi", "trust": "trusted"}],
    }
    refused = server.client.post("/api/memory/changes", json=sneaky)
    assert refused.status_code == 422 and "trust" in refused.text
    body = {"memory_changes": [record], "new_sources": [{"id": "new-source-wifi", "text": "on the fridge"}]}
    created = server.client.post("/api/memory/changes", json=body)
    assert created.status_code == 200, created.text
    (path,) = [p for p in created.json()["changed_files"] if p.startswith("sources/")]
    assert path == "sources/scriptorium/57/owner.md", "the owner's notes: one conversation file"
    assert 'trust: "trusted"' in (server.state / "memory" / path).read_text()


def test_the_page_marks_records_from_a_left_branch(tmp_path: Path) -> None:
    """Flask on the branch the user left, FastAPI where the head is: the topic page marks Flask, not FastAPI."""
    from datetime import UTC, datetime, timedelta

    from scriptorium.sessions import Node, NodeKind, open_store
    from scriptorium.workspace import MemoryWorkspace
    from scriptorium.writers.organizer import OfflineOrganizer
    from scriptorium.writers.verbatim import VerbatimWriter
    from scriptorium.writing.service import WriteService, WriteSettings

    state = tmp_path / "state"
    ws = MemoryWorkspace.init(state / "memory")
    store = open_store(f"sqlite:///{state / 'sessions' / 'sessions.db'}")
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    turns = [("m1", None, "Atlas needs a framework."), ("a2", "m1", "Atlas runs on Flask."),
             ("b2", "m1", "Atlas runs on FastAPI.")]  # fmt: skip
    store.create_session("atlas", {"provider": "test", "title": "Atlas"})
    store.add_nodes(
        [Node(n, "atlas", p, "user", NodeKind.USER, t, t0 + timedelta(minutes=i)) for i, (n, p, t) in enumerate(turns)],
        head="b2",
    )
    assert (
        WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0))
        .write("atlas", force=True)
        .ok
    )
    (topic,) = [p for p in ws.snapshot().topics if p.startswith("topics/conversations/")]
    ws.close()
    store.close()
    server = AppServer(state)
    try:
        with server.anonymous() as browser:
            assert browser.post("/memory/login", data={"token": server.token}).status_code == 303
            page = browser.get(f"/memory?section=topics&item={topic}").text
    finally:
        server.close()
    paragraphs = re.findall(r"<p[^>]*>.*?</p>", page, re.S)
    flask = next(p for p in paragraphs if "Flask" in p)
    fastapi = next(p for p in paragraphs if "FastAPI" in p)
    assert 'class="alternative"' in flask and "option not taken" in flask
    assert "alternative" not in fastapi and "option not taken" not in fastapi


def test_the_page_says_which_session_spawned_a_records_session(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from scriptorium.sessions import Node, NodeKind, open_store
    from scriptorium.workspace import MemoryWorkspace
    from scriptorium.writers.organizer import OfflineOrganizer
    from scriptorium.writers.verbatim import VerbatimWriter
    from scriptorium.writing.service import WriteService, WriteSettings

    state = tmp_path / "state"
    ws = MemoryWorkspace.init(state / "memory")
    store = open_store(f"sqlite:///{state / 'sessions' / 'sessions.db'}")
    t0 = datetime(2026, 11, 1, tzinfo=UTC)
    store.create_session("main", {"provider": "test", "title": "Main"})
    store.add_nodes([Node("p1", "main", None, "user", NodeKind.USER, "Look into the flaky test.", t0)], head="p1")
    store.create_session("main.agent-1", {"provider": "test", "title": "Helper", "parent_session": "main",
                                          "spawn": "subagent"})  # fmt: skip
    store.add_nodes([Node("h1", "main.agent-1", None, "assistant", NodeKind.ASSISTANT, "The clock is mocked.", t0)],
                    head="h1")  # fmt: skip
    assert (
        WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0))
        .write("main", force=True)
        .ok
    )
    topics = [p for p in ws.snapshot().topics if p.startswith("topics/conversations/")]
    ws.close()
    store.close()
    server = AppServer(state)
    try:
        with server.anonymous() as browser:
            assert browser.post("/memory/login", data={"token": server.token}).status_code == 303
            pages = [browser.get(f"/memory?section=topics&item={t}").text for t in topics]
    finally:
        server.close()
    paragraphs = [p for page in pages for p in re.findall(r"<p[^>]*>.*?</p>", page, re.S)]
    helper = next(p for p in paragraphs if "clock is mocked" in p)
    asked = next(p for p in paragraphs if "flaky test" in p)
    assert '<span class="origin-label">spawned by main</span>' in helper and "origin-label" not in asked


def test_the_owner_forgets_a_source_over_rest_and_a_dry_run_changes_nothing(server: AppServer) -> None:
    before = server.client.get("/api/memory/status").json()["revision"]
    dry = server.client.post("/api/memory/forget", json={"sources": ["test/t1/m1"], "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json()["deleted"] and server.client.get("/api/memory/status").json()["revision"] == before
    bad = server.client.post("/api/memory/forget", json={"sources": ["test/t1/m1"], "session": "s"})
    assert bad.status_code == 422  # one selection only
    missing = server.client.post("/api/memory/forget", json={"sources": ["test/none/m9"]})
    assert missing.status_code == 404 and missing.json()["reason"] == "NOT_FOUND"
    done = server.client.post("/api/memory/forget", json={"sources": ["test/t1/m1"], "why": "asked to"})
    assert done.status_code == 200, done.text
    assert done.json()["transaction"]["previous_revision"] == before
    assert server.client.get("/api/memory/search", params={"q": "tea"}).json()["results"] == []
    source = read_entry(server.state / "memory", source_path("test", "t1", "m1")).decode()
    assert "forgotten" in source and "asked to" in source and "\nm1\n" not in source


def test_the_page_strikes_a_superseded_record_through_and_links_the_newer_one(seeded: MemoryWorkspace) -> None:
    old_text = "# Dev\n\n2026-03-02: Run the tests with make check [k](test/t1/m1).\n"
    (old,) = seeded.apply_changes([TopicChange("topics/dev.md", "create", old_text)], message="old").created_ids
    newer = f"2026-05-10: Run the tests with uv run pytest [k](test/t1/m3) ([supersedes](dev.md#^{old})).\n"
    written = (seeded.root / "topics/dev.md").read_text()
    seeded.apply_changes([TopicChange("topics/dev.md", "update", f"{written}\n{newer}")], message="newer")
    state = seeded.root.parent
    seeded.close()
    server = AppServer(state)
    try:
        with server.anonymous() as browser:
            assert browser.post("/memory/login", data={"token": server.token}).status_code == 303
            page = browser.get("/memory?section=topics&item=topics/dev.md").text
    finally:
        server.close()
    paragraphs = re.findall(r"<p[^>]*>.*?</p>", page, re.S)
    stale = next(p for p in paragraphs if "make check" in p)
    current = next(p for p in paragraphs if "uv run pytest" in p)
    assert 'class="superseded"' in stale and "#block-" in stale and "superseded by" in stale
    assert "superseded by" not in current
