"""Conversation files (the archive's layout 3): every message of one conversation in one file, each entry its
archive bytes after a line giving their length, so no text ends an entry early or forges one."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scriptorium.errors import RevisionConflict, ValidationRejected
from scriptorium.web.markdown import SOURCE_VIEW, render_memory_markdown
from scriptorium.workspace import MemoryWorkspace, TopicChange, threads
from scriptorium.workspace.normalize import citation_source_path
from scriptorium.workspace.paths import (
    ARCHIVING,
    RUNTIME_DIR,
    conversation_file,
    is_conversation_file,
    key_of_link,
    source_path,
)
from scriptorium.workspace.sources import SourceMessage, parse_source, remove_abandoned, render_source, tombstone
from scriptorium.workspace.topics import parse_footnote

TRICKY = st.sampled_from(
    ["<!-- source 5 -->\n", '---\nsource: "p/t/x"\n---\n', "\n\n", '<a id="source-m"></a>', "é", "\u2028", "`"]
)
TEXT = st.lists(st.text(min_size=0, max_size=30) | TRICKY, max_size=6).map("".join)
NAME = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1, max_size=12)


def _message(thread: str, message: str, text: str) -> SourceMessage:
    return SourceMessage("claude-code", thread, message, "user", "2026-12-01T10:00:00Z", text)


@settings(max_examples=200, deadline=None)
@given(NAME, st.lists(st.tuples(NAME, TEXT), max_size=8, unique_by=lambda pair: pair[0]))
def test_a_conversation_file_gives_back_each_message_as_archived(thread: str, said: list[tuple[str, str]]) -> None:
    messages = [_message(thread, name, text) for name, text in said]
    path = conversation_file(source_path("claude-code", thread, "x"))
    data = threads.join(render_source(m) for m in messages)
    entries = threads.split(path, data)
    assert list(entries) == [m.path for m in messages]
    for message in messages:
        assert entries[message.path] == render_source(message)
        assert parse_source(message.path, entries[message.path]).identity == message.identity
        assert conversation_file(message.path) == path
        assert key_of_link(path, f"source-{message.message}") == message.path


def test_an_edit_replaces_an_entry_in_place_and_appends_new_ones() -> None:
    first, second, third = (_message("t1", f"m{n}", f"text {n}") for n in range(3))
    path = conversation_file(first.path)
    data = threads.join([render_source(first), render_source(second)])
    stone = render_source(tombstone(second, at="a", by="b", why="c"))
    edited = threads.edit(path, data, {second.path: stone, third.path: render_source(third)})
    assert list(threads.split(path, edited).values()) == [render_source(first), stone, render_source(third)]
    assert edited.startswith(threads.join([render_source(first)]))
    assert threads.edit(path, b"", {first.path: render_source(first)}) == threads.join([render_source(first)])
    with pytest.raises(ValidationRejected) as refused:
        threads.edit(path, data, {_message("t2", "m0", "x").path: b"---\n"})
    assert refused.value.reason == "INVALID_SOURCE"


def test_a_damaged_conversation_file_is_refused_naming_where() -> None:
    one, two = _message("t1", "m1", "hello"), _message("t1", "m2", "again")
    path = conversation_file(one.path)
    whole = threads.join([render_source(one), render_source(two)])
    other = threads.join([render_source(_message("t2", "m1", "hello"))])
    damaged = {
        "truncated": whole[:-3],
        "no mark": b"x" + whole,
        "a length past the end": whole.replace(b"source %d" % len(render_source(two)), b"source 99999", 1),
        "another conversation's entry": other,
        "a message twice": threads.join([render_source(one), render_source(one)]),
        "an entry naming no source": threads.join([b"plain text\n"]),
        "a leading zero": whole.replace(b"<!-- source ", b"<!-- source 0", 1),
    }
    for what, data in damaged.items():
        with pytest.raises(ValidationRejected) as refused:
            threads.split(path, data)
        assert refused.value.reason == "INVALID_SOURCE", what
        assert refused.value.path == path, what
    assert threads.split(path, b"") == {}


def test_a_citation_link_names_its_source_in_every_layout() -> None:
    key = source_path("claude-code", "s-1", "m 2")
    conversation = conversation_file(key)
    assert is_conversation_file(conversation) and not is_conversation_file(key)
    assert key_of_link(conversation, "source-m 2") == key  # layout 3
    assert key_of_link(key, "source-m 2") == key  # layout 2's own file
    assert key_of_link(key, "") == key
    assert key_of_link("sources/claude-code/s-1/m%202.md", "source-m 2") == key  # layout 1
    assert key_of_link(conversation, "") is None  # a whole conversation cites no message
    assert key_of_link(conversation, "source-") is None
    assert key_of_link("topics/a.md", "source-x") is None


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_archive_appends_each_conversations_messages_to_its_file(tmp_path: Path) -> None:
    archive = threads.ConversationArchive(tmp_path)
    one = [_message("t1", f"m{n}", f"text {n}") for n in range(3)]
    two = [_message("t2", "m0", "other conversation")]
    keys = archive.archive([one[0], two[0], one[1]])
    assert keys == [one[0].path, two[0].path, one[1].path]
    first = _files(tmp_path / "sources")
    assert len(first) == 2, "one file a conversation"
    assert archive.archive([one[0], two[0], one[1]]) == keys and _files(tmp_path / "sources") == first
    archive.archive([one[2], one[1]])  # one new, one archived before with the same bytes
    conversation = conversation_file(one[0].path)
    assert list(threads.split(conversation, (tmp_path / conversation).read_bytes())) == [m.path for m in one]
    assert archive.read(one[2].path) == parse_source(one[2].path, render_source(one[2]))
    assert archive.exists(two[0].path) and not archive.exists(_message("t1", "m9", "x").path)
    with pytest.raises(ValidationRejected):
        archive.read(_message("t3", "m0", "x").path)
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o400 for p in (tmp_path / "sources").rglob("*.md"))


def test_a_message_archived_with_other_bytes_refuses_the_batch_and_changes_nothing(tmp_path: Path) -> None:
    archive = threads.ConversationArchive(tmp_path)
    archive.archive([_message("t1", "m0", "said first")])
    before = _files(tmp_path)
    for batch in ([_message("t2", "m0", "new"), _message("t1", "m0", "said otherwise")],
                  [_message("t1", "m1", "a"), _message("t1", "m1", "b")]):  # fmt: skip
        with pytest.raises(ValidationRejected) as refused:
            archive.archive(batch)
        assert refused.value.reason == "INVALID_SOURCE"
        assert _files(tmp_path) == before, "nothing written, no temporary file left"


def test_batches_prepared_together_for_one_conversation_both_land(tmp_path: Path) -> None:
    archive = threads.ConversationArchive(tmp_path)
    archive.archive([_message("t1", "m0", "first")])
    early = archive.prepare([_message("t1", "m1", "one pass")])
    late = archive.prepare([_message("t1", "m2", "another pass")])
    archive.commit(late)
    archive.commit(early)  # prepared on the file before the other pass appended: written again with both
    conversation = conversation_file(_message("t1", "m0", "").path)
    held = threads.split(conversation, (tmp_path / conversation).read_bytes())
    assert [parse_source(k, v).text for k, v in held.items()] == ["first", "another pass", "one pass"]
    assert not [p for p in (tmp_path / "sources").rglob(".*")], "no temporary file left"


def test_a_killed_preparation_leaves_what_recovery_removes(tmp_path: Path) -> None:
    code = (
        "import os, sys; from pathlib import Path\n"
        "from scriptorium.workspace.threads import ConversationArchive\n"
        "from scriptorium.workspace.sources import SourceMessage\n"
        "ConversationArchive(Path(sys.argv[1])).prepare([SourceMessage('p', 't', 'm', 'user', 't', 'x')])\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True)
    left = [p for p in (tmp_path / "sources").rglob(".*") if p.is_file()]
    assert len(left) == 1 and left[0].name.endswith(".tmp")
    assert remove_abandoned(tmp_path) == 1
    assert not [p for p in (tmp_path / "sources").rglob("*") if p.is_file()]
    assert not list((tmp_path / RUNTIME_DIR / ARCHIVING).iterdir())


def test_a_citation_linking_a_conversation_file_cites_its_message(seeded: MemoryWorkspace) -> None:
    """A footnote or an inline citation naming a conversation file and a message's anchor cites that message
    (its key), and the normalizer writes that link for every citation, whatever form it was given in."""
    key = source_path("test", "t1", "m1")
    link = f"../{conversation_file(key)}#source-m1"
    note = parse_footnote("topics/a.md", "e1", f"[said]({link})")
    assert note.source_path == key and note.fragment_ok and note.source is not None
    assert note.source.identity == "test/t1/m1"
    assert parse_footnote("topics/a.md", "e1", f"[said](../{conversation_file(key)})").source is None
    assert citation_source_path("topics/a.md", link) == (key, "source-m1")
    seeded.apply_changes([TopicChange("topics/a.md", "create", f"Tea [tea]({link}).\n")], message="cite")
    topic = seeded.snapshot().topics["topics/a.md"]
    assert topic.cited_paths(topic.records[0]) == [key]
    assert f"](../{conversation_file(key)}#source-m1)" in seeded.read_topic("topics/a.md")
    seeded.apply_changes([TopicChange("topics/b.md", "create", f"Tea [tea](../{key}#source-m1).\n")], message="2")
    assert f"](../{conversation_file(key)}#source-m1)" in seeded.read_topic("topics/b.md")
    html = render_memory_markdown(f"Tea [tea]({link}).")
    assert f'href="{SOURCE_VIEW.replace("&", "&amp;")}{quote(key, safe="/")}"' in html


def test_a_request_takes_back_only_its_own_fresh_sources(tmp_path: Path) -> None:
    archive = threads.ConversationArchive(tmp_path)
    kept, fresh = _message("owner", "n1", "an earlier note"), _message("owner", "n2", "a refused one")
    archive.archive([kept])
    before = (tmp_path / conversation_file(kept.path)).read_bytes()
    archive.archive([fresh])
    archive.take_back([fresh.path])
    assert (tmp_path / conversation_file(kept.path)).read_bytes() == before
    assert stat.S_IMODE((tmp_path / conversation_file(kept.path)).stat().st_mode) == 0o400
    archive.take_back([kept.path])
    assert not (tmp_path / "sources").exists() or not any((tmp_path / "sources").iterdir()), "emptied folders go"


def test_a_rewrite_meeting_a_source_archived_meanwhile_is_a_conflict_and_loses_nothing(
    seeded: MemoryWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A promotion (like a forget or a redaction) installs its conversation file over the work tree's; a
    message another pass archived into that file after the rewrite was planned must not go: the install is
    refused as a conflict (retried on the new baseline), and the message stays archived."""
    with seeded.lock():
        (pending,) = seeded.archive_sources([_message_of_test(20, "pending")])
        seeded.transact(lambda stage: None, message="archive", appended_sources=[pending])
    build = seeded.git.build_tree

    def archive_meanwhile(tree: str, files: dict[str, bytes | None]) -> str:
        with seeded.lock():
            seeded.archive_sources([_message_of_test(21)])
        return build(tree, files)

    monkeypatch.setattr(seeded.git, "build_tree", archive_meanwhile)
    with pytest.raises(RevisionConflict):
        seeded.promote_source(pending)
    monkeypatch.undo()
    assert seeded.archive.exists(_message_of_test(21).path), "the message archived meanwhile is still there"
    assert seeded.promote_source(pending).changed_files
    assert seeded.archive.read(pending).trust == "trusted" and seeded.archive.exists(_message_of_test(21).path)


