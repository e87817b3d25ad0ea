"""Which project a hit comes from, and the margin another project's must clear (recall/places.py)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

from scriptorium.recall.places import FOREIGN_MARGIN, Place, normalized_remote, place_of, project_of, scoped
from scriptorium.recall.records import Hit
from scriptorium.workspace.paths import source_path

FOLDERS = {"here": "/code/harbour", "there": "/code/lighthouse", "chat": None}
"""Where each session ran (no git work trees here: each folder is its own project)."""
seen: list[set[str]] = []


def at(folder: str) -> Place:
    return place_of(folder)


def hit(memory_id: str, score: float, *sessions: str) -> Hit:
    sources = tuple(source_path("claude-code", s, "m1") for s in sessions)
    return Hit(memory_id, "topics/t.md", (), None, memory_id, score, "trusted", sources=sources)


def folders(asked: Collection[str]) -> dict[str, Place | None]:
    seen.append(set(asked))
    return {s: at(folder) if (folder := FOLDERS.get(s)) else None for s in asked}


def test_another_projects_hit_needs_the_margin_over_the_best_local_or_placeless_one() -> None:
    project = at("/code/harbour")
    hits = [hit("a", 10.0, "there"), hit("b", 6.0, "here"), hit("c", 5.0, "chat"), hit("d", 3.0, "there")]
    kept = scoped(hits, project, folders)
    assert [(h.memory_id, h.project) for h in kept] == [("a", "lighthouse"), ("b", ""), ("c", "")]
    assert 10.0 >= FOREIGN_MARGIN * 6.0 > 3.0
    weaker = scoped([hit("a", 8.0, "there"), hit("b", 6.0, "here")], project, folders)
    assert [h.memory_id for h in weaker] == ["b"], "8 is not clearly better than 6"
    assert seen[-1] == {"there", "here"}, "the folders of the hits' sessions only are read"


def test_a_hit_with_a_local_or_placeless_session_is_never_foreign() -> None:
    project = at("/code/harbour")
    kept = scoped(
        [hit("mixed", 1.0, "there", "here"), hit("half", 1.0, "there", "chat"), hit("x", 9.0, "here")], project, folders
    )
    assert [(h.memory_id, h.project) for h in kept] == [("mixed", ""), ("half", ""), ("x", "")]


def test_with_nothing_local_every_other_projects_hit_comes_marked() -> None:
    kept = scoped([hit("a", 2.0, "there"), hit("b", 1.0, "here")], at("/code/elsewhere"), folders)
    assert [(h.memory_id, h.project) for h in kept] == [("a", "lighthouse"), ("b", "harbour")]
    assert "from project lighthouse" in kept[0].label


def test_a_project_is_its_git_work_tree_else_its_folder(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src").mkdir()
    assert project_of(tmp_path / "repo" / "src") == tmp_path / "repo"
    assert project_of(tmp_path / "loose") == tmp_path / "loose"


@pytest.mark.parametrize(
    ("url", "identity"),
    [
        ("git@github.com:acme/harbour.git", "github.com/acme/harbour"),
        ("https://github.com/acme/harbour", "github.com/acme/harbour"),
        ("https://user@GitHub.com:443/acme/harbour.git/", "github.com/acme/harbour"),
        ("ssh://git@github.com/acme/harbour.git", "github.com/acme/harbour"),
        ("/srv/git/harbour.git", "file:/srv/git/harbour"),
        ("file:///srv/git/harbour", "file:/srv/git/harbour"),
        ("harbour", None),
        ("", None),
    ],
)
def test_a_remote_is_one_identity_however_it_is_written(url: str, identity: str | None) -> None:
    assert normalized_remote(url) == identity


def test_a_session_in_a_subfolder_of_a_work_tree_is_the_work_trees(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    asking = place_of(str(tmp_path / "repo"))
    assert asking.holds(place_of(str(tmp_path / "repo" / "src")))
    assert not asking.holds(place_of(str(tmp_path / "repo-2")))


def test_which_branch_a_record_is_marked_with() -> None:
    from scriptorium.recall import places

    asking = replace_branch(at("/code/harbour"), "main")
    known: dict[str, bool] = {"feature/merged": True, "feature/open": False}
    assert places.unmerged_branch({"feature/open"}, asking, dict(known)) == "feature/open"
    assert places.unmerged_branch({"feature/merged"}, asking, dict(known)) == ""
    assert places.unmerged_branch({"main"}, replace_branch(asking, "feature/open"), {}) == "", "mainline"
    assert places.unmerged_branch({"feature/open", None}, asking, dict(known)) == "", "a turn of no branch"
    assert places.unmerged_branch({"feature/open"}, replace_branch(asking, None), dict(known)) == "", "detached"
    assert places.unmerged_branch({"feature/open"}, replace_branch(asking, "feature/open"), {}) == "", "its own"


def replace_branch(place: Place, branch: str | None) -> Place:
    from dataclasses import replace

    return replace(place, branch=branch)


def test_recall_all_from_one_other_project_says_so_once() -> None:
    from scriptorium.recall.context import pack_hits

    foreign = [replace_project(hit(f"r{n}", 1.0, "there"), "lighthouse") for n in range(3)]
    text = pack_hits(foreign, lambda snippet: snippet)
    assert text.count("lighthouse") == 1 and "From project lighthouse:" in text
    mixed = pack_hits([*foreign, hit("own", 1.0, "here")], lambda snippet: snippet)
    assert "From project" not in mixed and "[from project lighthouse]" in mixed


def replace_project(found: Hit, project: str) -> Hit:
    from dataclasses import replace

    return replace(found, project=project)


def test_a_record_of_the_asking_branch_comes_before_a_somewhat_better_one_from_elsewhere() -> None:
    """Sessions on one feature branch see each other's records first: within the boost of a better match of
    another branch (or the mainline), never past a clearly better one, and never on the mainline itself."""
    from scriptorium.recall.places import SAME_BRANCH_BOOST

    said = {("here", "m1"): "feature/search", ("here2", "m1"): "main"}
    where = {**FOLDERS, "here2": "/code/harbour"}

    def places(asked: Collection[str]) -> dict[str, Place | None]:
        return {s: at(folder) if (folder := where.get(s)) else None for s in asked}

    def branches(turns: Collection[tuple[str, str]]) -> dict[tuple[str, str], str | None]:
        return {turn: said.get(turn) for turn in turns}

    hits = [hit("main-record", 10.0, "here2"), hit("chat", 9.0, "chat"), hit("branch-record", 8.5, "here")]
    on_branch = replace_branch(at("/code/harbour"), "feature/search")
    assert 8.5 * SAME_BRANCH_BOOST > 10.0
    assert [h.memory_id for h in scoped(hits, on_branch, places, branches)] == ["branch-record", "main-record", "chat"]
    clearly_better = [hit("main-record", 20.0, "here2"), hit("branch-record", 8.5, "here")]
    assert [h.memory_id for h in scoped(clearly_better, on_branch, places, branches)] == [
        "main-record",
        "branch-record",
    ]
    on_main = replace_branch(at("/code/harbour"), "main")
    assert [h.memory_id for h in scoped(hits, on_main, places, branches)] == ["main-record", "chat", "branch-record"]
