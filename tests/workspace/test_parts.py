"""A long conversation's file in parts (the archive's layout 4): ``<thread>.md``, ``<thread>+2.md``, …, each about
``ConversationArchive.PART_BYTES``, so that a pass appending to a long conversation writes its last part again,
not all the conversation said. Every guarantee of one file a conversation holds across its parts."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scriptorium.errors import ReasonCode, ValidationRejected
from scriptorium.workspace import MemoryWorkspace, TopicChange, threads
from scriptorium.workspace.gitstore import GitStore
from scriptorium.workspace.paths import (
    conversation_file,
    conversation_of,
    conversation_part,
    is_conversation_file,
    key_of_link,
    part_of,
    relative_link,
    resolve_link,
    source_identity_from_path,
    source_path,
)
from scriptorium.workspace.sources import SourceMessage, parse_source, render_source
from tests.checks import tree_problems

SMALL = 2_000
"""Part size in these tests: a few messages a part."""


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(threads.ConversationArchive, "PART_BYTES", SMALL)
    return SMALL


def _message(n: int, thread: str = "long", size: int = 300) -> SourceMessage:
    return SourceMessage("claude-code", thread, f"m{n}", "user", "2026-12-01T10:00:00Z", f"said {n} " + "x" * size)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "sources").rglob("*.md"))}


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=12), st.integers(1, 10_000))
def test_a_part_is_its_conversation_s_and_no_thread_s_file_is_another_s_part(thread: str, number: int) -> None:
    key = source_path("claude-code", thread, "m1")
    conversation = conversation_file(key)
    part = conversation_part(conversation, number)
    assert is_conversation_file(part) and part_of(part) == (conversation, number)
    assert conversation_of(part) == conversation and source_identity_from_path(part) is None
    assert key_of_link(part, "source-m1") == key
    resolved = resolve_link("topics/a.md", relative_link("topics/a.md", part))  # as a citation links it
    assert resolved == part and key_of_link(resolved, "source-m1") == key
    other = conversation_file(source_path("claude-code", f"{thread}+{number}", "m1"))  # a thread named like a part
    assert part_of(other) == (other, 1), "its '+' is quoted: a first part of its own"


def test_the_archive_cuts_a_long_conversation_into_parts_and_reads_every_message(
    tmp_path: Path, small_parts: int
) -> None:
    archive = threads.ConversationArchive(tmp_path)
    messages = [_message(n) for n in range(40)]
    for first in range(0, 40, 3):
        archive.archive(messages[first : first + 3])
    conversation = conversation_file(messages[0].path)
    parts = archive.parts(conversation)
    assert parts[0] == conversation and len(parts) > 5
    assert parts == [conversation_part(conversation, n) for n in range(1, len(parts) + 1)]
    for part in parts[:-1]:
        assert (tmp_path / part).stat().st_size <= small_parts
    assert archive.entries_of(conversation) == [m.path for m in messages], "in archive order, across the parts"
    for message in messages:
        assert archive.entry(message.path) == render_source(message)
        assert archive.read(message.path) == parse_source(message.path, render_source(message))
        assert message.path in archive.entries(archive.stored_path(message.path))
        assert threads.read_entry(tmp_path, message.path) == render_source(message)
        assert threads.stored_file(tmp_path, message.path) == tmp_path / archive.stored_path(message.path)
    before = _files(tmp_path)
    assert archive.archive(messages[10:20]) == [m.path for m in messages[10:20]]
    assert _files(tmp_path) == before, "archiving again is byte-identical, in whichever part each is"
    big = _message(99, size=3 * small_parts)
    archive.archive([big])
    alone = archive.stored_path(big.path)
    assert alone == conversation_part(conversation, len(parts) + 1), "past the bound: a part after the last"
    assert list(threads.split(alone, (tmp_path / alone).read_bytes())) == [big.path], "a part holds it whole, alone"


def test_a_pass_writes_the_last_part_again_and_leaves_the_others_as_they_are(tmp_path: Path, small_parts: int) -> None:
    archive = threads.ConversationArchive(tmp_path)
    archive.archive([_message(n) for n in range(30)])
    conversation = conversation_file(_message(0).path)
    earlier = {part: os.stat(tmp_path / part) for part in archive.parts(conversation)}
    written = archive.prepare([_message(30), _message(31)])
    staged = [part for part, _held, _data, _tmp in written.conversations]
    archive.commit(written)
    assert set(staged) <= {archive.parts(conversation)[-1], *list(earlier)[-1:]}, staged
    for part, stat in list(earlier.items())[:-1]:
        now = os.stat(tmp_path / part)
        assert (now.st_ino, now.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns), f"{part} was written again"


def test_batches_prepared_together_land_once_each_when_one_opens_a_new_part(tmp_path: Path, small_parts: int) -> None:
    """Another pass filled the last part and opened the next while this one was prepared: this one is placed
    again under the lock, and no message is in two parts."""
    archive = threads.ConversationArchive(tmp_path)
    archive.archive([_message(n) for n in range(4)])
    early = archive.prepare([_message(10), _message(11)])
    late = archive.prepare([_message(20 + n) for n in range(8)] + [_message(11)])
    archive.commit(late)
    archive.commit(early)
    conversation = conversation_file(_message(0).path)
    keys = [key for part in archive.parts(conversation) for key in threads.split(part, (tmp_path / part).read_bytes())]
    expected = [_message(n).path for n in [*range(4), *range(20, 28), 11, 10]]
    assert sorted(keys) == sorted(expected) and len(keys) == len(set(keys))
    assert not [p for p in (tmp_path / "sources").rglob(".*") if p.is_file()], "no temporary file left"
    with pytest.raises(ValidationRejected) as refused:
        archive.archive([SourceMessage("claude-code", "long", "m21", "user", "2026-12-01T10:00:00Z", "other words")])
    assert refused.value.reason == ReasonCode.INVALID_SOURCE


def test_a_request_takes_back_its_fresh_sources_from_whichever_part(tmp_path: Path, small_parts: int) -> None:
    archive = threads.ConversationArchive(tmp_path)
    archive.archive([_message(n) for n in range(8)])
    before = _files(tmp_path)
    fresh = [_message(n) for n in range(8, 20)]
    archive.archive(fresh)
    archive.take_back([m.path for m in fresh])
    assert _files(tmp_path) == before


def test_a_workspace_reads_installs_and_cites_a_conversation_in_parts(tmp_path: Path, small_parts: int) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    try:
        for first in range(0, 30, 5):
            with ws.lock():
                paths = ws.archive_sources([_message(n) for n in range(first, first + 5)])
            ws.transact(lambda stage: None, message=f"pass {first}", appended_sources=paths)
        conversation = conversation_file(_message(0).path)
        parts = ws.archive.parts(conversation)
        assert len(parts) > 3
        committed = ws.archive.keys(ws.git, ws.revision)
        assert sorted(committed) == sorted(_message(n).path for n in range(30))
        late = _message(27).path
        assert ws.archive.committed(ws.git, ws.revision, late) == render_source(_message(27))
        result = ws.apply_changes(
            [TopicChange("topics/a.md", "create", "Late fact [k](claude-code/long/m27).\n")], message="cite"
        )
        link = f"../{ws.archive.stored_path(late)}#source-m27".replace("+", "%2B")
        assert result.git_committed and link in ws.read_topic("topics/a.md")
        topic = ws.snapshot().topics["topics/a.md"]
        assert topic.cited_paths(topic.records[0]) == [late]
        assert tree_problems(ws.root) == []
        git = GitStore(ws.root / ".git")
        try:
            assert sorted(ws.archive.keys(git, ws.revision)) == sorted(committed)
        finally:
            git.close()
    finally:
        ws.close()


def test_forgetting_a_message_of_a_later_part_purges_it_from_every_commit(tmp_path: Path, small_parts: int) -> None:
    """The tombstone replaces its entry in its part, every version of that part in history takes it, the other
    parts' objects stay as they were, and no object holds the forgotten words."""
    from scriptorium.changes.forget import Selection, forget
    from scriptorium.workspace.purge import purge_history

    ws = MemoryWorkspace.init(tmp_path / "memory")
    try:
        secret = SourceMessage("claude-code", "long", "m25", "user", "2026-12-01T10:00:00Z", "the vault code is 8841")
        for first in range(0, 30, 5):
            batch = [secret if n == 25 else _message(n) for n in range(first, first + 5)]
            with ws.lock():
                paths = ws.archive_sources(batch)
            ws.transact(lambda stage: None, message=f"pass {first}", appended_sources=paths)
        ws.apply_changes(
            [
                TopicChange(
                    "topics/v.md",
                    "create",
                    "The vault [code](claude-code/long/m25).\n\nOther [k](claude-code/long/m3).\n",
                )
            ],
            message="cite",
        )
        conversation = conversation_file(secret.path)
        part = ws.archive.stored_path(secret.path)
        assert part != conversation
        first_part = ws.git.lookup(ws.revision, conversation)
        done = forget(ws, Selection(sources=("claude-code/long/m25",)), why="asked")
        assert done["paths"] == [secret.path]
        purge_history(ws, [secret.path])
        objects = subprocess.run(
            ["git", f"--git-dir={ws.root / '.git'}", "cat-file", "--batch-all-objects", "--batch"],
            capture_output=True,
            check=True,
        ).stdout
        assert b"8841" not in objects and b"8841" not in b"".join(_files(ws.root).values())
        assert b"The vault" not in objects, "the record citing it goes from every commit's topic (its link: a part)"
        assert b"Other [^e-" in objects, "the other record stays"
        assert ws.archive.read(secret.path).forgotten is not None
        assert ws.archive.read(_message(3).path).text == _message(3).text
        assert ws.git.lookup(ws.revision, conversation) == first_part, "a part without it keeps its object"
        assert f"{ws.archive.stored_path(_message(3).path)}#source-m3" in ws.read_topic("topics/v.md")
        assert tree_problems(ws.root) == []
    finally:
        ws.close()