def _message_of_test(n: int, trust: str = "trusted") -> SourceMessage:
    """A message of the ``seeded`` workspace's conversation (``test/t1``)."""
    return SourceMessage("test", "t1", f"m{n}", "user", "2026-11-01T10:00:00Z", f"message number {n}", trust=trust)  # type: ignore[arg-type]


def test_the_conversation_files_kept_split_are_bounded_by_their_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few long conversations weigh what hundreds of short ones do: the split files an archive keeps are
    bounded by bytes, not only by count (a server reads many over its life)."""
    monkeypatch.setattr(threads.ConversationArchive, "CACHED_BYTES", 64 * 1024)
    archive = threads.ConversationArchive(tmp_path)
    long = "a long message " * 700  # about 10 KB
    for n in range(12):
        archive.archive([_message(f"t{n}", f"m{k}", long) for k in range(2)])
    for n in range(12):
        assert archive.read(source_path("claude-code", f"t{n}", "m1")).text == long
    for cache in (archive._stat_split, archive._parsed):
        assert cache.weight <= 64 * 1024, "about 240 KB read; each cache holds at most its budget"


def test_a_pass_appending_to_a_long_conversation_reads_only_its_new_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pass that appends to a conversation splits its file several times (prepared, put in place, its
    citations checked, folded into the install, read back from the commit): the archive splits what extends
    the bytes it split last and nothing before them, so a pass costs its new entries, not the conversation."""
    archive = threads.ConversationArchive(tmp_path)
    archive.archive([_message("long", f"m{n}", f"said {n}") for n in range(300)])
    conversation = conversation_file(_message("long", "m0", "").path)
    parsed: list[int] = []
    real = threads._key_of_entry
    monkeypatch.setattr(threads, "_key_of_entry", lambda path, entry, at: parsed.append(at) or real(path, entry, at))
    for n in range(300, 305):
        new = _message("long", f"m{n}", f"said {n}")
        held = (tmp_path / conversation).read_bytes()
        archive.commit(archive.prepare([new]))
        assert archive.exists(new.path) and archive.entry(_message("long", "m7", "").path) is not None
        files: dict[str, bytes | None] = {new.path: render_source(new)}
        archive.fold(files, set())
        assert files[conversation] == (tmp_path / conversation).read_bytes()
        assert files[conversation].startswith(held)
    assert len(parsed) <= 5 * 2, parsed  # each new entry split once or twice, none of the 300 before
    assert list(archive.entries(conversation)) == [_message("long", f"m{n}", "").path for n in range(305)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 5) | st.just(-1), min_size=1, max_size=8))
