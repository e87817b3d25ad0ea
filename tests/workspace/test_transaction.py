"""The transaction: normalization, every validation rule, and that rejections change nothing."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from scriptorium.errors import (
    InvalidArgument,
    InvalidPath,
    NotFound,
    PreInstallFailed,
    ReasonCode,
    RevisionConflict,
    ValidationRejected,
)
from scriptorium.workspace import MemoryWorkspace, PreInstall, TopicChange
from scriptorium.workspace.staging import REAL_TREE, TOPIC_API, Staging, StagingOptions, staging_prefix
from scriptorium.workspace.topics import parse_topic
from scriptorium.workspace.transaction import SourceRewrites
from scriptorium.workspace.views import render_all
from tests.conftest import State, git_log, git_tree_of_files, message, tree_bytes

ID = re.compile(r"(?<!#)\^(m-[0-9a-z]{12})")


def write(ws: MemoryWorkspace, path: str, text: str) -> object:
    exists = path in ws.topics()
    return ws.apply_changes([TopicChange(path, "update" if exists else "create", text)], message=f"edit {path}")


def ids_in(text: str) -> list[str]:
    return ID.findall(text)


def committed_paths(ws: MemoryWorkspace) -> list[str]:
    """The paths of the files in the workspace's HEAD commit, as git lists them."""
    listed = subprocess.run(
        ["git", "-C", str(ws.root), "ls-tree", "-r", "--name-only", "HEAD"], capture_output=True, text=True, check=True
    )
    return listed.stdout.split()


def committed_sources(ws: MemoryWorkspace) -> list[str]:
    """The sources of the workspace's HEAD commit, by key."""
    head = subprocess.run(
        ["git", "-C", str(ws.root), "rev-parse", "HEAD^{tree}"], capture_output=True, text=True, check=True
    )
    return ws.archive.keys(ws.git, head.stdout.strip())


def test_a_cited_paragraph_becomes_a_record_with_runtime_ids_and_an_archive_link(seeded: MemoryWorkspace) -> None:
    result = write(seeded, "topics/people/alice.md", "# Alice\n\n2026-11-03: Alice likes tea [tea](test/t1/m3).\n")
    text = (seeded.root / "topics/people/alice.md").read_text()
    assert result.created_ids == tuple(ids_in(text))  # type: ignore[attr-defined]
    assert "[^e-" in text and "](../../sources/test/e5/t1.md#source-m3)" in text
    assert "[tea](" in text  # the keyword is kept verbatim
    record = parse_topic("topics/people/alice.md", text).records[0]
    assert record.date == "2026-11-03"
    assert record.headings == ("Alice",)
    note = parse_topic("topics/people/alice.md", text).footnotes[record.refs[0]]
    assert note.source is not None and note.source.identity == "test/t1/m3"
    assert note.link_label == "tea"


def test_identity_comes_from_the_link_target_never_from_the_label(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "2026-11-01: Fact [test/t1/m9](test/t1/m2).\n")
    topic = parse_topic("topics/a.md", (seeded.root / "topics/a.md").read_text())
    note = next(iter(topic.footnotes.values()))
    assert note.source is not None and note.source.identity == "test/t1/m2"
    assert note.link_label == "test/t1/m9"


def test_labels_are_kept_verbatim_even_when_long_or_odd(seeded: MemoryWorkspace) -> None:
    label = "a very long keyword — with ünïcode, *stars* and 12:30 " * 4
    write(seeded, "topics/a.md", f"2026-11-01: Fact [{label.strip()}](test/t1/m2).\n")
    assert f"[{label.strip()}](../sources/test/e5/t1.md#source-m2)" in (seeded.root / "topics/a.md").read_text()


def test_normalization_is_idempotent_and_a_no_op_changes_nothing(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "# A\n\n2026-11-01: Fact one [k](test/t1/m1).\n\nUndated fact [k2](test/t1/m2).\n")
    state = State(seeded)
    result = write(seeded, "topics/a.md", (seeded.root / "topics/a.md").read_text())
    assert result.changed_files == ()  # type: ignore[attr-defined]
    state.assert_unchanged(seeded)


def test_records_can_be_rewritten_merged_and_moved_keeping_their_ids(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "# A\n\n2026-11-01: One [k](test/t1/m1).\n\n2026-11-02: Two [k](test/t1/m2).\n")
    one, two = ids_in((seeded.root / "topics/a.md").read_text())
    merged = f"# B\n\n2026-11-02: One and two, merged [k](test/t1/m1) [k](test/t1/m2). ^{one} ^{two}\n"
    result = seeded.apply_changes(
        [TopicChange("topics/a.md", "delete"), TopicChange("topics/b.md", "create", merged)], message="merge"
    )
    assert not (seeded.root / "topics/a.md").exists()
    assert set(ids_in((seeded.root / "topics/b.md").read_text())) == {one, two}
    assert "topics/a.md" in result.changed_files


def test_losing_a_block_id_is_rejected_and_changes_nothing(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "2026-11-01: One [k](test/t1/m1).\n\n2026-11-02: Two [k](test/t1/m2).\n")
    state = State(seeded)
    text = (seeded.root / "topics/a.md").read_text()
    kept = "\n".join(line for line in text.splitlines() if "Two" not in line) + "\n"
    with pytest.raises(ValidationRejected) as err:
        write(seeded, "topics/a.md", kept)
    assert err.value.reason is ReasonCode.BLOCK_ID_LOST
    assert "Two" in err.value.rejected_text and "^id" in err.value.guidance
    state.assert_unchanged(seeded)


def test_uncited_prose_is_rejected_before_pruning(seeded: MemoryWorkspace) -> None:
    state = State(seeded)
    with pytest.raises(ValidationRejected) as err:
        write(seeded, "topics/a.md", "# Heading only\n\nSomething substantive but uncited.\n")
    assert err.value.reason is ReasonCode.INVALID_TOPIC_FORMAT
    assert err.value.rejected_text == "Something substantive but uncited."
    state.assert_unchanged(seeded)


def test_a_record_without_a_citation_is_rejected(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "2026-11-01: One [k](test/t1/m1).\n")
    (rid,) = ids_in((seeded.root / "topics/a.md").read_text())
    state = State(seeded)
    with pytest.raises(ValidationRejected) as err:
        write(seeded, "topics/a.md", f"2026-11-01: One, citation dropped. ^{rid}\n")
    assert err.value.reason is ReasonCode.INVALID_TOPIC_FORMAT
    state.assert_unchanged(seeded)