def test_promoting_a_message_of_a_later_part_changes_what_recall_trusts(tmp_path: Path, small_parts: int) -> None:
    """The recall index notices a conversation's sources changed by the signatures of all its parts: a promotion
    writes one later part again, and the records citing it are trusted at the next search, no topic parsed."""
    from scriptorium.recall.index import RecallIndex

    ws = MemoryWorkspace.init(tmp_path / "memory")
    try:
        pages = [
            SourceMessage(
                "claude-code", "web", f"m{n}", "user", "2026-12-01T10:00:00Z", f"page {n} " + "y" * 400, trust="pending"
            )
            for n in range(12)
        ]
        with ws.lock():
            paths = ws.archive_sources(pages)
        ws.transact(lambda stage: None, message="pages", appended_sources=paths)
        assert ws.archive.stored_path(pages[10].path) != conversation_file(pages[10].path)
        ws.apply_changes(
            [TopicChange("topics/rumour.md", "create", "The tea shop closes in May [k](claude-code/web/m10).\n")],
            message="rumour",
        )
        index = RecallIndex(ws.root)
        assert index.search("tea shop") == []
        assert [h.trust for h in index.search("tea shop", include_pending=True)] == ["pending"]
        assert ws.promote_source("claude-code/web/m10").changed_files == (ws.archive.stored_path(pages[10].path),)
        hits = index.search("tea shop")
        assert index.last_refresh.trust_changed == 1 and index.last_refresh.topics_parsed == 0
        assert [(h.topic, h.trust) for h in hits] == [("topics/rumour.md", "trusted")]
    finally:
        ws.close()


