"""The Memory page in Chromium at 1280 and 390 px (issue 59): every section checked by axe-core, the
accessibility engine, with no serious or critical violation; no sideways scroll at 390 px, sane headings,
no title shown twice, one button style and one link style. Screenshots go to ``test-artifacts/memory-page/``.

axe-core is the npm package pinned in ``tests/web/axe/package-lock.json`` (installed as the runtime CLIs
are, :mod:`tests.requirements`); its script is evaluated in the page from there, never fetched."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.page_world import DAY, FIRST, page_world
from tests.helpers.served import ThreadServer
from tests.requirements import AXE_SCRIPT, require
from tests.web.test_page_browser import ARTIFACTS, Watched, browser

__all__ = ["browser"]  # the fixture, shared with the other browser tests
require("axe-core", module_level=True)

BAD = ("serious", "critical")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadServer]:
    state = tmp_path_factory.mktemp("a11y") / "state"
    page_world(state)
    running = ThreadServer(state)
    yield running
    running.close()


def _topic(server: ThreadServer) -> str:
    return str(next(p for p in server.client.get("/api/memory/topics").json()["topics"] if FIRST in p))


def pages(server: ThreadServer) -> list[tuple[str, str]]:
    topic = _topic(server)
    return [
        ("search", "section=search&q=release+notebook"),
        ("search-empty", "section=search&q="),
        ("timeline", f"section=timeline&item={DAY}"),
        ("topics", "section=topics&mode=list"),
        ("topic", f"section=topics&item={topic}"),
        ("edit", f"section=topics&item={topic}&view=edit"),
        ("recent", "section=recent"),
        ("core", "section=core"),
        ("proposals", "section=proposals"),
        ("settings", "section=settings"),
    ]


def axe_violations(page: Any) -> list[tuple[str, str, list[Any]]]:
    """axe-core's serious and critical violations on ``page``: (rule, impact, the elements)."""
    page.evaluate(AXE_SCRIPT.read_text())  # run through the DevTools protocol: the page's CSP stays in force
    found = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]]) for v in found["violations"] if v["impact"] in BAD
    ]


@pytest.mark.parametrize(("width", "height", "label"), [(1280, 800, "wide"), (390, 844, "narrow")])
def test_every_section_passes_axe_and_holds_its_layout(
    browser: Any, server: ThreadServer, width: int, height: int, label: str
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    view = Watched(browser, server, width, height)
    for name, query in pages(server):
        page = view.open(query)
        page.screenshot(path=str(ARTIFACTS / f"reader-{name}-{label}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), name  # no sideways scroll
        assert axe_violations(page) == [], name
        sizes = page.evaluate(
            "[...document.querySelectorAll('h1, h2, h3')].map(h => parseFloat(getComputedStyle(h).fontSize))"
        )
        assert max(sizes, default=0) <= (22 if label == "narrow" else 24), (name, sizes)  # no huge heading
        headings = page.evaluate(
            "[...document.querySelectorAll('h1, h2')].filter(h => h.offsetParent).map(h => h.innerText.trim())"
        )
        assert len(headings) == len(set(headings)), (name, headings)  # no title shown twice
        buttons = page.evaluate(
            "[...document.querySelectorAll('button, a.button')].filter(b => b.offsetParent)"
            ".map(b => { const s = getComputedStyle(b); return [s.borderRadius, s.borderTopStyle, s.fontSize].join() })"
        )
        assert len(set(buttons)) <= 1, (name, set(buttons))  # one button style, no browser default
        links = page.evaluate(
            "[...document.querySelectorAll('a:not(.button):not(.row)')].filter(a => a.offsetParent)"
            ".map(a => { const s = getComputedStyle(a); return [s.color, s.textDecorationLine].join() })"
        )
        assert len(set(links)) <= 1, (name, set(links))  # one link style
    view.close()


def test_the_search_box_is_on_the_page_at_390_px(browser: Any, server: ThreadServer) -> None:
    view = Watched(browser, server, 390, 844)
    page = view.open("section=timeline")
    box = page.locator("form[role=search] input[name=q]")
    assert box.is_visible()
    box.fill("blue notebook")
    with page.expect_navigation():
        box.press("Enter")
    assert "Tea" in page.locator("ol.hits").inner_text()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(ARTIFACTS / "reader-search-typed-narrow.png"), full_page=True)
    view.close()