@pytest.mark.parametrize(
    "text",
    [
        "Fact [k](test/t1/m99).\n",
        "Fact [k](nope/none/zero).\n",
        "Fact[^x].\n\n[^x]: [k](../sources/test/e5/t1/m404.md#source-m404)\n",
        "Fact[^x].\n\n[^x]: [k](../sources/test/e5/t1/m1.md#source-m2)\n",
        "Fact[^x].\n\n[^x]: [k](../sources/test/e5/t1.md#source-m404)\n",  # a conversation file, no such message
    ],
)
def test_citing_a_missing_source_is_rejected(seeded: MemoryWorkspace, text: str) -> None:
    state = State(seeded)
    with pytest.raises(ValidationRejected) as err:
        write(seeded, "topics/a.md", text)
    assert err.value.reason is ReasonCode.INVALID_SOURCE
    state.assert_unchanged(seeded)


def test_invented_block_ids_are_rejected(seeded: MemoryWorkspace) -> None:
    state = State(seeded)
    with pytest.raises(ValidationRejected) as err:
        write(seeded, "topics/a.md", "Fact [k](test/t1/m1). ^my-own-id\n")
    assert err.value.reason is ReasonCode.INVALID_TOPIC_FORMAT and "runtime" in err.value.guidance
    state.assert_unchanged(seeded)


def test_a_block_id_in_two_places_is_rejected(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "Fact [k](test/t1/m1).\n")
    text = (seeded.root / "topics/a.md").read_text()
    state = State(seeded)
    with pytest.raises(ValidationRejected) as err:
        write(seeded, "topics/b.md", text)
    assert "more than once" in err.value.message
    state.assert_unchanged(seeded)


def test_block_links_must_target_existing_records(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "Fact [k](test/t1/m1).\n")
    (target,) = ids_in((seeded.root / "topics/a.md").read_text())
    write(seeded, "topics/b.md", f"See [[topics/a#^{target}]] [k](test/t1/m2).\n")
    relations = json.loads((seeded.root / "relations.json").read_text())
    assert relations["edges"][0]["to"] == target
    state = State(seeded)
    with pytest.raises(ValidationRejected) as err:
        write(seeded, "topics/c.md", "See [[topics/a#^m-000000000000]] [k](test/t1/m2).\n")
    assert err.value.reason is ReasonCode.DANGLING_LINK
    state.assert_unchanged(seeded)


def test_a_link_to_a_record_whose_topic_the_same_change_rewrites_is_kept(seeded: MemoryWorkspace) -> None:
    """The target is in the change's own new text (the topic holding it is rewritten in the same change, the
    record keeping its ID): the link resolves."""
    write(seeded, "topics/a.md", "# A\n\nFact [k](test/t1/m1).\n")
    (target,) = ids_in((seeded.root / "topics/a.md").read_text())
    seeded.apply_changes(
        [
            TopicChange("topics/a.md", "update", f"# A\n\nFact, reworded [k](test/t1/m1). ^{target}\n"),
            TopicChange("topics/b.md", "create", f"See [[topics/a#^{target}]] [k](test/t1/m2).\n"),
        ],
        message="reword and link",
    )
    relations = json.loads((seeded.root / "relations.json").read_text())
    assert [edge["to"] for edge in relations["edges"]] == [target]


def test_deleting_two_records_one_record_links_to_names_the_first_of_them(seeded: MemoryWorkspace) -> None:
    """The refusal names one deleted record the kept one links to: the first by ID, whatever order the links
    are written in."""
    write(seeded, "topics/a.md", "Fact one [k](test/t1/m1).\n\nFact two [k](test/t1/m2).\n")
    first, second = sorted(ids_in((seeded.root / "topics/a.md").read_text()))
    write(seeded, "topics/b.md", f"See [[topics/a#^{second}]] and [[topics/a#^{first}]] [k](test/t1/m3).\n")
    (linker,) = ids_in((seeded.root / "topics/b.md").read_text())
    state = State(seeded)
    with pytest.raises(ValidationRejected, match=rf"deleting \^{first} would leave a dangling link from \^{linker}"):
        seeded.apply_changes([TopicChange("topics/a.md", "delete")], message="delete a")
    state.assert_unchanged(seeded)


def test_deleting_a_linked_record_is_rejected_until_the_link_goes_too(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "Fact [k](test/t1/m1).\n")
    (target,) = ids_in((seeded.root / "topics/a.md").read_text())
    write(seeded, "topics/b.md", f"See [[topics/a#^{target}]] [k](test/t1/m2).\n")
    state = State(seeded)
    with pytest.raises(ValidationRejected) as err:
        seeded.apply_changes([TopicChange("topics/a.md", "delete")], message="delete a")
    assert err.value.reason is ReasonCode.DANGLING_LINK
    state.assert_unchanged(seeded)
    (source_id,) = ids_in((seeded.root / "topics/b.md").read_text())
    result = seeded.apply_changes(
        [
            TopicChange("topics/a.md", "delete"),
            TopicChange("topics/b.md", "update", f"See nothing [k](test/t1/m2). ^{source_id}\n"),
        ],
        message="delete a and its link",
    )
    assert "topics/a.md" in result.changed_files and not (seeded.root / "topics/a.md").exists()


def test_explicit_deletion_of_an_unknown_id_is_not_found(seeded: MemoryWorkspace) -> None:
    with pytest.raises(NotFound):
        seeded.transact(lambda stage: None, message="x", deletions=["m-000000000000"])


def test_empty_sections_and_topics_are_pruned(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "# Keep\n\nFact [k](test/t1/m1).\n\n# Empty\n\n## Also empty\n")
    text = (seeded.root / "topics/a.md").read_text()
    assert "# Empty" not in text and "Also empty" not in text and "# Keep" in text
    state = State(seeded)
    result = write(seeded, "topics/b.md", "# Nothing here\n\n---\n")
    assert result.changed_files == ()  # type: ignore[attr-defined]
    assert not (seeded.root / "topics/b.md").exists()
    state.assert_unchanged(seeded)


def test_unused_evidence_definitions_are_removed(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "Fact [k](test/t1/m1).\n\nOther [o](test/t1/m2).\n")
    text = (seeded.root / "topics/a.md").read_text()
    (first, second) = ids_in(text)
    kept = [block for block in text.split("\n\n") if "Other" not in block]
    rewritten = "\n\n".join(kept).replace(f"^{first}", f"^{first} ^{second}")
    write(seeded, "topics/a.md", rewritten)
    assert "m2.md" not in (seeded.root / "topics/a.md").read_text()


@pytest.mark.parametrize(
    "path",
    [
        "/etc/passwd",
        "topics/../sources/test/e5/t1/m1.md",
        "topics/a\x00.md",
        "topics/.git/config.md",
        "topics/.GIT/x.md",
        "topics/.gitattributes",
        "topics/.gitmodules",
        ".gitattributes",
        "sources/test/e5/t1/m1.md",
        "core.md",
        "timeline/2026/2026-11.md",
        "topics/a.txt",
        "topics\\a.md",
        "topics/./a.md",
        "topics//a.md",
        "topics/.hidden.md",
        "",
    ],
)
def test_paths_outside_topics_are_rejected_and_change_nothing(seeded: MemoryWorkspace, path: str) -> None:
    state = State(seeded)
    with pytest.raises(InvalidPath) as err:
        seeded.apply_changes([TopicChange(path, "create", "Fact [k](test/t1/m1).\n")], message="attack")
    assert err.value.reason is ReasonCode.INVALID_PATH
    state.assert_unchanged(seeded)


