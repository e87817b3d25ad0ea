"""Every JSON file Scriptorium keeps says its layout's version (:mod:`scriptorium.formats`): a file an older
release wrote (no version) is read, migrated where its layout changed; a file a newer release wrote is refused
with SCHEMA_TOO_NEW and left as it was; a derived file of another version is computed again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from scriptorium.access.tokens import TokenStore
from scriptorium.changes.proposals import Proposal, ProposalStore
from scriptorium.errors import ReasonCode, SchemaTooNew
from scriptorium.formats import read_versioned
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.recovery import begin_purge
from scriptorium.workspace.writer_history import WriterHistory
from scriptorium.writing.backfill import BackfillLedger
from scriptorium.writing.history import OrganizeState
from scriptorium.writing.watcher import HandledLedger

RUNTIME = ".scriptorium"


def newer(path: Path) -> None:
    """Make ``path`` look written by a release a version ahead."""
    data = json.loads(path.read_text())
    data["version"] = data.get("version", 1) + 1
    path.write_text(json.dumps(data))


def refused(read: Callable[[], object], path: Path) -> None:
    before = path.read_bytes()
    with pytest.raises(SchemaTooNew) as error:
        read()
    assert error.value.reason is ReasonCode.SCHEMA_TOO_NEW and not error.value.retryable
    assert str(path) in error.value.message
    assert path.read_bytes() == before


def unversioned(path: Path) -> None:
    """Make ``path`` look written before versions (no ``version`` key)."""
    data = json.loads(path.read_text())
    data.pop("version")
    path.write_text(json.dumps(data))


def test_the_helper_refuses_newer_migrates_older_and_reads_an_unversioned_file_as_version_1() -> None:
    steps = (lambda d: {**d, "b": d["a"] * 2},)
    assert read_versioned({"a": 1}, 2, "f.json", steps) == {"a": 1, "b": 2, "version": 2}
    assert read_versioned({"version": 2, "a": 1, "b": 5}, 2, "f.json", steps) == {"version": 2, "a": 1, "b": 5}
    with pytest.raises(SchemaTooNew, match=r"f\.json has schema version 3"):
        read_versioned({"version": 3}, 2, "f.json", steps)


def test_state_json(tmp_path: Path) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    revision = ws.revision
    ws.close()
    state = tmp_path / "memory" / RUNTIME / "state.json"
    assert json.loads(state.read_text())["version"] == 1
    unversioned(state)
    ws = MemoryWorkspace(tmp_path / "memory")
    assert ws.revision == revision
    ws.close()
    newer(state)
    refused(lambda: MemoryWorkspace(tmp_path / "memory").revision, state)


def test_an_install_journal_a_newer_release_left_is_not_finished_as_this_ones(tmp_path: Path) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    ws.close()
    journal = tmp_path / "memory" / RUNTIME / "journal.json"
    journal.write_text(json.dumps({"version": 2, "txn": "t", "tree": "x", "commit": "y", "parent": None, "ops": []}))
    refused(lambda: MemoryWorkspace(tmp_path / "memory").recover(), journal)


def test_a_purge_journal_a_newer_release_left_is_refused(tmp_path: Path) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    begin_purge(ws.root, "a" * 40, "b" * 40)
    ws.close()
    journal = tmp_path / "memory" / RUNTIME / "purge.json"
    assert json.loads(journal.read_text()) == {"version": 1, "old": "a" * 40, "new": "b" * 40}
    newer(journal)
    refused(lambda: MemoryWorkspace(tmp_path / "memory").recover(), journal)


def test_derived_stats_and_core_memo_of_another_version_are_computed_again(tmp_path: Path) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    counted = ws.stats()
    rendered = ws.core_rendering()
    runtime = tmp_path / "memory" / RUNTIME
    stats = runtime / "stats.json"
    for layout in ({"version": 99, "tree": counted.tree, "topics": 7, "records": 7, "sources": 7},
                   {"tree": counted.tree, "topics": 7, "records": 7, "sources": 7}):  # fmt: skip
        stats.write_text(json.dumps(layout))
        assert ws.stats() == counted
        assert json.loads(stats.read_text())["version"] == 1
    memo = runtime / "core.json"
    kept = json.loads(memo.read_text())
    assert kept["version"] == 1
    memo.write_text(json.dumps({**kept, "version": 99, "text": "a layout this release does not know"}))
    assert ws.core_rendering() == rendered
    ws.close()


@pytest.mark.parametrize("kind", ["organize", "watcher", "history"])
def test_runtime_bookkeeping(tmp_path: Path, kind: str) -> None:
    read: Callable[[], object]
    if kind == "organize":
        organize = OrganizeState(tmp_path)
        organize.save(organize.load())
        path, read = organize.path, organize.load
    elif kind == "watcher":
        ledger = HandledLedger(tmp_path)
        ledger.mark({"s1": 1.5})
        path, read = ledger.path, ledger.load
    else:
        history = WriterHistory(tmp_path)
        history.append({"op": "write", "ok": True})
        path, read = history.path, history.recent
    assert json.loads(path.read_text().splitlines()[0])["version"] == 1
    unversioned(path)
    assert read()  # what an older release wrote reads as version 1
    newer(path)
    refused(read, path)


def test_the_backfill_ledger_migrates_the_bare_list_older_releases_wrote(tmp_path: Path) -> None:
    ledger = BackfillLedger(tmp_path)
    ledger.path.write_text(json.dumps(["sources/a.md", "sources/b.md"]))  # version 1: a bare list
    assert ledger.load() == {"sources/a.md", "sources/b.md"}
    ledger.add(["sources/c.md"])
    assert json.loads(ledger.path.read_text()) == {
        "version": 2,
        "paths": ["sources/a.md", "sources/b.md", "sources/c.md"],
    }
    newer(ledger.path)
    refused(ledger.load, ledger.path)


def test_tokens_json(tmp_path: Path) -> None:
    tokens = TokenStore(tmp_path)
    tokens.create("runtime")
    assert json.loads(tokens.path.read_text())["version"] == 1
    unversioned(tokens.path)
    assert len(TokenStore(tmp_path).list()) == 1
    newer(tokens.path)
    refused(TokenStore(tmp_path).list, tokens.path)


def test_a_proposal_file(tmp_path: Path) -> None:
    store = ProposalStore(tmp_path)
    proposal = Proposal("p-0123456789ab", "ann", None, "propose", "2026-12-01T00:00:00+00:00", "r", {}, {})
    store.save(proposal)
    path = store.folder / f"{proposal.id}.json"
    assert json.loads(path.read_text())["version"] == 1
    unversioned(path)
    assert store.get(proposal.id) == proposal
    newer(path)
    refused(lambda: store.get(proposal.id), path)


def test_a_setup_note_a_newer_release_wrote_is_not_undone_by(tmp_path: Path) -> None:
    from scriptorium.runtimes.setup.reversible import NOTE_SUFFIX, edit, undo

    config = tmp_path / "settings.json"
    config.write_text("{}")
    edit(config, lambda before: b'{"hooks": 1}')
    note = config.with_name(config.name + NOTE_SUFFIX)
    assert json.loads(note.read_text())["version"] == 1
    unversioned(note)
    assert undo(config, lambda data: data).action == "restored"  # an older release's note still undoes
    edit(config, lambda before: b'{"hooks": 2}')
    newer(note)
    refused(lambda: undo(config, lambda data: data), note)


def test_a_quota_entry(tmp_path: Path) -> None:
    from scriptorium.access.quota import StorageQuota
    from scriptorium.audience import Principal

    quota = StorageQuota(tmp_path, "write", 1000, clock=lambda: "2026-12-06")
    ann = Principal("write", requester="ann")
    quota.charge(ann, 10)
    path = tmp_path / "write.ann.json"
    assert json.loads(path.read_text()) == {"version": 1, "day": "2026-12-06", "bytes": 10}
    unversioned(path)
    assert quota.used(ann) == 10
    newer(path)
    refused(lambda: quota.used(ann), path)


def test_the_writer_budget_ledger(tmp_path: Path) -> None:
    from scriptorium.writing.budget import BudgetLimits, Spend, WriterBudget

    budget = WriterBudget(tmp_path, BudgetLimits(), clock=lambda: 1796558400.0)  # 2026-12-06 12:00 UTC
    budget.charge(2, 30)
    assert json.loads(budget.path.read_text()) == {"version": 1, "day": "2026-12-06", "runs": 2, "tokens": 30}
    unversioned(budget.path)
    assert budget.today() == Spend("2026-12-06", 2, 30)
    newer(budget.path)  # a newer release's spend is neither read as nothing nor overwritten
    refused(budget.today, budget.path)
    refused(lambda: budget.charge(1, 0), budget.path)


def test_the_user_config_file() -> None:
    from scriptorium.locations import config_file, configured_state, record_state

    path = record_state(Path("/srv/memory-state"))  # version 1: written without one (the user may edit it)
    assert path == config_file() and configured_state() == Path("/srv/memory-state")
    newer(path)  # passing over it would put the memory in another folder
    refused(configured_state, path)
