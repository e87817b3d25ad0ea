"""The exactly-once checkers can fail: each fault they exist for is injected and caught."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from scriptorium.sessions import SessionStore
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.staging import Staging
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.batch import cut_batch, to_message
from scriptorium.writing.service import WriteService
from tests.checks import by_message, exactly_once, records_citing, tree_problems
from tests.sessions_fixtures import T0, chain

TURNS = [f"m{i}" for i in range(1, 5)]


@pytest.fixture
def written(tmp_path: Path, store: SessionStore) -> Iterator[tuple[MemoryWorkspace, SessionStore]]:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    store.create_session("s1", {"provider": "test", "title": "Planning"}, created_at=T0)
    store.add_nodes(chain("s1", TURNS), head=TURNS[-1])
    assert WriteService(ws, store, VerbatimWriter(), OfflineOrganizer()).write("s1", force=True).ok
    yield ws, store
    ws.close()


def expected() -> list[tuple[str, str]]:
    return [("s1", node) for node in TURNS]


def clean() -> dict[str, int]:
    return {"turns": 4, "lost": 0, "duplicated": 0, "unmarked": 0, "partial_installs": 0}


def test_a_clean_pass_is_clean(written: tuple[MemoryWorkspace, SessionStore]) -> None:
    ws, store = written
    assert exactly_once(ws.root, store, expected()) == clean()


def test_a_duplicate_record_sharing_its_footnote_is_counted(written: tuple[MemoryWorkspace, SessionStore]) -> None:
    """The same cited turn appended twice: the normalizer gives both records one footnote."""
    ws, store = written
    (path,) = [p for p in ws.snapshot().topics if p.startswith("topics/conversations/")]
    text = (ws.root / path).read_text()
    line = next(ln for ln in text.splitlines() if "[^" in ln and not ln.startswith("[^"))
    label = line.split("[^", 1)[1].split("]", 1)[0]
    body = line.split(" ^m-")[0]  # the statement with its footnote reference, without its block ID
    ws.apply_changes([TopicChange(path, "update", text + f"\n{body}\n")], message="inject a duplicate")
    after = (ws.root / path).read_text()
    assert after.count(f"[^{label}]:") == 1, "the two records share one footnote definition"
    counts = exactly_once(ws.root, store, expected())
    assert counts == {**clean(), "duplicated": 1}


def test_a_turn_delivered_twice_to_the_verbatim_writer_shows(written: tuple[MemoryWorkspace, SessionStore]) -> None:
    """The writer does not hide a duplicate delivery: if the markers and the in-tree guard failed, it shows."""
    ws, store = written
    nodes = store.get_branch("s1")
    again = [to_message(n, "test", "trusted") for n in nodes if n.is_content][:1]
    batch = cut_batch("s1", "Planning", nodes[:1], again, 16_000)

    def edit(stage: Staging) -> None:
        VerbatimWriter().write(batch, stage)

    ws.transact(edit, message="a duplicate delivery past the guard")
    assert by_message(records_citing(ws.root))["m1"] == 2
    assert exactly_once(ws.root, store, expected())["duplicated"] == 1


def test_a_skipped_head_update_is_caught(written: tuple[MemoryWorkspace, SessionStore]) -> None:
    ws, store = written
    git = ["git", f"--git-dir={ws.root / '.git'}"]
    subprocess.run([*git, "update-ref", "refs/heads/main", "main~1"], check=True)
    problems = tree_problems(ws.root)
    assert any("differ from git HEAD" in p for p in problems) and any("state.json" in p for p in problems)
    assert exactly_once(ws.root, store, expected())["partial_installs"] == 1


def test_a_left_journal_and_a_stale_state_are_caught(written: tuple[MemoryWorkspace, SessionStore]) -> None:
    ws, _store = written
    state = ws.root / ".scriptorium" / "state.json"
    good = state.read_text()
    state.write_text(json.dumps({**json.loads(good), "tree": "0" * 40}))
    assert any("state.json" in p for p in tree_problems(ws.root))
    state.write_text(good)
    (ws.root / ".scriptorium" / "journal.json").write_text("{}")
    assert any("journal" in p for p in tree_problems(ws.root))


def test_a_file_changed_behind_the_transaction_is_caught(written: tuple[MemoryWorkspace, SessionStore]) -> None:
    ws, _store = written
    (ws.root / "recent.md").write_text("tampered\n")
    assert any("differ from git HEAD" in p for p in tree_problems(ws.root))


def test_a_lost_and_an_unmarked_turn_are_caught(written: tuple[MemoryWorkspace, SessionStore]) -> None:
    ws, store = written
    store.add_nodes(chain("s1", ["m5"], parent="m4"), head="m5")
    counts = exactly_once(ws.root, store, [*expected(), ("s1", "m5")])
    assert counts == {**clean(), "turns": 5, "lost": 1, "unmarked": 1}


def test_checking_writes_nothing_into_the_repository(written: tuple[MemoryWorkspace, SessionStore]) -> None:
    ws, _store = written
    (ws.root / "recent.md").write_text("tampered\n")

    def objects() -> set[str]:
        return {p.as_posix() for p in (ws.root / ".git" / "objects").rglob("*") if p.is_file()}

    before = objects()
    tree_problems(ws.root)
    assert objects() == before