def _attack(kind: str, stage: Staging, outside: Path) -> None:
    target = stage.topics_dir / "evil.md"
    if kind == "symlink":
        target.symlink_to(outside)
    elif kind == "dir-symlink":
        (stage.topics_dir / "sub").symlink_to(outside.parent)
    elif kind == "hardlink":
        linked = stage.topics_dir / "orig.md"
        linked.write_text("Fact [k](test/t1/m1).\n")
        (stage.topics_dir / "evil.md").hardlink_to(linked)
    elif kind == "fifo":
        import os

        os.mkfifo(target)
    elif kind == "non-utf8":
        target.write_bytes(b"Fact \xff\xfe [k](test/t1/m1).\n")
    elif kind == "non-md":
        (stage.topics_dir / "notes.txt").write_text("hello")


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("symlink", ReasonCode.INVALID_PATH),
        ("dir-symlink", ReasonCode.INVALID_PATH),
        ("hardlink", ReasonCode.INVALID_PATH),
        ("fifo", ReasonCode.INVALID_PATH),
        ("non-md", ReasonCode.INVALID_PATH),
        ("non-utf8", ReasonCode.INVALID_TOPIC_FORMAT),
    ],
)
def test_file_type_attacks_in_a_materialized_staging_are_rejected(
    seeded: MemoryWorkspace, tmp_path: Path, kind: str, reason: ReasonCode
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("Fact [k](test/t1/m1).\n")
    state = State(seeded)
    with pytest.raises((InvalidPath, ValidationRejected)) as err:
        seeded.transact(lambda stage: _attack(kind, stage, outside), message="attack", staging=REAL_TREE)
    assert err.value.reason is reason
    state.assert_unchanged(seeded)
    assert outside.read_text() == "Fact [k](test/t1/m1).\n"


def test_a_same_size_in_place_edit_of_a_materialized_copy_is_seen(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "Fact one [k](test/t1/m1).\n")

    def edit(stage: Staging) -> None:
        target = stage.topics_dir / "a.md"
        data = target.read_bytes()
        with open(target, "r+b") as handle:  # same size, same instant, same inode
            handle.write(data.replace(b"one", b"two"))

    result = seeded.transact(edit, message="in place", staging=REAL_TREE)
    assert "topics/a.md" in result.changed_files
    assert "Fact two" in (seeded.root / "topics/a.md").read_text()


def test_staged_sources_hold_only_this_pass_and_are_read_only(ws: MemoryWorkspace) -> None:
    paths = ws.archive_sources([message(1), message(2)])
    seen: dict[str, object] = {}

    def edit(stage: Staging) -> None:
        staged = stage.root / ws.archive.stored_path(paths[0])
        seen["files"] = sorted(p.relative_to(stage.root).as_posix() for p in (stage.root / "sources").rglob("*.md"))
        seen["mode"] = staged.stat().st_mode & 0o777
        seen["dir_mode"] = staged.parent.stat().st_mode & 0o777

    ws.transact(edit, message="archive", appended_sources=paths)
    # Both messages are of one conversation: its file, once.
    assert seen == {"files": [ws.archive.stored_path(paths[0])], "mode": 0o400, "dir_mode": 0o500}


def test_a_non_root_writer_is_refused_by_the_filesystem(ws: MemoryWorkspace) -> None:
    import os
    import subprocess

    paths = ws.archive_sources([message(1)])
    outcome: dict[str, object] = {}

    def edit(stage: Staging) -> None:
        os.chmod(stage.root, 0o755)
        target = str(stage.root / ws.archive.stored_path(paths[0]))
        drop = (lambda: os.setuid(65534)) if os.geteuid() == 0 else None
        for verb, script in (("append", 'printf tamper >> "$1"'), ("create", 'printf x > "$(dirname "$1")/new.md"')):
            proc = subprocess.run(
                ["/bin/sh", "-c", script, "sh", target], preexec_fn=drop, capture_output=True, text=True
            )
            outcome[verb] = (proc.returncode != 0, "Permission denied" in proc.stderr)

    ws.transact(edit, message="archive", appended_sources=paths)
    assert outcome == {"append": (True, True), "create": (True, True)}
    assert ws.archive.read(paths[0]).text == "message number 1"


@pytest.mark.parametrize("tamper", ["modify", "add", "delete"])
def test_modifying_the_staged_archive_is_rejected(ws: MemoryWorkspace, tamper: str) -> None:
    paths = ws.archive_sources([message(1), message(2)])
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    state = State(ws)

    def edit(stage: Staging) -> None:
        target = stage.root / ws.archive.stored_path(paths[0])
        target.parent.chmod(0o755)
        target.chmod(0o644)
        if tamper == "modify":
            target.write_text("rewritten history")
        elif tamper == "add":
            (target.parent / "m99.md").write_text("forged")
        else:
            target.unlink()
        stage.write("topics/a.md", "Fact [k](test/t1/m1).\n")

    with pytest.raises(ValidationRejected) as err:
        ws.transact(edit, message="tamper", appended_sources=paths)
    assert err.value.reason is ReasonCode.SOURCES_MODIFIED
    state.assert_unchanged(ws)


def test_archiving_twice_is_byte_identical_and_append_only(ws: MemoryWorkspace) -> None:
    first = ws.archive_sources([message(1), message(2)])
    stored = ws.root / ws.archive.stored_path(first[0])
    before = stored.read_bytes()
    second = ws.archive_sources([message(1), message(2)])
    assert first == second
    assert stored.read_bytes() == before
    with pytest.raises(ValidationRejected) as err:
        ws.archive_sources([message(1, text="a different text for the same message")])
    assert err.value.reason is ReasonCode.INVALID_SOURCE
    assert stored.read_bytes() == before


def test_sources_carry_their_trust_state(ws: MemoryWorkspace) -> None:
    (path,) = ws.archive_sources([message(1, trust="pending")])
    assert ws.archive.read(path).trust == "pending"
    assert ws.archive.read(path).identity == "test/t1/m1"


def test_pre_install_runs_after_validation_and_its_failure_installs_nothing(seeded: MemoryWorkspace) -> None:
    calls: list[PreInstall] = []
    state = State(seeded)
    with pytest.raises(ValidationRejected):
        seeded.apply_changes(
            [TopicChange("topics/a.md", "create", "uncited\n")], message="bad", pre_install=calls.append
        )
    assert calls == []

    def boom(info: PreInstall) -> None:
        calls.append(info)
        raise RuntimeError("checkpoint store unavailable")

    with pytest.raises(PreInstallFailed) as err:
        seeded.apply_changes(
            [TopicChange("topics/a.md", "create", "Fact [k](test/t1/m1).\n")], message="x", pre_install=boom
        )
    assert err.value.retryable
    assert len(calls) == 1 and calls[0].previous_revision == state.revision
    assert "topics/a.md" in calls[0].changed_files
    state.assert_unchanged(seeded)
    result = seeded.apply_changes(
        [TopicChange("topics/a.md", "create", "Fact [k](test/t1/m1).\n")], message="x", pre_install=calls.append
    )
    assert calls[-1].revision == result.revision


def test_a_write_pass_is_fenced_by_its_pre_install_hook(seeded: MemoryWorkspace) -> None:
    """``write_pass`` is the write service's entry: its hook runs before the install, and a hook that refuses
    (a stale fencing token) installs nothing."""
    state = State(seeded)
    calls: list[PreInstall] = []

    def edit(stage: Staging) -> None:
        stage.write("topics/a.md", "Fact [k](test/t1/m1).\n")

    def stale(info: PreInstall) -> None:
        raise RevisionConflict("a newer holder took the pass lock")

    with pytest.raises(RevisionConflict):
        seeded.write_pass(edit, message="stale", pre_install=stale)
    state.assert_unchanged(seeded)
    result = seeded.write_pass(edit, message="fresh", pre_install=calls.append, staging=TOPIC_API)
    assert [c.revision for c in calls] == [result.revision] and "topics/a.md" in calls[0].changed_files


def test_a_stale_expected_revision_is_refused(seeded: MemoryWorkspace) -> None:
    old = seeded.revision
    write(seeded, "topics/a.md", "Fact [k](test/t1/m1).\n")
    state = State(seeded)
    with pytest.raises(RevisionConflict):
        seeded.apply_changes(
            [TopicChange("topics/b.md", "create", "Fact [k](test/t1/m2).\n")], message="x", expected_revision=old
        )
    state.assert_unchanged(seeded)


def test_an_install_between_a_transactions_baseline_and_its_install_is_a_conflict_not_a_lost_update(
    seeded: MemoryWorkspace,
) -> None:
    """The lock covers reading the baseline and installing, not the edit: another handle installs
    ``topics/b.md`` while this transaction's edit runs. Installing on the old baseline would leave
    ``b.md`` on disk outside the new tree; it is refused, and the other install stands whole."""
    other = MemoryWorkspace(seeded.root)
    try:

        def edit(stage: Staging) -> None:
            stage.write("topics/a.md", "Fact [k](test/t1/m1).\n")
            other.apply_changes([TopicChange("topics/b.md", "create", "Fact [k](test/t1/m2).\n")], message="b")

        with pytest.raises(RevisionConflict, match="another writer installed"):
            seeded.transact(edit, message="a")
    finally:
        other.close()
    assert not (seeded.root / "topics" / "a.md").exists()
    assert "topics/b.md" in seeded.snapshot().topics
    assert git_tree_of_files(seeded.root) == seeded.revision, "the files are the revision: nothing outside it"
    assert git_log(seeded.root)[0].split(" ", 2)[2] == "b" and git_log(seeded.root)[0].split()[1] == seeded.revision


def test_create_update_delete_arguments_are_checked(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/a.md", "Fact [k](test/t1/m1).\n")
    state = State(seeded)
    with pytest.raises(InvalidArgument):
        seeded.apply_changes([TopicChange("topics/a.md", "create", "x [k](test/t1/m1)\n")], message="x")
    with pytest.raises(NotFound):
        seeded.apply_changes([TopicChange("topics/b.md", "update", "x [k](test/t1/m1)\n")], message="x")
    with pytest.raises(NotFound):
        seeded.apply_changes([TopicChange("topics/b.md", "delete")], message="x")
    with pytest.raises(InvalidArgument):
        seeded.apply_changes([TopicChange("topics/b.md", "create")], message="x")
    with pytest.raises(InvalidArgument):
        seeded.transact(lambda stage: None, message=" ")
    state.assert_unchanged(seeded)


def test_each_transaction_is_one_commit_whose_tree_is_the_installed_tree(seeded: MemoryWorkspace) -> None:
    before = len(git_log(seeded.root))
    result = write(seeded, "topics/a.md", "Fact [k](test/t1/m1).\n")
    log = git_log(seeded.root)
    assert len(log) == before + 1
    commit, tree, subject = log[0].split(" ", 2)
    assert commit == result.commit and tree == result.revision == seeded.revision  # type: ignore[attr-defined]
    assert subject == "edit topics/a.md"
    assert git_tree_of_files(seeded.root) == tree


def test_a_git_failure_after_install_does_not_pretend_a_rollback(seeded: MemoryWorkspace) -> None:
    # A real refusal: git's reference-transaction hook aborts the ref update.
    hook = seeded.root / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text('#!/bin/sh\n[ "$1" = prepared ] && exit 1\nexit 0\n')
    hook.chmod(0o755)
    try:
        result = write(seeded, "topics/a.md", "Fact [k](test/t1/m1).\n")
    finally:
        hook.unlink()
    assert result.memory_committed and not result.git_committed  # type: ignore[attr-defined]
    assert result.reason is ReasonCode.GIT_COMMIT_FAILED and result.reason.retryable  # type: ignore[attr-defined]
    assert (seeded.root / "topics/a.md").exists()
    assert git_tree_of_files(seeded.root) == seeded.revision
    reopened = MemoryWorkspace(seeded.root)
    head_tree = git_log(seeded.root)[0].split(" ")[1]
    assert head_tree == reopened.revision == result.revision  # type: ignore[attr-defined]
    reopened.close()


def test_views_follow_record_dates_and_equal_a_rebuild(seeded: MemoryWorkspace) -> None:
    write(
        seeded,
        "topics/a.md",
        "2024: Year only [k](test/t1/m1).\n\n2025-03: Month only [k](test/t1/m2).\n\n"
        "2025-03-14: A day [k](test/t1/m3).\n\nUndated [k](test/t1/m4).\n",
    )
    root = seeded.root
    assert "Year only" in (root / "timeline/2024/2024.md").read_text()
    assert "Month only" in (root / "timeline/2025/2025-03.md").read_text()
    assert "A day" not in (root / "timeline/2025/2025-03.md").read_text()
    assert (root / "timeline/2025/2025-03/2025-03-14.md").read_text().startswith("# 2025-03-14\n\n- A day")
    assert "Undated" not in "".join(p.read_text() for p in (root / "timeline").rglob("*.md"))
    assert (root / "recent.md").read_text().count("\n- ") == 4
    expected = render_all(seeded.snapshot().topics.values(), 50, 2000)
    actual = {p: b for p, b in tree_bytes(root).items() if not p.startswith(("topics/", "sources/"))}
    assert actual == expected


def test_a_workspace_with_month_timeline_files_is_rendered_in_day_files_by_its_next_transaction(
    seeded: MemoryWorkspace,
) -> None:
    """Before one file per day, a month's file held its days as sections: the next write renders every
    Timeline file again, so no day stays behind in a month file the new layout no longer writes."""
    from scriptorium.workspace.transaction import Plan

    write(seeded, "topics/a.md", "2025-03-14: A day [k](test/t1/m3).\n\n2025-04-02: Another [k](test/t1/m4).\n")
    base = seeded.snapshot()
    legacy = Plan(
        base,
        base,
        {
            "timeline/2025/2025-03.md": b"# 2025-03\n\n## 2025-03-14\n\n- A day\n",
            "timeline/2025/2025-03/2025-03-14.md": None,
        },
    )
    seeded._apply(legacy, "the month layout", None)
    assert (seeded.root / "timeline/2025/2025-03.md").exists()

    write(seeded, "topics/b.md", "2025-04-03: Unrelated day [k](test/t1/m1).\n")
    root = seeded.root
    assert not (root / "timeline/2025/2025-03.md").exists()
    assert "A day" in (root / "timeline/2025/2025-03/2025-03-14.md").read_text()
    expected = render_all(seeded.snapshot().topics.values(), 50, 2000)
    actual = {p: b for p, b in tree_bytes(root).items() if not p.startswith(("topics/", "sources/"))}
    assert actual == expected


def test_recent_lists_the_newest_records_in_creation_order(tmp_path: Path) -> None:
    from scriptorium.workspace import WorkspaceConfig

    ws = MemoryWorkspace.init(tmp_path / "memory", WorkspaceConfig(recent_limit=2))
    paths = ws.archive_sources([message(n) for n in range(3)])
    for n in range(3):
        ws.apply_changes([TopicChange(f"topics/t{n}.md", "create", f"Fact {n} [k](test/t1/m{n}).\n")], message="x")
    recent = (ws.root / "recent.md").read_text()
    assert "Fact 2" in recent and "Fact 1" in recent and "Fact 0" not in recent
    assert recent.index("Fact 2") < recent.index("Fact 1")
    assert paths


def test_core_is_rendered_within_budget_and_never_blocks_a_write(seeded: MemoryWorkspace) -> None:
    paragraphs = [
        f"Rule {n}: " + " ".join(f"word{n}x{k}" for k in range(60)) + f" [k](test/t1/m{n % 10})." for n in range(150)
    ]
    result = write(seeded, "topics/core.md", "# Core\n\n" + "\n\n".join(paragraphs) + "\n")
    from scriptorium.tokencount import count_tokens

    source_tokens = count_tokens((seeded.root / "topics/core.md").read_text())
    assert source_tokens > 11_883
    core = (seeded.root / "core.md").read_text()
    assert count_tokens(core) <= 2000
    assert result.core_omitted_ids  # type: ignore[attr-defined]
    rendered_ids = set(ids_in(core))
    all_ids = set(ids_in((seeded.root / "topics/core.md").read_text()))
    assert rendered_ids and rendered_ids < all_ids
    assert rendered_ids | set(result.core_omitted_ids) == all_ids  # type: ignore[attr-defined]
    other = write(seeded, "topics/unrelated.md", "Unrelated [k](test/t1/m1).\n")
    assert other.git_committed and "topics/unrelated.md" in other.changed_files  # type: ignore[attr-defined]


def test_special_token_text_is_counted_not_refused(seeded: MemoryWorkspace) -> None:
    write(seeded, "topics/core.md", "Says <|endoftext|> literally [k](test/t1/m1).\n")
    assert "<|endoftext|>" in (seeded.root / "core.md").read_text()


def test_trees_are_written_as_gitpython_and_git_write_them(tmp_path: Path) -> None:
    """The direct tree serializer gives GitPython's bytes, and git itself reads them back."""
    import subprocess
    from io import BytesIO

    from git.objects.fun import tree_to_stream

    from scriptorium.workspace.gitstore import MODE_DIR, MODE_FILE, GitStore, _sort_key

    git = GitStore.create(tmp_path / "repo.git")
    blob = git.write_blob(b"hello\n")
    sub = git.write_tree({"a.md": (MODE_FILE, blob)})
    entries = {
        "b.md": (MODE_FILE, blob),
        "a": (MODE_DIR, sub),
        "a.md": (MODE_FILE, blob),
        "a-b.md": (MODE_FILE, blob),
        "ü-名前.md": (MODE_FILE, blob),
    }
    sha = git.write_tree(entries)
    expected = BytesIO()
    ordered = sorted(entries.items(), key=_sort_key)
    tree_to_stream([(bytes.fromhex(s), mode, name) for name, (mode, s) in ordered], expected.write)
    assert git._read(sha, b"tree") == expected.getvalue()
    git.sync_objects()
    git_dir = f"--git-dir={tmp_path / 'repo.git'}"
    listing = subprocess.run(
        ["git", git_dir, "ls-tree", "-r", "-z", "--name-only", sha], capture_output=True, text=True, check=True
    ).stdout.split("\0")
    assert sorted(filter(None, listing)) == sorted(["a-b.md", "a.md", "a/a.md", "b.md", "ü-名前.md"])
    subprocess.run(
        ["git", f"--git-dir={tmp_path / 'repo.git'}", "fsck", "--strict", sha], check=True, capture_output=True
    )
    git.close()


def test_a_large_tree_built_on_one_serialized_before_has_the_bytes_of_a_fresh_serialization(
    tmp_path: Path,
) -> None:
    """Large trees are patched from their base's sorted serialization: additions, deletions, a file
    replaced and a name turning from a file into a folder give exactly what sorting afresh gives."""
    import subprocess

    from scriptorium.workspace.gitstore import SERIAL_MIN_ENTRIES, GitStore

    git = GitStore.create(tmp_path / "repo.git")
    names = [f"m{n:05d}-{'x' * (n % 7)}.md" for n in range(2 * SERIAL_MIN_ENTRIES + 40)]
    base = git.build_tree(git.write_tree({}), {f"s/{name}": name.encode() for name in names[::2]})
    changes: dict[str, bytes | None] = {f"s/{name}": name.encode() for name in names[1::2]}  # interleaved
    changes |= {f"s/{names[0]}": None, f"s/{names[2]}": b"other bytes"}  # one deleted, one replaced
    changes |= {f"s/{names[4]}": None, f"s/{names[4]}/inside.md": b"now a folder"}
    patched = git.build_tree(base, changes)
    git.sync_objects()  # another store reads what this one wrote once it is in a pack
    fresh = GitStore(tmp_path / "repo.git")  # no serialization cached: sorts every entry
    expected = fresh.build_tree(base, changes)
    assert patched == expected
    folder = git.tree_entries(patched)["s"][1]
    assert git._read(folder, b"tree") == fresh._read(fresh.tree_entries(expected)["s"][1], b"tree")
    git.sync_objects()
    subprocess.run(["git", f"--git-dir={tmp_path / 'repo.git'}", "fsck", "--strict", patched], check=True)
    git.close()
    fresh.close()


def test_splitting_block_ids_off_a_line_agrees_with_the_pattern() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from scriptorium.workspace.blocks import _split_record_line_by_pattern, split_record_line

    pieces = st.sampled_from(["^m-1", "^a_b", " ", "\t", "^", "x", "-", "^^", "word", "  ", "^id ", "é", "[^e]"])
    lines = st.lists(pieces, max_size=12).map("".join)

    @settings(max_examples=3000, deadline=None)
    @given(lines)
    def agree(line: str) -> None:
        assert split_record_line(line) == _split_record_line_by_pattern(line), repr(line)

    agree()
    for line in ["Fact. ^m-1", "^only", "Fact ^a ^b  ", "x^a", "Fact  ^a  ^b", "Fact ^a\t^b", "no ids", ""]:
        assert split_record_line(line) == _split_record_line_by_pattern(line), repr(line)


def test_a_dry_runs_diff_is_a_unified_diff_of_every_changed_topic(seeded: MemoryWorkspace) -> None:
    """What a dry run shows the owner: one unified diff per changed topic, every line whole, a deleted topic's
    new side ``/dev/null`` and a created one's old side; and nothing installed."""
    write(seeded, "topics/a.md", "# A\n\nTea at four [k](test/t1/m1).\n")
    write(seeded, "topics/gone.md", "# Gone\n\nBoats in Kiel [k](test/t1/m2).\n")
    kept = (seeded.root / "topics/a.md").read_text()
    state = State(seeded)
    changes = [
        TopicChange("topics/a.md", "update", kept.replace("Tea at four", "Tea at five")),
        TopicChange("topics/gone.md", "delete"),
        TopicChange("topics/new.md", "create", "# New\n\nCoffee at nine [k](test/t1/m3).\n"),
    ]
    result = seeded.apply_changes(changes, message="preview", dry_run=True)
    diff = result.diff
    assert result.dry_run and diff is not None
    lines = diff.splitlines(keepends=True)
    assert all(line.endswith("\n") for line in lines), "every line whole: the diff applies as it is"
    headers = [line.rstrip("\n") for line in lines if line.startswith(("--- ", "+++ "))]
    assert headers == [
        "--- a/topics/a.md",
        "+++ b/topics/a.md",
        "--- a/topics/gone.md",
        "+++ /dev/null",
        "--- /dev/null",
        "+++ b/topics/new.md",
    ]
    assert any(line.startswith("+Tea at five") for line in lines)
    assert any(line.startswith("-Tea at four") for line in lines)
    state.assert_unchanged(seeded)


def test_a_change_lists_and_writes_only_the_files_whose_bytes_it_changes(seeded: MemoryWorkspace) -> None:
    """The views are rendered again on every change, but only those whose bytes differ are written: a text
    edit of an undated record moves its topic and the recent list, never the relations or the core."""
    write(seeded, "topics/a.md", "# A\n\nTea at four [k](test/t1/m1).\n")
    text = (seeded.root / "topics/a.md").read_text()
    result = write(seeded, "topics/a.md", text.replace("four", "five"))
    assert result.changed_files == ("recent.md", "topics/a.md")  # type: ignore[attr-defined]


def test_one_change_cannot_put_a_block_id_in_two_topics(seeded: MemoryWorkspace) -> None:
    """The same ^id in two topics of one change (its owner among them) is refused like an ID already used
    elsewhere: a record lives in one place."""
    write(seeded, "topics/a.md", "# A\n\nFact [k](test/t1/m1).\n")
    text = (seeded.root / "topics/a.md").read_text()
    state = State(seeded)
    copy = TopicChange("topics/c.md", "create", text.replace("# A", "# C"))
    with pytest.raises(ValidationRejected) as err:
        edited = TopicChange("topics/a.md", "update", text.replace("# A", "# A, edited"))  # its owner changes too
        seeded.apply_changes([edited, copy], message="copy")
    assert "more than once" in err.value.message
    state.assert_unchanged(seeded)


def test_a_tombstone_must_be_the_forgotten_sources_own_and_hold_no_text(seeded: MemoryWorkspace) -> None:
    """What forget hands the transaction is checked: a tombstone replaces the committed source at its own
    path, is marked forgotten and keeps no text; anything else is refused and nothing changes."""
    from dataclasses import replace

    from scriptorium.workspace.sources import tombstone

    stone = tombstone(message(1), "2026-12-01T00:00:00Z", "owner", "asked")
    state = State(seeded)
    refused = {
        "another source's path": {"sources/test/e5/t1/m2.md": stone},
        "a path before it": {"sources/test/e5/t1/m0.md": stone},
        "text kept": {stone.path: replace(stone, text="message number 1")},
        "not marked forgotten": {stone.path: replace(stone, forgotten=None)},
    }
    for why, tombstones in refused.items():
        with pytest.raises(InvalidArgument, match="tombstone keeps the source's identity"):
            seeded.rewrite_sources(SourceRewrites.forget(tombstones), message=why)
        state.assert_unchanged(seeded)
    with pytest.raises(NotFound):
        seeded.rewrite_sources(SourceRewrites.forget({"sources/test/e5/t1/m77.md": stone}), message="none")
    state.assert_unchanged(seeded)
    seeded.rewrite_sources(SourceRewrites.forget({stone.path: stone}), message="forget")
    assert b"message number 1" not in (seeded.root / seeded.archive.stored_path(stone.path)).read_bytes(), (
        "its own tombstone is taken"
    )
    assert seeded.archive.read(stone.path).forgotten is not None


def test_a_redaction_keeps_some_text_and_never_touches_a_forgotten_source(seeded: MemoryWorkspace) -> None:
    """What redact hands the transaction is checked too: a redacted copy with no text left is refused, and so
    is any redaction of a forgotten source (its tombstone has no text to redact); nothing changes."""
    from dataclasses import replace

    from scriptorium.workspace.sources import tombstone

    source = seeded.archive.read("sources/test/e5/t1/m1.md")
    state = State(seeded)
    with pytest.raises(InvalidArgument, match="a redacted source keeps everything of the source but its text"):
        seeded.rewrite_sources(SourceRewrites.redact({source.path: replace(source, text="")}), message="empty")
    state.assert_unchanged(seeded)
    stone = tombstone(message(2), "2026-12-01T00:00:00Z", "owner", "asked")
    seeded.rewrite_sources(SourceRewrites.forget({stone.path: stone}), message="forget m2")
    state = State(seeded)
    forgotten = seeded.archive.read(stone.path)
    redacted = {stone.path: replace(forgotten, text="[redacted]")}
    with pytest.raises(InvalidArgument, match="a forgotten one has none to redact"):
        seeded.rewrite_sources(SourceRewrites.redact(redacted), message="redact a tombstone")
    state.assert_unchanged(seeded)


def test_only_rewrite_sources_rewrites_a_committed_source_and_the_core_transact_takes_no_rewrites(
    seeded: MemoryWorkspace,
) -> None:
    """The core transaction has no forget, redaction or fencing input, and its edit leaves every committed source
    as it was; forget's tombstones go through ``rewrite_sources``, which installs them with its edit's topic
    changes in one commit."""
    import inspect

    from scriptorium.workspace.sources import tombstone

    core = set(inspect.signature(MemoryWorkspace.transact).parameters)
    assert {"edit", "message", "appended_sources", "expected_revision", "dry_run"} <= core
    assert not core & {"tombstones", "redactions", "pre_install", "materialize", "show_sources"}, core
    sources = {p: seeded.archive.entry(p) for p in ("sources/test/e5/t1/m1.md", "sources/test/e5/t1/m2.md")}

    def cite(path: str, n: int) -> Callable[[Staging], None]:
        return lambda stage: stage.write(path, f"# T\n\nFact {n} [k](test/t1/m{n}).\n")

    plain = seeded.transact(cite("topics/a.md", 1), message="core")
    assert plain.changed and not [p for p in plain.changed_files if p.startswith("sources/")]
    assert {p: seeded.archive.entry(p) for p in sources} == sources, "the core touched no source"

    stone = tombstone(message(2), "2026-12-01T00:00:00Z", "owner", "asked")
    commits = len(git_log(seeded.root))
    forget = SourceRewrites.forget({stone.path: stone})
    forgot = seeded.rewrite_sources(forget, edit=cite("topics/b.md", 3), message="forget m2")
    assert {seeded.archive.stored_path(stone.path), "topics/b.md"} <= set(forgot.changed_files)
    assert len(git_log(seeded.root)) == commits + 1, "the tombstone and the edit are one commit"
    assert seeded.archive.read(stone.path).forgotten is not None and not seeded.archive.read(stone.path).text
    assert seeded.archive.entry("sources/test/e5/t1/m1.md") == sources["sources/test/e5/t1/m1.md"]


def test_a_source_archived_by_an_earlier_pass_and_first_cited_now_is_committed_with_the_citation(
    seeded: MemoryWorkspace,
) -> None:
    """A source can be archived and left out of every commit (a pass that archived it and then failed): the
    change that first cites it commits it, so the commit's tree never cites a file it lacks."""
    with seeded.lock():
        (path,) = seeded.archive_sources([message(20)])
    write(seeded, "topics/x.md", "# X\n\nFact twenty [k](test/t1/m20).\n")
    assert path in committed_sources(seeded), "the cited source is in the commit"


def test_a_source_first_cited_beside_a_deleted_topic_is_committed_with_the_citation(seeded: MemoryWorkspace) -> None:
    """The cited sources are gathered from every topic the change writes, past one it deletes (``topics/a.md``
    sorts, and is read, before ``topics/b.md``)."""
    write(seeded, "topics/a.md", "# A\n\nFact one [k](test/t1/m1).\n")
    with seeded.lock():
        (path,) = seeded.archive_sources([message(20)])
    seeded.apply_changes(
        [
            TopicChange("topics/a.md", "delete"),
            TopicChange("topics/b.md", "create", "# B\n\nFact twenty [k](test/t1/m20).\n"),
        ],
        message="replace a by b",
    )
    assert path in committed_sources(seeded), "the cited source is in the commit"


def test_rebuilding_the_views_renders_again_the_timeline_and_core_views_out_of_date(seeded: MemoryWorkspace) -> None:
    """A Timeline file whose day is still called for but whose text is not what the topics render (a view
    from an older release): ``rebuild_views`` renders every one of them again, not only those the layout
    adds or drops, and the core view though the core did not change."""
    from scriptorium.workspace.paths import CORE_VIEW
    from scriptorium.workspace.transaction import Plan

    write(seeded, "topics/a.md", "2025-03-14: A day [k](test/t1/m3).\n\n2025-04-02: Another [k](test/t1/m4).\n")
    day = "timeline/2025/2025-03/2025-03-14.md"
    rendered = (seeded.root / day).read_bytes()
    base = seeded.snapshot()
    core = (seeded.root / CORE_VIEW).read_bytes()
    older = {day: b"# 2025-03-14\n\n- as an older release wrote it\n", CORE_VIEW: b"# Core, older\n"}
    seeded._apply(Plan(base, base, older), "older views", None)
    assert (seeded.root / day).read_bytes() != rendered and (seeded.root / CORE_VIEW).read_bytes() != core
    seeded.rebuild_views()
    assert (seeded.root / day).read_bytes() == rendered
    assert (seeded.root / CORE_VIEW).read_bytes() == core, "the core view is rendered again too"
    expected = render_all(seeded.snapshot().topics.values(), 50, 2000)
    actual = {p: b for p, b in tree_bytes(seeded.root).items() if not p.startswith(("topics/", "sources/"))}
    assert actual == expected


def _parsed(action: str) -> str:
    """``action`` as a request parsed from JSON carries it: a string object of its own, not the literal."""
    parsed = json.loads(json.dumps(action))
    assert parsed == action and parsed is not action
    return str(parsed)


def test_actions_parsed_from_a_request_act_as_their_literals(seeded: MemoryWorkspace) -> None:
    """The API hands the transaction actions parsed from JSON: equal to "create", "update", "delete", never
    the same objects. Each still does what it names, and refuses what it refuses."""
    seeded.apply_changes([TopicChange("topics/x.md", _parsed("create"), "# X\n\nOne [k](test/t1/m1).\n")], message="c")
    state = State(seeded)
    with pytest.raises(InvalidArgument, match="already exists"):
        seeded.apply_changes(
            [TopicChange("topics/x.md", _parsed("create"), "# X\n\nTwo [k](test/t1/m2).\n")], message="c"
        )
    with pytest.raises(NotFound):
        seeded.apply_changes(
            [TopicChange("topics/y.md", _parsed("update"), "# Y\n\nTwo [k](test/t1/m2).\n")], message="u"
        )
    state.assert_unchanged(seeded)
    seeded.apply_changes([TopicChange("topics/x.md", _parsed("delete"))], message="d")
    assert "topics/x.md" not in seeded.topics()


def _forget_m2(ws: MemoryWorkspace) -> None:
    from scriptorium.workspace.sources import tombstone

    stone = tombstone(message(2), "2026-12-01T00:00:00Z", "owner", "asked")
    ws.rewrite_sources(SourceRewrites.forget({stone.path: stone}), message="forget m2")


def test_every_changed_topic_is_checked_for_forgotten_citations_after_a_deleted_one(seeded: MemoryWorkspace) -> None:
    """One change deletes a topic and, in a topic after it, newly cites a forgotten source: refused (the check
    moves past the deleted topic instead of stopping there)."""
    write(seeded, "topics/a.md", "# A\n\nOne [k](test/t1/m1).\n")
    write(seeded, "topics/b.md", "# B\n\nThree [k](test/t1/m3).\n")
    (three,) = ids_in((seeded.root / "topics/b.md").read_text())
    _forget_m2(seeded)
    state = State(seeded)
    changes = [
        TopicChange("topics/a.md", "delete"),
        TopicChange("topics/b.md", "update", f"# B\n\nThree [k](test/t1/m3). ^{three}\n\nSecret [k](test/t1/m2).\n"),
    ]
    with pytest.raises(ValidationRejected) as refused:
        seeded.apply_changes(changes, message="back")
    assert refused.value.reason is ReasonCode.INVALID_SOURCE
    state.assert_unchanged(seeded)


def test_a_record_that_adds_a_forgotten_source_beside_one_it_cited_is_refused(seeded: MemoryWorkspace) -> None:
    """The record cited m1 already; its new citation of forgotten m2 comes after m1: each citation is checked,
    not only those before the first one the record had."""
    write(seeded, "topics/a.md", "# A\n\nOne [k](test/t1/m1).\n")
    record_id = ids_in((seeded.root / "topics/a.md").read_text())[0]
    _forget_m2(seeded)
    state = State(seeded)
    text = f"# A\n\nOne [k](test/t1/m1) and more [k](test/t1/m2). ^{record_id}\n"
    with pytest.raises(ValidationRejected) as refused:
        write(seeded, "topics/a.md", text)
    assert refused.value.reason is ReasonCode.INVALID_SOURCE
    state.assert_unchanged(seeded)


def test_a_record_moved_to_another_topic_keeps_a_citation_it_had_of_a_forgotten_source(
    seeded: MemoryWorkspace,
) -> None:
    """The rule is about citations a change adds: a record that cited m2 before m2 was forgotten may move with
    that citation (the forget itself rewrites such records); only a record newly citing m2 is refused."""
    write(seeded, "topics/a.md", "# A\n\nSecret [k](test/t1/m2).\n")
    (secret,) = ids_in((seeded.root / "topics/a.md").read_text())
    _forget_m2(seeded)
    moved = (seeded.root / "topics/a.md").read_text().replace("# A", "# B")
    seeded.apply_changes(
        [TopicChange("topics/a.md", "delete"), TopicChange("topics/b.md", "create", moved)], message="move"
    )
    assert seeded.snapshot().record(secret) is not None
    assert seeded.snapshot().record(secret).topic == "topics/b.md"  # type: ignore[union-attr]


@pytest.mark.parametrize("show_sources", [True, False])
def test_a_pass_naming_a_source_missing_from_the_archive_is_refused_and_changes_nothing(
    seeded: MemoryWorkspace, show_sources: bool
) -> None:
    """Refused as a citation of a source not archived, whether the pass stages its sources for the writer to
    read (the staging refuses it) or not (the plan does), and no staging folder is left behind."""
    state = State(seeded)
    missing = "sources/test/e5/t1/m404.md"
    with pytest.raises(ValidationRejected, match=r"source sources/test/e5/t1/m404\.md is not in the archive") as err:
        staging = StagingOptions(show_sources=show_sources)
        seeded.transact(lambda stage: None, message="archive", appended_sources=[missing], staging=staging)
    assert err.value.reason is ReasonCode.INVALID_SOURCE and err.value.rejected_text == missing
    state.assert_unchanged(seeded)
    assert not list(Path(tempfile.gettempdir()).glob(f"{staging_prefix(seeded.id)}*")), "no staging folder left"


def test_a_change_losing_many_records_names_how_many_and_the_first_ten(seeded: MemoryWorkspace) -> None:
    """The refusal counts every record lost, names the first ten by ID, and quotes them all."""
    write(seeded, "topics/a.md", "# A\n\n" + "".join(f"Fact {n} [k](test/t1/m{n % 10}).\n\n" for n in range(12)))
    lost = sorted(ids_in((seeded.root / "topics/a.md").read_text()))
    assert len(lost) == 12
    state = State(seeded)
    with pytest.raises(ValidationRejected) as err:
        write(seeded, "topics/a.md", "# A\n\nFact new [k](test/t1/m1).\n")
    assert err.value.reason is ReasonCode.BLOCK_ID_LOST
    named = ", ".join(f"^{bid}" for bid in lost[:10])
    assert err.value.message == f"12 existing record(s) disappeared: {named}"
    assert err.value.quotes == tuple(lost)
    state.assert_unchanged(seeded)


def test_every_uncommitted_source_a_change_cites_is_committed_after_committed_ones(seeded: MemoryWorkspace) -> None:
    """A record cites a committed source first, then one archived and never committed: the second still
    goes into the commit (the search for new sources moves past a committed one)."""
    with seeded.lock():
        (path,) = seeded.archive_sources([message(20)])
    write(seeded, "topics/x.md", "# X\n\nOne [k](test/t1/m1) and twenty [k](test/t1/m20).\n")
    assert path in committed_sources(seeded), "the cited source is in the commit"


def test_a_change_rewriting_a_topic_unchanged_beside_one_it_changes_installs_the_changed_one(
    seeded: MemoryWorkspace,
) -> None:
    """A writer may hand back a topic byte for byte as it was: it is left out of the change, and the topics
    after it (in path order) are still planned."""
    write(seeded, "topics/a.md", "# A\n\nTea at four [k](test/t1/m1).\n")
    write(seeded, "topics/b.md", "# B\n\nCoffee at nine [k](test/t1/m2).\n")
    a_text = (seeded.root / "topics/a.md").read_text()
    b_text = (seeded.root / "topics/b.md").read_text()
    result = seeded.apply_changes(
        [
            TopicChange("topics/a.md", "update", a_text),
            TopicChange("topics/b.md", "update", b_text.replace("nine", "ten")),
        ],
        message="one of two",
    )
    assert "topics/a.md" not in result.changed_files  # type: ignore[attr-defined]
    assert "topics/b.md" in result.changed_files  # type: ignore[attr-defined]
    assert "Coffee at ten" in (seeded.root / "topics/b.md").read_text()
    assert (seeded.root / "topics/a.md").read_text() == a_text
