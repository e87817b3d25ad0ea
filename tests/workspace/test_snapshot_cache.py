"""A new process does not parse every topic to read or change memory: it loads the snapshot indexes a process
left (:mod:`scriptorium.workspace.snapshot_cache`) and parses only the topics installed since. What it gets
is the snapshot a build from every topic gives; a forget leaves no index behind (a topic path can name what
was forgotten); a damaged file is ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from scriptorium.changes.forget import Selection, forget
from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange, topics
from scriptorium.workspace import workspace as workspace_module
from scriptorium.workspace.paths import TOPICS
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.snapshot_cache import cache_file

MANY = workspace_module.KEEP_AFTER_TOPICS + 8


def _world(root: Path) -> None:
    ws = MemoryWorkspace.init(root)
    messages = [SourceMessage("test", f"t{n % 4}", f"m{n}", "user", "2026-11-01T00:00:00Z", f"m{n}") for n in range(8)]
    with ws.lock():
        paths = ws.archive_sources(messages)
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes([_topic(n) for n in range(MANY)], message="many")
    ws.close()  # it built and moved more than KEEP_AFTER_TOPICS topics: it leaves the indexes


def _topic(n: int) -> TopicChange:
    text = f"# Topic {n}\n\n2026-11-{n % 27 + 1:02d}: Fact {n} of the release [k](test/t{n % 4}/m{n % 8}).\n"
    return TopicChange(f"topics/n{n:02d}.md", "create", text)


def _built(ws: MemoryWorkspace) -> dict[str, object]:
    """The same tree's snapshot built from every topic, as a process without the file builds it."""
    tree = ws.revision
    snap = Snapshot.build(tree, ws.commit, ws.git.list_files(tree, TOPICS), lambda p, s: ws._parse(p, s))
    return snap.to_cache()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    topics.clear_memo()
    parsed: list[str] = []
    parse = topics._parse_topic
    monkeypatch.setattr(topics, "_parse_topic", lambda path, text: parsed.append(path) or parse(path, text))
    return parsed


def test_a_new_process_loads_the_kept_indexes_and_parses_only_what_was_installed_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "memory"
    _world(root)
    assert cache_file(root).exists()

    parsed = _counting(monkeypatch)
    with MemoryWorkspace(root) as ws:
        snap = ws.snapshot()
        assert parsed == [], "the indexes of the installed tree are loaded, not built"
        assert snap.to_cache() == _built(ws)
        grown = ws.read_topic("topics/n03.md") + "\n2026-11-20: Another fact of the release [k](test/t0/m0).\n"
        ws.apply_changes([TopicChange("topics/n03.md", "update", grown), _topic(MANY)], message="two")
    kept = cache_file(root).stat().st_mtime_ns

    parsed.clear()
    topics.clear_memo()  # a new process: nothing parsed yet
    with MemoryWorkspace(root) as ws:
        snap = ws.snapshot()
        # Only the topics installed since: the new one, and both versions of the changed one (its old
        # records leave the indexes).
        assert sorted(parsed) == ["topics/n03.md", "topics/n03.md", f"topics/n{MANY:02d}.md"]
        assert snap.to_cache() == _built(ws)
        assert snap.record(snap.topics[f"topics/n{MANY:02d}.md"].records[0].memory_id) is not None
    assert cache_file(root).stat().st_mtime_ns == kept, "two topics behind: the file is left as it is"


def test_a_forget_leaves_no_indexes_and_a_process_from_before_it_writes_none(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _world(root)
    before = MemoryWorkspace(root)
    before.snapshot()
    with MemoryWorkspace(root) as ws:
        forget(ws, Selection(sources=("test/t1/m1",)))
    assert not cache_file(root).exists()
    before._caches.moved = MANY  # it would leave its indexes, were they not from before the forget
    before.close()
    assert not cache_file(root).exists()


def test_a_damaged_or_foreign_file_is_ignored_and_the_snapshot_built(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    _world(root)
    for junk in (b"not a pickle", b"\x80\x05N."):  # garbage; a pickled None
        cache_file(root).write_bytes(junk)
        with MemoryWorkspace(root) as ws:
            assert ws.snapshot().to_cache() == _built(ws)


def test_a_handle_closed_after_its_folder_was_put_aside_makes_no_folder_again(tmp_path: Path) -> None:
    """A worker that moved a workspace to another host puts its folder aside while the handle may still be
    open; closing it keeps no indexes there (it made the folder again, so the move never finished)."""
    root = tmp_path / "memory"
    _world(root)
    cache_file(root).unlink()
    ws = MemoryWorkspace(root)
    ws.snapshot()
    ws._caches.moved = MANY  # it would keep its indexes
    root.rename(tmp_path / "aside")
    ws.close()
    assert not root.exists()
