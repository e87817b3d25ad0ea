"""The Timeline by period: a page holds the period asked for (by default the newest month), never the records
of other periods, and **Load earlier** brings the rest of the period or the period before it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from scriptorium.settings import Settings
from scriptorium.web import sections
from scriptorium.web.app import create_app
from scriptorium.web.indexes import Citations, DateCounts
from scriptorium.web.page import COOKIE
from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange

_LINK = re.compile(r'<a class="load-earlier" href="([^"]+)">')


def _workspace(state: Path, months: Iterable[tuple[str, int]]) -> None:
    """One topic per month, ``n`` records on each of its first days (``Record <month> #<k>``), cited."""
    ws = MemoryWorkspace.init(state / "memory")
    with ws.lock():
        paths = ws.archive_sources([SourceMessage("test", "t1", "m1", "user", "2026-01-01T00:00:00Z", "tea")])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    changes = []
    for month, n in months:
        lines = [f"# Notes of {month}", ""]
        lines += [f"{month}-{1 + k % 28:02d}: Record {month} #{k} was said [tea](test/t1/m1).\n" for k in range(n)]
        changes.append(TopicChange(f"topics/log/{month}.md", "create", "\n".join(lines)))
    ws.apply_changes(changes, message="seed")
    ws.close()


def _client(state: Path) -> TestClient:
    client = TestClient(create_app(Settings(state=state)))  # no lifespan: no watcher beside it
    token = (state / "owner-token").read_text().strip()
    signed = client.post("/memory/login", data={"token": token}, follow_redirects=False)
    assert signed.status_code == 303
    client.cookies.set(COOKIE, signed.cookies[COOKIE])
    return client


def _page(client: TestClient, query: str) -> str:
    got = client.get(f"/memory?{query}")
    assert got.status_code == 200, got.text
    return re.sub(r'name="csrf" value="[^"]+"', 'name="csrf" value=""', got.text)  # the session's own


def _records(page: str) -> set[str]:
    return set(re.findall(r"Record (\d{4}-\d{2}) #(\d+)", page))  # type: ignore[arg-type]


OTHERS = [f"2025-{m:02d}" for m in range(1, 12)]


def test_a_months_page_does_not_grow_with_records_outside_it(tmp_path: Path) -> None:
    """The page of 2025-12 is the same whether the eleven months before it hold 12 records each or 48, and
    those months add a few bytes each (their links), never their records."""
    alone, few, many = tmp_path / "alone", tmp_path / "few", tmp_path / "many"
    _workspace(alone, [("2025-12", 20)])
    _workspace(few, [("2025-12", 20), *((m, 12) for m in OTHERS)])
    _workspace(many, [("2025-12", 20), *((m, 48) for m in OTHERS)])
    pages = {state: _page(_client(state), "section=timeline&item=2025-12") for state in (alone, few, many)}
    assert len(pages[few]) == len(pages[many])  # 48 records a month instead of 12: not one byte more
    for page in pages.values():
        assert _records(page) == {("2025-12", str(k)) for k in range(20)}
    one_record = len("Record 2025-01 #0 was said") + 40  # its text, a footnote, a paragraph: at least this
    per_month = (len(pages[few]) - len(pages[alone])) / len(OTHERS)
    assert per_month < 12 * one_record, per_month  # less than the month's own records would take
    # The default period is the newest month, with the same records.
    assert _records(_page(_client(many), "section=timeline")) == _records(pages[many])


def test_load_earlier_brings_the_period_before(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _workspace(state, [("2025-11", 3), ("2026-01", 4), ("2026-02", 5)])
    client = _client(state)
    newest = _page(client, "section=timeline")
    assert {month for month, _ in _records(newest)} == {"2026-02"}
    link = _LINK.search(newest)
    assert link is not None and link.group(1).replace("&amp;", "&") == "/memory?section=timeline&item=2026-01"
    earlier = _page(client, link.group(1).replace("&amp;", "&").removeprefix("/memory?"))
    assert _records(earlier) == {("2026-01", str(k)) for k in range(4)}
    link = _LINK.search(earlier)  # across the year: the month before, 2025-11 (no records in 2025-12)
    assert link is not None and link.group(1).endswith("item=2025-11")
    last = _page(client, link.group(1).replace("&amp;", "&").removeprefix("/memory?"))
    assert _records(last) == {("2025-11", str(k)) for k in range(3)} and _LINK.search(last) is None


def test_a_period_larger_than_a_page_comes_in_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sections, "TIMELINE_PAGE_RECORDS", 10)
    state = tmp_path / "state"
    _workspace(state, [("2026-01", 3), ("2026-02", 56)])  # two records on each of February's 28 days
    client = _client(state)
    seen: set[tuple[str, str]] = set()
    query = "section=timeline&item=2026-02"
    for _ in range(20):
        page = _page(client, query)
        found = _records(page)
        assert found and len(found) <= 10 and not found & seen
        seen |= found
        link = _LINK.search(page)
        assert link is not None
        query = link.group(1).replace("&amp;", "&").removeprefix("/memory?")
        if "from=" not in query:
            break
    assert seen == {("2026-02", str(k)) for k in range(56)}  # every record once, newest days first
    assert query == "section=timeline&item=2026-01"  # then the month before

    monkeypatch.setattr(sections, "TIMELINE_PAGE_RECORDS", 1)  # one day is larger than the page: in parts
    first = _page(client, "section=timeline&item=2026-02-28")
    link = _LINK.search(first)
    assert link is not None and "from=2026-02-28%401" in link.group(1)
    second = _page(client, link.group(1).replace("&amp;", "&").removeprefix("/memory?"))
    assert len(_records(first)) == len(_records(second)) == 1 and _records(first) != _records(second)
    assert "2 of 2" in second


def test_the_indexes_read_only_the_topics_that_changed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    _workspace(state, [(f"2025-{m:02d}", 2) for m in range(1, 13)])
    ws = MemoryWorkspace(state / "memory")
    dates, citations = DateCounts(), Citations()
    for index in (dates, citations):
        index.refresh(ws.snapshot())
        assert index.reads == 12
    path = "topics/log/2025-03.md"
    moved = ws.read_topic(path).replace("2025-03-02: Record 2025-03 #1", "2025-04-30: Record 2025-03 #1")
    ws.apply_changes([TopicChange(path, "update", moved), TopicChange("topics/log/2025-05.md", "delete")], message="e")
    snap = ws.snapshot()
    for index in (dates, citations):
        index.refresh(snap)
        index.refresh(snap)  # the same snapshot again: nothing read
        assert index.reads == 13  # one topic changed (one went): one read, not eleven
    fresh = DateCounts()
    fresh.refresh(snap)
    assert dates.counts == fresh.counts and dates.counts["2025-04-30"] == 1 and "2025-03-02" not in dates.counts
    assert not any(date.startswith("2025-05") for date in dates.counts)
    assert citations.citing("sources/test/e5/t1/m1.md") == sorted(
        p for p in snap.topic_shas if p.startswith("topics/log/")
    )
    ws.close()
