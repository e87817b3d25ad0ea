"""The Memory page in a real browser: Debian's Chromium, headless, driven by Playwright.

Screenshots of every section at both widths go to ``test-artifacts/memory-page/``.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from scriptorium.sessions import Node, NodeKind, open_store
from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.service import WriteService, WriteSettings
from tests.helpers.served import ThreadServer
from tests.requirements import CHROMIUM, require

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "memory-page"
require("playwright", module_level=True)
require("chromium", module_level=True)
playwright_api = importlib.import_module("playwright.sync_api")

XSS = [
    "<script>window.__xss = 1; alert(1)</script>",
    '<img src=x onerror="window.__xss = 1">',
    '<svg onload="window.__xss = 1"><circle r=4 /></svg>',
    "[click me](javascript:window.__xss=1)",
    "[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    '<a href="javascript:window.__xss=1">raw link</a>',
    '<iframe src="javascript:window.__xss=1"></iframe>',
]

TOPIC = """# Project Atlas

## Decisions

2026-11-02: We chose PostgreSQL for the session store.[^e-1] It replaced SQLite.[^e-2]

2026-11: The nightly reorganize runs at three.[^e-1] Also inline.^[An inline aside.]

2026: Atlas ships this year.[^e-3]

[^e-1]: [postgres](../sources/test/e5/t1/m1.md#source-m1)
[^e-2]: [sqlite](../sources/test/e5/t1/m2.md#source-m2)
[^e-3]: [ship](../sources/test/e5/t1/m3.md#source-m3)
"""


def seed(state: Path) -> None:
    ws = MemoryWorkspace.init(state / "memory")
    with ws.lock():
        paths = ws.archive_sources(
            [SourceMessage("test", "t1", f"m{n}", "user", "2026-11-01T00:00:00Z", f"message {n}") for n in range(6)]
        )
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes(
        [
            TopicChange("topics/projects/atlas.md", "create", TOPIC),
            TopicChange("topics/core.md", "create", "# Core\n\nAnswer briefly [brief](test/t1/m4).\n"),
        ],
        message="seed",
    )
    # The XSS corpus goes in through a writer (the verbatim writer records what a conversation said) ...
    store = open_store(f"sqlite:///{state / 'sessions.db'}")
    store.create_session("evil", {"provider": "test"})
    nodes, parent = [], None
    for n, text in enumerate(XSS):
        nodes.append(Node(f"x{n}", "evil", parent, "user", NodeKind.USER, text, datetime(2026, 11, 3, tzinfo=UTC)))
        parent = f"x{n}"
    store.add_nodes(nodes, head=parent)
    service = WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(trigger_tokens=0))
    assert service.write("evil", force=True).ok
    store.close()
    ws.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    state = tmp_path_factory.mktemp("page") / "state"
    seed(state)
    running = ThreadServer(state)
    # ... and through the REST API, as another program would write it.
    attacks = "# Attacks\n\n" + "".join(f"{x} [k](test/t1/m5).\n\n" for x in XSS)
    posted = running.client.post(
        "/api/memory/changes", json={"changes": [{"path": "topics/attacks.md", "action": "create", "content": attacks}]}
    )
    assert posted.status_code == 200, posted.text
    yield running
    running.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield launched
        launched.close()


class Watched:
    """A signed-in page that records dialogs (script ran) and CSP violations."""

    def __init__(self, browser: Any, server: ThreadServer, width: int, height: int) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.dialogs: list[str] = []
        self.csp: list[str] = []
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("console", lambda m: self.csp.append(m.text) if "Content Security Policy" in m.text else None)
        self.base = server.url
        self.page.goto(f"{self.base}/memory")
        self.page.fill("#token", server.token)
        self.page.click("button[type=submit]")
        self.page.wait_for_url(f"{self.base}/memory")

    def open(self, query: str) -> Any:
        self.page.goto(f"{self.base}/memory?{query}")
        return self.page

    def no_sideways_scroll_or_overlap(self) -> None:
        page = self.page
        assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
        boxes = [b for b in (page.locator(s).bounding_box() for s in (".sidebar", ".content")) if b]
        visible = [b for b in boxes if b["width"] > 0 and b["height"] > 0]
        if len(visible) == 2:
            left, right = sorted(visible, key=lambda b: b["x"])
            assert left["x"] + left["width"] <= right["x"] + 0.5, visible

    def close(self) -> None:
        assert not self.dialogs, self.dialogs
        assert not self.csp, self.csp
        assert self.page.evaluate("window.__xss === undefined")
        self.context.close()


@pytest.mark.parametrize(("width", "height", "label"), [(1440, 900, "wide"), (390, 844, "narrow")])
def test_every_section_renders_safely_at_both_widths(
    browser: Any, server: ThreadServer, width: int, height: int, label: str
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    view = Watched(browser, server, width, height)
    page = view.open("section=topics&item=topics/projects/atlas.md")
    body = page.locator("article.document").inner_text()
    prose = body.split("postgres")[0]  # the text above the footnote list
    assert all(f"[{n}]" in body for n in range(1, 5))
    assert "^m-" not in body and "[^" not in prose and "e-1" not in prose
    assert page.locator("section.footnotes ol li").count() == 4  # e-1, e-2, the inline aside, e-3
    assert "An inline aside." in page.locator("section.footnotes li").nth(2).inner_text()
    assert page.locator("h1").first.inner_text() == "Project Atlas"  # the topic's own title, not its slug
    view.no_sideways_scroll_or_overlap()
    page.screenshot(path=str(ARTIFACTS / f"topics-{label}.png"), full_page=True)

    page = view.open("section=topics&item=topics/attacks.md")
    assert "window.__xss" in page.locator("article.document").inner_text()  # shown as text, never run
    page.screenshot(path=str(ARTIFACTS / f"xss-{label}.png"), full_page=True)

    page = view.open("section=timeline&item=2026-11-02")
    day = page.locator("details.day", has=page.locator("summary", has_text="2026-11-02"))
    assert day.get_attribute("open") is not None and "PostgreSQL" in day.inner_text()
    other = page.locator(".closed.day", has_text="2026-11-03")
    assert other.count() == 1 and other.locator("a").count() == 1  # only the chosen day is expanded, the other a link
    assert "2026" in page.locator("details.year > summary").first.inner_text()
    assert "Atlas ships this year" in page.locator("details.year").first.inner_text()  # a year-only date
    assert page.locator("details.year summary").first.inner_text().startswith("2026")
    page.locator("details.year > summary").first.click()  # collapse the year
    assert page.locator("details.year").first.get_attribute("open") is None
    view.no_sideways_scroll_or_overlap()
    page.screenshot(path=str(ARTIFACTS / f"timeline-{label}.png"), full_page=True)

    page = view.open("section=recent")
    count = page.locator(".recent-count").inner_text()
    assert count.endswith(" / 50 records") and int(count.split(" ")[0]) > 0
    view.no_sideways_scroll_or_overlap()
    page.screenshot(path=str(ARTIFACTS / f"recent-{label}.png"), full_page=True)

    page = view.open("section=core")
    assert "Answer briefly" in page.locator("article.document").inner_text()
    status = page.locator(".core-status").inner_text()
    assert status.startswith("Injection enabled") and status.endswith("/ 2,000 tokens")
    view.no_sideways_scroll_or_overlap()
    page.screenshot(path=str(ARTIFACTS / f"core-{label}.png"), full_page=True)
    view.close()


def test_narrow_mode_switches_between_list_and_detail_with_back(browser: Any, server: ThreadServer) -> None:
    view = Watched(browser, server, 390, 844)
    page = view.open("section=topics")
    assert page.locator(".sidebar").is_visible() and not page.locator(".content").is_visible()
    assert not page.locator(".sections .label").first.is_visible()  # icons only
    with page.expect_navigation(wait_until="load"):  # the stylesheet applied before looking
        page.click("text=atlas")
    assert page.locator(".content").is_visible() and not page.locator(".sidebar").is_visible()
    with page.expect_navigation(wait_until="load"):
        page.click(".back")
    assert page.locator(".sidebar").is_visible() and not page.locator(".content").is_visible()
    core = view.open("section=core")  # Core enters content mode directly
    assert core.locator(".content").is_visible() and core.locator(".back").is_visible()
    view.no_sideways_scroll_or_overlap()
    view.close()


def test_core_saves_compare_and_set_and_a_stale_save_keeps_its_draft(browser: Any, server: ThreadServer) -> None:
    first = Watched(browser, server, 1440, 900)
    second = Watched(browser, server, 1440, 900)
    a = first.open("section=core&view=source")
    b = second.open("section=core&view=source")
    original = a.locator("textarea").input_value()
    assert "^m-" in original  # the source view shows the records' IDs; a save must keep them
    a.fill("textarea", original.replace("Answer briefly", "Answer briefly and kindly"))
    with a.expect_navigation():
        a.click("text=Save")
    assert not a.locator(".error").count(), a.locator(".error").inner_text()
    assert "kindly" in first.open("section=core").locator("article.document").inner_text()
    draft = original.replace("Answer briefly", "A stale edit")
    b.fill("textarea", draft)
    with b.expect_navigation():
        b.click("text=Save")
    assert "REVISION_CONFLICT" in b.locator(".error").inner_text()
    assert b.locator("textarea").input_value() == draft  # the draft survives the refusal
    assert (
        "kindly"
        in httpx.get(f"{server.url}/api/memory/core", headers={"Authorization": f"Bearer {server.token}"}).json()[
            "content"
        ]
    )
    first.close()
    second.close()


def test_the_page_needs_the_owner_and_refuses_forged_saves(server: ThreadServer) -> None:
    assert httpx.get(f"{server.url}/memory").status_code == 401
    bad = httpx.post(f"{server.url}/memory/login", data={"token": "nope"})
    assert bad.status_code == 403
    signed = httpx.post(f"{server.url}/memory/login", data={"token": server.token})
    cookie = signed.cookies.get("scriptorium_session")
    header = signed.headers["set-cookie"].lower()
    assert cookie and "httponly" in header and "samesite=strict" in header
    before = httpx.get(f"{server.url}/api/memory/status", headers={"Authorization": f"Bearer {server.token}"})
    forged = httpx.post(
        f"{server.url}/memory/save",
        data={"path": "topics/core.md", "content": "pwned", "csrf": "guess"},
        cookies={"scriptorium_session": cookie},
    )
    assert forged.status_code == 403
    for action, form in [
        ("/memory/decide", {"id": "p-000000000000", "action": "approve"}),
        ("/memory/source", {"path": "sources/test/e5/t1/m1.md", "action": "forget"}),
        ("/memory/source", {"path": "sources/test/e5/t1/m1.md", "action": "promote"}),
    ]:
        assert httpx.post(f"{server.url}{action}", data={**form, "csrf": "guess"}).status_code == 401  # no session
        refused = httpx.post(
            f"{server.url}{action}", data={**form, "csrf": "guess"}, cookies={"scriptorium_session": cookie}
        )
        assert refused.status_code == 403, action
    after = httpx.get(f"{server.url}/api/memory/status", headers={"Authorization": f"Bearer {server.token}"})
    assert after.json()["revision"] == before.json()["revision"]
    page = httpx.get(f"{server.url}/memory", cookies={"scriptorium_session": cookie})
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp  # no script source at all


def test_an_empty_workspace_shows_its_own_card_and_backend_none_shows_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    MemoryWorkspace.init(state / "memory").close()
    empty = ThreadServer(state)
    try:
        signed = httpx.post(f"{empty.url}/memory/login", data={"token": empty.token})
        page = httpx.get(f"{empty.url}/memory", cookies=signed.cookies)
        assert page.status_code == 200 and "No topics yet" in page.text and 'class="empty-card"' in page.text
        assert "pending" not in page.text.lower() and "failure" not in page.text.lower()  # no status dashboards
        settings = httpx.get(f"{empty.url}/memory?section=settings", cookies=signed.cookies)
        assert "memory.recent.limit" in settings.text and "50" in settings.text
    finally:
        empty.close()
    quiet = ThreadServer(state, SCRIPTORIUM_CORE_INJECT="false")
    try:
        signed = httpx.post(f"{quiet.url}/memory/login", data={"token": quiet.token})
        core = httpx.get(f"{quiet.url}/memory?section=core", cookies=signed.cookies).text
        assert "Injection disabled · 0 / 2,000 tokens" in core and "Nothing is injected (injection is disabled)" in core
    finally:
        quiet.close()
    off = ThreadServer(state, SCRIPTORIUM_BACKEND="none")
    try:
        signed = httpx.post(f"{off.url}/memory/login", data={"token": off.token})
        page = httpx.get(f"{off.url}/memory", cookies=signed.cookies)
        assert page.status_code == 404 and "memory.backend=none" in page.text
    finally:
        off.close()


def test_proposals_are_decided_on_the_page_at_both_widths(browser: Any, tmp_path: Path) -> None:
    """Held → listed → approved (the revision moves once); held → rejected (nothing changes); a stale one
    shows its reason and stays; a restart in between loses nothing."""
    from tests.conftest import git_log
    from tests.helpers.tokens import scoped_token
    from tests.requesters_fixtures import requesters_world, source_of

    world = requesters_world(tmp_path / "state")
    alice = scoped_token(world.state, "propose", "--requester", "alice")
    running = ThreadServer(world.state)

    def propose(text: str) -> str:
        body = {
            "message": f"note {text}",
            "memory_changes": [
                {
                    "op": "create_record",
                    "content": text,
                    "time": "2026-11-21",
                    "sources": [{"source": source_of("shared-s"), "label": "memo"}],
                    "destination": {"topic_path": "topics/notes.md"},
                }
            ],
        }
        held = httpx.post(
            f"{running.url}/api/memory/changes", json=body, headers={"Authorization": f"Bearer {alice}"}, timeout=30
        )
        assert held.status_code == 202, held.text
        return str(held.json()["id"])

    def revision() -> str:
        return str(running.client.get("/api/memory/status").json()["revision"])

    try:
        first, second = propose("Memo: tea at four <script>window.__xss=1</script>."), propose("Memo: skip me.")
        (shared,) = sorted(world.ids("core-shared"))
        update = {
            "op": "update_record",
            "memory_id": shared,
            "content": "Core memo: standups are tiny.",
            "time": None,
            "sources": [{"source": source_of("shared-s"), "label": "memo"}],
        }
        held = httpx.post(
            f"{running.url}/api/memory/changes",
            json={"message": "shorter standups", "memory_changes": [update]},
            headers={"Authorization": f"Bearer {alice}"},
            timeout=30,
        )
        stale = str(held.json()["id"])
        running.close()
        running = ThreadServer(world.state)  # held proposals survive a restart
        gone = running.client.post(
            "/api/memory/changes", json={"memory_changes": [{"op": "delete_record", "memory_id": shared}]}
        )
        assert gone.status_code == 200
        for width, height, label in [(1440, 900, "wide"), (390, 844, "narrow")]:
            view = Watched(browser, running, width, height)
            page = view.open("section=proposals&mode=list")
            rows = page.locator(".items .row")
            if label == "wide":
                assert rows.count() == 3 and page.locator(".items .state-held").count() == 3
            page.screenshot(path=str(ARTIFACTS / f"proposals-{label}.png"), full_page=True)
            target = first if label == "wide" else second
            page = view.open(f"section=proposals&item={target}")
            diff = page.locator("pre.diff").inner_text()
            assert ("tea at four" if label == "wide" else "skip me") in diff
            assert page.locator("pre.diff .add").count() >= 1
            view.no_sideways_scroll_or_overlap()
            page.screenshot(path=str(ARTIFACTS / f"proposal-{label}.png"), full_page=True)
            before, log = revision(), git_log(world.state / "memory")
            if label == "wide":
                with page.expect_navigation():
                    page.click("button.approve")
                assert page.locator(".facts .state").inner_text() == "approved"
                assert revision() != before and len(git_log(world.state / "memory")) == len(log) + 1
                assert not page.locator("button.approve").count()
                page = view.open(f"section=proposals&item={stale}")
                before = revision()
                with page.expect_navigation():
                    page.click("button.approve")
                assert "NOT_FOUND" in page.locator(".error").inner_text()
                assert page.locator(".facts .state").inner_text() == "stale" and revision() == before
                page.screenshot(path=str(ARTIFACTS / f"proposal-stale-{label}.png"), full_page=True)
            else:
                page.fill("input[name=why]", "not needed")
                with page.expect_navigation():
                    page.click("button.reject")
                assert page.locator(".facts .state").inner_text() == "rejected"
                assert revision() == before
            view.close()
        states = {p["id"]: p["state"] for p in running.client.get("/api/memory/proposals").json()["proposals"]}
        assert states == {first: "approved", second: "rejected", stale: "stale"}
    finally:
        running.close()


@pytest.mark.parametrize(("width", "height", "label"), [(1440, 900, "wide"), (390, 844, "narrow")])
def test_a_citation_opens_its_source_and_source_text_never_runs(
    browser: Any, server: ThreadServer, width: int, height: int, label: str
) -> None:
    view = Watched(browser, server, width, height)
    page = view.open("section=topics&item=topics/projects/atlas.md")
    link = page.locator("section.footnotes a[href*='section=sources']").first
    with page.expect_navigation():
        link.click()
    assert page.url.endswith("item=sources/test/e5/t1/m1.md")
    facts = page.locator("table.source-facts").inner_text()
    assert "user" in facts and "trusted" in facts and "test/t1" in facts and "m1" in facts
    assert "message 1" in page.locator(".source-text").inner_text()
    assert "topics/projects/atlas.md" in page.locator("ul.cited-by").inner_text()
    view.no_sideways_scroll_or_overlap()
    page.screenshot(path=str(ARTIFACTS / f"source-{label}.png"), full_page=True)
    for n, attack in enumerate(XSS):  # what the evil session said, each archived as a source
        page = view.open(f"section=sources&item=sources/test/b6/evil/x{n}.md")
        shown = page.locator(".source-text").inner_text()
        assert "__xss" in shown or "javascript" in shown or "data:" in shown, (attack, shown)
        assert page.locator(".source-text script, .source-text iframe, .source-text img[onerror]").count() == 0
    page.screenshot(path=str(ARTIFACTS / f"source-xss-{label}.png"), full_page=True)
    missing = view.open("section=sources&item=sources/test/71/none/x.md")
    assert "No archived source" in missing.locator("article.document").inner_text()
    view.close()


def test_timeline_and_sidebar_controls_agree_with_what_is_shown(browser: Any, server: ThreadServer) -> None:
    view = Watched(browser, server, 1440, 900)
    page = view.open("section=timeline")
    years = page.locator("details.year")
    assert years.first.get_attribute("open") is not None, "the newest period is open by default"
    newest_month = page.locator("details.year").first.locator("details.month").first
    assert newest_month.get_attribute("open") is not None
    summary = page.locator("details summary").first
    assert summary.locator("svg.chevron").count() == 1  # the sidebar's 14x14 chevron, no native triangle
    box = summary.locator("svg.chevron").bounding_box()
    assert box is not None and round(box["width"]) == 14 and round(box["height"]) == 14
    assert page.evaluate("getComputedStyle(document.querySelector('details summary')).display") == "flex"
    rotated = "getComputedStyle(document.querySelector('details[open] > summary .chevron')).transform"
    assert page.evaluate(rotated) != "none"  # open: points down
    page.locator("details.year > summary").first.click()
    closed = "getComputedStyle(document.querySelector('details.year:not([open]) > summary .chevron')).transform"
    assert page.evaluate(closed) == "none"  # closed: points right
    # Sidebar: a year whose months are listed below it points down.
    expanded = page.locator(".items .row.expanded .chevron").first
    assert expanded.evaluate("e => getComputedStyle(e).transform") != "none"
    page = view.open("section=topics")
    row = page.locator(".items a.row", has_text="Project Atlas")
    assert row.count() == 1 and row.get_attribute("title") == "topics/projects/atlas.md"
    page.screenshot(path=str(ARTIFACTS / "timeline-default-wide.png"), full_page=True)
    view.close()


def test_forgetting_from_the_source_view_shows_what_will_go_first(browser: Any, tmp_path: Path) -> None:
    state = tmp_path / "state"
    seed(state)
    running = ThreadServer(state)
    try:
        view = Watched(browser, running, 1440, 900)
        page = view.open("section=sources&item=sources/test/e5/t1/m3.md")
        before = running.client.get("/api/memory/status").json()["revision"]
        with page.expect_navigation():
            page.click("text=Forget…")
        confirm = page.locator("section.forget-confirm")
        assert "1 record(s) citing them are deleted" in confirm.inner_text()
        assert running.client.get("/api/memory/status").json()["revision"] == before  # the preview is a dry run
        page.fill("input[name=why]", "no longer true")
        with page.expect_navigation():
            page.click("button.forget")
        assert "Forgotten" in page.locator(".tombstone").inner_text() and "no longer true" in page.inner_text("body")
        assert not page.locator(".source-text").count()
        topic = running.client.get("/api/memory/topics/topics/projects/atlas.md").json()["content"]
        assert "Atlas ships this year" not in topic and "PostgreSQL" in topic
        page.screenshot(path=str(ARTIFACTS / "source-forgotten-wide.png"), full_page=True)
        view.close()
    finally:
        running.close()