def test_a_plan_folding_a_rewrite_and_a_new_source_into_one_part_keeps_both(tmp_path: Path, small_parts: int) -> None:
    """A plan's tombstone in the last part and a source not archived yet, placed in that same part: the part
    the install gets holds both."""
    from scriptorium.workspace.sources import tombstone

    archive = threads.ConversationArchive(tmp_path)
    archive.archive([_message(n) for n in range(6)])
    last = archive.parts(conversation_file(_message(0).path))[-1]
    held = threads.split(last, (tmp_path / last).read_bytes())
    gone = next(iter(held))
    stone = render_source(tombstone(parse_source(gone, held[gone]), at="2026-12-02", by="test", why="asked"))
    new = _message(6, size=10)
    files: dict[str, bytes | None] = {gone: stone, new.path: render_source(new)}
    archive.fold(files, set())
    assert set(files) == {last}
    entries = threads.split(last, files[last] or b"")
    assert entries[gone] == stone and entries[new.path] == render_source(new)


def test_a_message_another_batch_put_in_a_new_part_meanwhile_is_not_written_twice(
    tmp_path: Path, small_parts: int
) -> None:
    """Batch X places A and B in the last part (they fit); batch Y, prepared on the same bytes, puts a long
    message and A in new parts. Y commits first: X's prepared part is unchanged, yet it holds A, which is in
    a later part now; X is placed again, so that A is in one part only (a tombstone finds every copy)."""
    archive = threads.ConversationArchive(tmp_path)
    archive.archive([_message(0, size=100)])
    a, b, big = _message(1, size=100), _message(2, size=100), _message(3, size=small_parts)
    x = archive.prepare([a, b])
    y = archive.prepare([big, a])
    archive.commit(y)
    archive.commit(x)
    conversation = conversation_file(a.path)
    held = [key for part in archive.parts(conversation) for key in threads.split(part, (tmp_path / part).read_bytes())]
    assert sorted(held) == sorted(m.path for m in (_message(0), a, b, big)), held
    assert archive.entry(b.path) == render_source(b)