def test_the_archive_splits_any_bytes_of_a_file_as_split_does(steps: list[int]) -> None:
    """Appends, the bytes before an append, a cut mid-entry, an edit in place, a duplicate: what the archive
    remembers of a file never gives other entries than :func:`threads.split`, nor lets a damaged file through."""
    archive = threads.ConversationArchive(Path("/nonexistent"))
    messages = [_message("t", f"m{n}", f"text {n}") for n in range(6)]
    path = conversation_file(messages[0].path)
    seen: list[bytes] = [b""]
    for step in steps:
        last = seen[-1]
        if step == -1:  # the first entry given other bytes in place (a tombstone, a redaction)
            try:
                entries = list(threads.split(path, last).values())
            except ValidationRejected:
                continue
            data = threads.join([render_source(_message("t", "m0", "edited")), *entries[1:]]) if entries else last
        else:
            data = last + threads.join(render_source(m) for m in messages[: step + 1])  # duplicates past the first
        seen.append(data)
        for version in (data, last, data[: len(data) // 2]):
            try:
                expected: dict[str, bytes] | str = threads.split(path, version)
            except ValidationRejected as refused:
                expected = refused.reason
            try:
                got: dict[str, bytes] | str = archive._split(path, version)
            except ValidationRejected as refused:
                got = refused.reason
            assert got == expected
            if isinstance(got, dict):
                assert list(got) == list(expected)
