"""Current truth over stale: a record that says it supersedes another ranks just above it (found or not), the
older one is marked, and of two near-duplicate records the newer comes first, link or no link."""

from __future__ import annotations

import pytest

from scriptorium.changes.structured import DeleteRecord, update_records
from scriptorium.recall import current
from scriptorium.recall.index import RecallIndex
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.topics import supersedes_links

OLD = "2026-03-02: Run the test suite with make check before every push [k](test/t1/m1).\n"


def _old_id(ws: MemoryWorkspace) -> str:
    result = ws.apply_changes([TopicChange("topics/dev.md", "create", f"# Dev\n\n{OLD}")], message="old")
    (old,) = result.created_ids
    return old


def _add_newer(ws: MemoryWorkspace, text: str) -> str:
    before = (ws.root / "topics/dev.md").read_text()
    result = ws.apply_changes([TopicChange("topics/dev.md", "update", before + "\n" + text)], message="newer")
    (new,) = result.created_ids
    return new


def test_the_link_forms_a_record_may_use() -> None:
    assert supersedes_links("Use uv now (supersedes [[topics/dev#^m-aaaaaaaaaaaa]]).") == ("m-aaaaaaaaaaaa",)
    assert supersedes_links("[Supersedes the old rule](topics/dev.md#^m-old) see [x](a.md#^m-b)") == ("m-old",)
    assert supersedes_links("[replaces](dev.md#^m-one), [[dev#^m-two]]") == ("m-one",)
    assert supersedes_links("see [[dev#^m-x]]: it supersedes nothing") == ()
    assert supersedes_links(r"\[supersedes](dev.md#^m-escaped)") == ()


def test_a_record_that_supersedes_another_ranks_just_above_it_found_or_not(seeded: MemoryWorkspace) -> None:
    old = _old_id(seeded)
    new = _add_newer(
        seeded,
        f"2026-05-10: The suite runs with uv run pytest now [k](test/t1/m3) ([supersedes](topics/dev.md#^{old})).\n",
    )
    index = RecallIndex(seeded.root)
    # "make check" is only in the old record: BM25 alone finds the stale statement and nothing else.
    hits = index.search("make check before push", 5)
    assert [h.memory_id for h in hits[:2]] == [new, old]
    assert hits[1].superseded_by == new and hits[0].superseded_by == ""
    assert "superseded by ^" + new in hits[1].label
    assert hits[1].to_dict()["superseded_by"] == new
    # Asked so that both match, the old one with more of the words: the new one still comes first.
    hits = index.search("run the test suite make check push pytest", 5)
    assert [h.memory_id for h in hits[:2]] == [new, old]


def test_the_link_followed_as_the_topics_change(seeded: MemoryWorkspace) -> None:
    """The successors are kept by each refresh: a successor removed leaves the old record unmarked."""
    old = _old_id(seeded)
    index = RecallIndex(seeded.root)
    assert [h.superseded_by for h in index.search("make check", 5)] == [""]
    new = _add_newer(
        seeded, f"2026-05-10: Tests: uv run pytest [k](test/t1/m3) ([supersedes](topics/dev.md#^{old})).\n"
    )
    assert [(h.memory_id, h.superseded_by) for h in index.search("make check", 5)] == [(new, ""), (old, new)]
    update_records(seeded, [DeleteRecord(new)], message="drop the newer")
    assert [(h.memory_id, h.superseded_by) for h in index.search("make check", 5)] == [(old, "")]


def test_of_two_near_duplicates_the_newer_comes_first_without_a_link(seeded: MemoryWorkspace) -> None:
    text = (
        "# Deploy\n\n"
        "2026-03-02: Deploy the api service with fly deploy remote only from the main branch [k](test/t1/m1).\n\n"
        "2026-06-20: Deploy the api service with fly deploy local only from the main branch [k](test/t1/m3).\n\n"
        "2026-06-21: The staging database is reset every night [k](test/t1/m5).\n"
    )
    seeded.apply_changes([TopicChange("topics/deploy.md", "create", text)], message="deploy")
    index = RecallIndex(seeded.root)
    hits = index.search("deploy api remote", 5)  # "remote" is only in the older wording
    dates = [h.date for h in hits if "fly deploy" in h.snippet]
    assert dates == ["2026-06-20", "2026-03-02"]
    assert all(h.superseded_by == "" for h in hits), "without a link nothing is marked"


PAIRING = (
    "# Pairing\n\n"
    "2026-04-27: User: make the session cd command actually run cd in the shell, so nobody has to type cd "
    "after it [k](test/t1/m1)\n\n"
    "2026-04-27: Assistant: Done: the session cd command now changes the folder. [k](test/t1/m2)\n\n"
    "2026-04-27: User: rename the session cd command to session dir, it only prints the path [k](test/t1/m3)\n\n"
    "{later}"
)
NOISE = "# Other\n\n" + "".join(
    f"2026-04-2{n}: User: the {w} job runs nightly [k](test/t1/m{n})\n\n"
    for n, w in ((4, "billing"), (5, "backup"), (6, "deploy"), (7, "report"), (8, "cleanup"), (9, "index"))
)
"""Records beside the pairing, so that its words are rare as in a real memory."""


def _said(index: RecallIndex, question: str) -> list[str]:
    return [hit.snippet.split(": ", 1)[1][:18] for hit in index.search(question, 3)]


def test_what_the_user_said_again_later_comes_first(seeded: MemoryWorkspace) -> None:
    """The user changes their mind in other words, too few shared for a near-duplicate: their later turn
    leads, the earlier one follows; BM25 alone (or an agent's turn, or a later turn that matches far worse)
    keeps the order of the scores."""
    seeded.apply_changes(
        [
            TopicChange("topics/pairing.md", "create", PAIRING.format(later="")),
            TopicChange("topics/other.md", "create", NOISE),
        ],
        message="pairing",
    )
    index = RecallIndex(seeded.root)
    index.ranking.neighbour_weight = 0.0  # the rule under test alone
    question = "what does the session cd command do in the shell?"
    assert _said(index, question)[:2] == ["rename the session", "make the session c"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(current, "RESTATED_TERMS", 99)
        assert _said(index, question)[:2] == ["make the session c", "rename the session"], "BM25's order"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(current, "RESTATED_SHARE", 5.0)
        assert _said(index, question)[0] == "make the session c", "a later turn that matches far worse stays"


def test_an_agents_turn_or_a_named_persons_is_not_taken_for_the_user_saying_it_again(
    seeded: MemoryWorkspace,
) -> None:
    named = PAIRING.replace("User: ", "User: Caroline: ").format(later="")
    seeded.apply_changes(
        [TopicChange("topics/pairing.md", "create", named), TopicChange("topics/other.md", "create", NOISE)],
        message="named",
    )
    index = RecallIndex(seeded.root)
    index.ranking.neighbour_weight = 0.0
    with_rule = [h.memory_id for h in index.search("what does the session cd command do in the shell?", 3)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(current, "RESTATED_TERMS", 99)
        assert [h.memory_id for h in index.search("what does the session cd command do in the shell?", 3)] == with_rule
