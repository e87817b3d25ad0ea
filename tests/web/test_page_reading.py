"""The Memory page as a person reads it (issue 59): a search box that is ``memory search`` with the viewer's
audience, a Timeline day in the order it was said with each topic named once per run of its records, and
topics of one title told apart."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator

import pytest

from scriptorium.web.sections import distinct_titles, session_mark
from tests.helpers.cli import run
from tests.helpers.page_world import DAY, FIRST, IN_TIME_ORDER, PRIVATE, SECOND, TITLE, page_world
from tests.helpers.served import AppServer


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    state = tmp_path_factory.mktemp("reading") / "state"
    page_world(state)
    server = AppServer(state)
    try:
        yield server
    finally:
        server.close()


def _page(served: AppServer, query: str) -> str:
    with served.anonymous() as client:
        signed = client.post("/memory/login", data={"token": served.token})
        assert signed.status_code == 303
        client.cookies.update(signed.cookies)
        got = client.get(f"/memory?{query}")
    assert got.status_code == 200, got.text
    return got.text


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _hits(page: str) -> list[tuple[str, str]]:
    """(place, link) of each search hit."""
    return [
        (_text(label), html.unescape(href))
        for href, label in re.findall(r'<a class="hit-place" href="([^"]+)">(.*?)</a>', page)
    ]


def _alices_record(served: AppServer) -> str:
    (topic,) = [p for p in served.client.get("/api/memory/topics").json()["topics"] if PRIVATE in p]
    content = served.client.get(f"/api/memory/topics/{topic}").json()["content"]
    return str(re.findall(r"\^(m-[0-9a-z]+)", content)[0])


def test_the_search_box_finds_the_record_and_links_to_it(served: AppServer) -> None:
    page = _page(served, "section=search&q=blue+notebook")
    hits = _hits(page)
    assert hits, page
    place, link = hits[0]
    assert place == "Tea"  # the topic by its title
    assert link.endswith(f"#block-{_alices_record(served)}") and PRIVATE in link  # to the record's own anchor
    assert "tea recipes in the blue notebook" in _text(page.split('class="hits"')[1])  # its snippet
    assert f">{DAY}<" in page and "audience: alice" in page  # its date, and who may see it
    assert 'role="search"' in page and 'name="q"' in page  # the box is on every page


def test_the_search_is_memory_search_with_the_viewers_audience(served: AppServer) -> None:
    """A requester-only record is not shown to a viewer who may not see it: the page asked as bob (or as
    someone in no requester's audience) finds what ``memory search --as bob`` finds, never alice's."""
    alices = _alices_record(served)
    for viewer in ("bob", "alice", ""):
        page = _page(served, f"section=search&q=notebook+release&as={viewer}")
        shown = {re.search(r"#block-(m-[0-9a-z]+)", link).group(1) for _, link in _hits(page)}  # type: ignore[union-attr]
        command = ["memory", "search", "notebook release", "-n", "20", "--json", "--state", str(served.state)]
        cli = run(*command, *(["--as", viewer] if viewer else []))
        assert cli.returncode == 0, cli.stderr
        assert shown == {hit["memory_id"] for hit in json.loads(cli.stdout)["results"]}, viewer
        assert (alices in shown) == (viewer in ("alice", "")), viewer  # "" is the page's own viewer: the owner
    assert "seen as bob" in _page(served, "section=search&q=notebook&as=bob")
    assert "No record bob may see matches" in _page(served, "section=search&q=notebook+tea+recipes&as=bob")


def test_an_empty_or_overlong_query_is_said_inline(served: AppServer) -> None:
    empty = _page(served, "section=search&q=++")
    assert "Type the words to look for" in empty and 'class="hits"' not in empty
    long = _page(served, "section=search&q=" + "tea+" * 600)
    assert "at most 2,000" in long and 'class="hits"' not in long


def test_a_timeline_day_is_in_the_order_it_was_said_each_topic_named_once_per_run(served: AppServer) -> None:
    page = _page(served, f"section=timeline&item={DAY}")
    day = page.split('<details class="day"', 1)[1].split("</details>", 1)[0]
    parts = re.findall(r"<h3>(.*?)</h3>|<p><a [^>]*>([0-9:]+)</a>", day)
    times = [time for heading, time in parts if time]
    assert times == IN_TIME_ORDER  # time first, in time order (not by the sessions' IDs)
    runs = [_text(heading) for heading, _ in parts if heading]
    first, second = (f"{TITLE} · {session_mark(f'x/{DAY}-session-{s}.md')}" for s in (FIRST, SECOND))
    assert runs == [first, second, first, "Tea"]  # each topic once per run of its records, told apart
    assert day.count(TITLE) == 3 and "›" not in day  # no place repeated over every record
    assert "Release train: we cut the branch" in day


def test_topics_of_one_title_are_told_apart_by_day_and_session(served: AppServer) -> None:
    page = _page(served, "section=topics")
    rows = [_text(name) for name in re.findall(r'<span class="name">(.*?)</span>', page)]
    released = sorted(row for row in rows if row.startswith(TITLE))
    assert released == [f"{TITLE} · {DAY} · session …e93b0a11", f"{TITLE} · {DAY} · session …f04c1b22"], rows
    assert "Tea" in rows  # a title no other topic has stays as it is


def test_distinct_titles_marks_only_the_titles_that_repeat() -> None:
    titles = {
        "topics/conversations/2026-11/2026-11-20-session-0199a1b2-c3d4-7e5f-8a1c-44f2e93b0a11.md": "Plan",
        "topics/conversations/2026-11/2026-11-21-session-0199a1b2-c3d4-7e5f-9b2d-55a3f04c1b22.md": "Plan",
        "topics/conversations/2026-11/2026-11-21-deploy-notes.md": "Deploy",
        "topics/a/same.md": "Same",
        "topics/b/same.md": "Same",
    }
    labels = distinct_titles(titles)
    assert labels["topics/conversations/2026-11/2026-11-21-deploy-notes.md"] == "Deploy"
    first = "topics/conversations/2026-11/2026-11-20-session-0199a1b2-c3d4-7e5f-8a1c-44f2e93b0a11.md"
    assert labels[first] == "Plan · 2026-11-20 · session …e93b0a11"
    assert labels["topics/a/same.md"] == "Same · a/same.md" and labels["topics/b/same.md"] == "Same · b/same.md"
    assert len(set(labels.values())) == len(labels)
