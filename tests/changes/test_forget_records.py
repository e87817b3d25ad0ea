"""What a forget does to the records around the forgotten ones, in process (:mod:`scriptorium.changes.forget`):
a record that cites other sources too (deleted whole), a linking record's links and citations, a forget that
clashes with the owner's own changes, and the headings a forgotten title named. The CLI tests
(``test_forget.py``) show the whole path; these pin each rewrite."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scriptorium.changes.forget import Selection, forget
from scriptorium.changes.structured import Citation, UpdateRecord
from scriptorium.errors import InvalidArgument
from scriptorium.sessions import TITLE_FROM_KEY, open_store
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import State

ID = re.compile(r"\^(m-[0-9a-z]{12})$", re.M)


def _ids(ws: MemoryWorkspace, path: str) -> list[str]:
    return ID.findall((ws.root / path).read_text())


@pytest.fixture
def linked(seeded: MemoryWorkspace) -> tuple[MemoryWorkspace, str, str, str]:
    """topics/x.md holds a record citing only m1 (the one to forget) and one citing m3; topics/links.md a
    record citing m3, linking to each of them in both link forms."""
    x = "# X\n\nThe vault code [k](test/t1/m1).\n\nStandup on Mondays [k](test/t1/m3).\n"
    seeded.apply_changes([TopicChange("topics/x.md", "create", x)], message="x")
    secret, kept = _ids(seeded, "topics/x.md")
    links = (
        f"# Links\n\nSee [[topics/x.md#^{secret}|the vault note]], [[topics/x.md#^{kept}|the standup]], "
        f"[the vault](topics/x.md#^{secret}) and [the standup](topics/x.md#^{kept}) [standup](test/t1/m3).\n"
    )
    seeded.apply_changes([TopicChange("topics/links.md", "create", links)], message="links")
    (linker,) = _ids(seeded, "topics/links.md")
    return seeded, secret, kept, linker


def test_a_linking_record_loses_only_the_links_to_what_goes(
    linked: tuple[MemoryWorkspace, str, str, str],
) -> None:
    ws, secret, kept, linker = linked
    done = forget(ws, Selection(sources=("test/t1/m1",)))
    assert done["deleted"] == [secret] and done["unlinked"] == [linker] and done["deleted_shared"] == []
    text = (ws.root / "topics/links.md").read_text()
    body = text.split(f" ^{linker}")[0].removeprefix("# Links\n\n")
    assert re.sub(r" ?\[\^e-[0-9a-z]+\]", "", body) == (
        f"See the vault note, [[topics/x.md#^{kept}|the standup]], the vault and [the standup](topics/x.md#^{kept})."
    ), "a link to the deleted record keeps its label as text; a link to a kept one stays a link"
    footnotes = [line for line in text.splitlines() if line.startswith("[^")]
    assert len(footnotes) == 1 and footnotes[0].endswith("[standup](../sources/test/e5/t1.md#source-m3)"), (
        "the kept citation keeps its label"
    )


def test_a_forget_that_would_change_a_record_the_owner_changes_too_is_refused(
    linked: tuple[MemoryWorkspace, str, str, str],
) -> None:
    """The owner may rewrite a linking record in the same forget, not one the forget deletes (here one that
    cites the forgotten source and another)."""
    ws, _secret, _kept, _linker = linked
    merged = "# Merged\n\nThe vault and the standup [vault](test/t1/m1) [standup](test/t1/m3).\n"
    ws.apply_changes([TopicChange("topics/merged.md", "create", merged)], message="merged")
    (doomed,) = _ids(ws, "topics/merged.md")
    state = State(ws)
    also = [UpdateRecord(doomed, "Rewritten.", "2026-11-02", (Citation("test/t1/m3", "standup"),))]
    with pytest.raises(InvalidArgument, match=rf"the forget changes these records itself: \^{doomed}$"):
        forget(ws, Selection(sources=("test/t1/m1",)), also=also)
    state.assert_unchanged(ws)


TITLED = (
    "# Plan\n\nFirst [k](test/t1/m0).\n\nSecond [k](test/t1/m2).\n\n## Details\n\nThird [k](test/t1/m4).\n\n"
    "# Plan (part 2)\n\nFourth [k](test/t1/m5).\n\n# Zebra (kept)\n\nFifth [k](test/t1/m6).\n\n"
    "Sixth [k](test/t1/m7).\n\n# Apples (kept)\n\nSeventh [k](test/t1/m8).\n"
)


def test_the_headings_a_forgotten_title_named_take_the_sessions_id(seeded: MemoryWorkspace, tmp_path: Path) -> None:
    """Session t1 was titled by message m0; forgetting m0 renames its heading, the heading's sub-headings and
    its continued parts, and no other heading (not one that sorts after it or before it, nor one that ends as a
    part does)."""
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    try:
        store.create_session("t1", {"title": "Plan", TITLE_FROM_KEY: "m0"})
        seeded.apply_changes([TopicChange("topics/t1.md", "create", TITLED)], message="titled")
        forget(seeded, Selection(sources=("test/t1/m7",)), store=store)
        assert (seeded.root / "topics/t1.md").read_text().startswith("# Plan\n"), (
            "another message's forget keeps the title"
        )
        forget(seeded, Selection(sources=("test/t1/m0",)), store=store)
    finally:
        store.close()
    text = re.sub(r" ?\[\^e-[0-9a-z]+\]| \^m-[0-9a-z]+", "", (seeded.root / "topics/t1.md").read_text())
    under: dict[str, str] = {}
    chain: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            chain = [*chain[: level - 1], line.lstrip("# ")]
        elif line and not line.startswith(":"):
            under[line] = " > ".join(chain)
    assert under == {
        "Second.": "Session t1",
        "Third.": "Session t1 > Details",
        "Fourth.": "Session t1 (part 2)",
        "Fifth.": "Zebra (kept)",
        "Seventh.": "Apples (kept)",
    }, text


def test_a_selection_names_exactly_one_thing_and_sources_by_their_three_parts(seeded: MemoryWorkspace) -> None:
    state = State(seeded)
    for selection in (Selection(), Selection(thread="test/t1", session="t1")):
        with pytest.raises(InvalidArgument, match="name what to forget"):
            forget(seeded, selection)
    for identity in ("test/t1", "test/t1/m1/x", "test//m1", "/t1/m1"):
        with pytest.raises(InvalidArgument, match="provider/thread/message"):
            forget(seeded, Selection(sources=(identity,)))
    state.assert_unchanged(seeded)


def test_the_reason_is_bounded_and_goes_into_the_commit_message(seeded: MemoryWorkspace) -> None:
    state = State(seeded)
    with pytest.raises(InvalidArgument, match="at most 500 characters"):
        forget(seeded, Selection(sources=("test/t1/m1",)), why="x" * 501)
    state.assert_unchanged(seeded)
    done = forget(seeded, Selection(sources=("test/t1/m1",)), why="y" * 500)
    assert done["sources"] == ["test/t1/m1"] and done["paths"] == ["sources/test/e5/t1/m1.md"]
    assert done["already_forgotten"] == []
    assert seeded.git.repo.head.commit.message.strip() == "Forget 1 source(s): " + "y" * 500
    forget(seeded, Selection(sources=("test/t1/m2",)))
    assert seeded.git.repo.head.commit.message.strip() == "Forget 1 source(s)", "no reason, no colon"
    again = forget(seeded, Selection(sources=("test/t1/m1", "test/t1/m3")))
    assert again["already_forgotten"] == ["test/t1/m1"], "a source forgotten before is listed, and kept as it is"


def test_a_record_citing_other_sources_too_is_deleted_whole_and_named_with_them(
    linked: tuple[MemoryWorkspace, str, str, str],
) -> None:
    """A record citing a forgotten source and others goes whole (its prose may carry what is forgotten, and
    citing the others alone it would be shown to whoever may see them). The dry run quotes it as written
    (its spacing too) with the sources it cited besides, so the owner can write it again from them; the
    forget names it with those sources and quotes nothing."""
    ws, secret, kept, linker = linked
    cites = "[vault](test/t1/m1) [standup](test/t1/m3) [k](test/t1/m4)"
    text = f"Also  see [[topics/x.md#^{kept}|the standup]]\tnow {cites}."
    ws.apply_changes([TopicChange("topics/also.md", "create", f"# Also\n\n{text}\n")], message="also")
    (also,) = _ids(ws, "topics/also.md")
    shared = {"memory_id": also, "topic_path": "topics/also.md", "other_sources": ["test/t1/m3", "test/t1/m4"]}
    state = State(ws)
    dry = forget(ws, Selection(sources=("test/t1/m1",)), dry_run=True)
    state.assert_unchanged(ws)
    assert dry["deleted_shared"] == [{**shared, "content": f"Also  see [[topics/x.md#^{kept}|the standup]]\tnow."}]
    done = forget(ws, Selection(sources=("test/t1/m1",)))
    assert sorted(done["deleted"]) == sorted([secret, also]) and done["deleted_shared"] == [shared]
    assert done["unlinked"] == [linker] and "kept" not in done
    assert not (ws.root / "topics/also.md").exists(), "its topic, left with nothing, goes too"
    assert {r.memory_id for t in ws.snapshot().topics.values() for r in t.records} == {kept, linker}


def test_a_forget_leaves_the_recall_index_to_the_next_search_and_that_search_has_no_forgotten_record(
    seeded: MemoryWorkspace,
) -> None:
    """Without vectors to sort, the forget builds no index of the whole memory in its own process (it cost a
    year's purge seconds and hundreds of MB); it drops every copy, and the next search builds from the
    installed topics."""
    from scriptorium.recall.cache import CACHE_DIR
    from scriptorium.recall.index import RecallIndex

    x = "# X\n\nThe vault code is kept offsite [k](test/t1/m1).\n\nThe offsite standup is on Mondays [k](test/t1/m3).\n"
    seeded.apply_changes([TopicChange("topics/x.md", "create", x)], message="x")
    index = RecallIndex.open(seeded.root)
    assert {hit.memory_id for hit in index.search("offsite")} == set(_ids(seeded, "topics/x.md"))
    secret, kept = _ids(seeded, "topics/x.md")
    cache = seeded.root / ".scriptorium" / "cache" / CACHE_DIR
    assert cache.exists()

    done = forget(seeded, Selection(sources=("test/t1/m1",)))
    assert done["deleted"] == [secret]
    assert done["derived"]["recall"] == {"vectors_dropped": 0, "index_rebuilt": 0}
    assert not RecallIndex.loaded(seeded.root) and not cache.exists(), "no copy of the old index is left"
    assert [hit.memory_id for hit in index.search("offsite")] == [kept]
    assert [hit.memory_id for hit in RecallIndex(seeded.root).search("vault offsite")] == [kept]
