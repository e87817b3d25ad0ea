"""Structured memory changes: the four operations alone and together, and every rejection rule."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from scriptorium.changes.new_sources import NewSource
from scriptorium.changes.structured import (
    Citation,
    CreateRecord,
    DeleteRecord,
    Destination,
    MoveRecords,
    UpdateRecord,
    update_records,
)
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import InvalidArgument, NotFound, ReasonCode, ScriptoriumError, ValidationRejected
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import State

CITE = (Citation("test/t1/m1", "first fact"),)


def ids(ws: MemoryWorkspace, path: str) -> list[str]:
    return [r.memory_id for r in ws.snapshot().topics[path].records]


def create(ws: MemoryWorkspace, content: str, path: str = "topics/a.md", **dest: object) -> str:
    result = update_records(
        ws,
        [CreateRecord(content, "2026-11-02", CITE, Destination(path, **dest))],
        message="create",  # type: ignore[arg-type]
    )
    (created,) = result.created_ids
    return created


@pytest.fixture
def three(seeded: MemoryWorkspace) -> tuple[MemoryWorkspace, list[str]]:
    made = [create(seeded, f"Fact {n}.", headings=("People", "Alice")) for n in range(3)]
    return seeded, made


def test_create_places_the_record_under_its_headings_with_a_verbatim_label(seeded: MemoryWorkspace) -> None:
    rid = create(seeded, "Alice likes tea.", headings=("People", "Alice"))
    text = (seeded.root / "topics/a.md").read_text()
    assert text.startswith("# People\n\n## Alice\n\n2026-11-02: Alice likes tea. [^e-")
    assert f"^{rid}" in text and "[first fact](../sources/test/e5/t1.md#source-m1)" in text
    record = seeded.snapshot().record(rid)
    assert record is not None and record.headings == ("People", "Alice") and record.date == "2026-11-02"


def test_positions_start_end_before_after(three: tuple[MemoryWorkspace, list[str]]) -> None:
    ws, (a, b, c) = three
    first = create(ws, "Goes first.", headings=("People", "Alice"), position="start")
    last = create(ws, "Goes last.", headings=("People", "Alice"), position="end")
    before_b = create(ws, "Before b.", headings=("People", "Alice"), position="before", anchor_memory_id=b)
    after_b = create(ws, "After b.", headings=("People", "Alice"), position="after", anchor_memory_id=b)
    assert ids(ws, "topics/a.md") == [first, a, before_b, b, after_b, c, last]


def test_undated_records_and_null_time(seeded: MemoryWorkspace) -> None:
    result = update_records(
        seeded,
        [
            CreateRecord("No date here.", "undated", CITE, Destination("topics/a.md")),
            CreateRecord("Nor here.", None, CITE, Destination("topics/a.md")),
        ],
        message="undated",
    )
    dates = {seeded.snapshot().record(r).date for r in result.created_ids}  # type: ignore[union-attr]
    assert dates == {None}


def test_update_keeps_the_id_and_position_and_replaces_the_evidence(three: tuple[MemoryWorkspace, list[str]]) -> None:
    ws, (a, b, c) = three
    update_records(
        ws, [UpdateRecord(b, "Fact one, revised.", "2025", (Citation("test/t1/m2", "revision"),))], message="update"
    )
    assert ids(ws, "topics/a.md") == [a, b, c]
    record = ws.snapshot().record(b)
    assert record is not None and record.text.startswith("Fact one, revised.") and record.date == "2025"
    text = (ws.root / "topics/a.md").read_text()
    assert "[revision](../sources/test/e5/t1.md#source-m2)" in text


def test_delete_removes_the_record_and_later_lookups_say_not_found(three: tuple[MemoryWorkspace, list[str]]) -> None:
    ws, (a, b, c) = three
    update_records(ws, [DeleteRecord(b)], message="delete")
    assert ids(ws, "topics/a.md") == [a, c]
    with pytest.raises(NotFound):
        update_records(ws, [DeleteRecord(b)], message="again")


def test_deleting_a_linked_record_is_rejected(three: tuple[MemoryWorkspace, list[str]]) -> None:
    ws, (a, _b, _c) = three
    ws.apply_changes(
        [TopicChange("topics/links.md", "create", f"See [[topics/a#^{a}]] [k](test/t1/m3).\n")], message="x"
    )
    state = State(ws)
    with pytest.raises(ValidationRejected) as err:
        update_records(ws, [DeleteRecord(a)], message="delete")
    assert err.value.reason is ReasonCode.DANGLING_LINK
    state.assert_unchanged(ws)


def test_move_reorders_and_crosses_topics_keeping_ids_evidence_and_creation_order(
    three: tuple[MemoryWorkspace, list[str]],
) -> None:
    ws, (a, b, c) = three
    update_records(ws, [MoveRecords((c, a), Destination("topics/a.md", ("People", "Alice"), "start"))], message="m")
    assert ids(ws, "topics/a.md") == [c, a, b]
    evidence_before = {label for label in ws.snapshot().topics["topics/a.md"].footnotes}
    result = update_records(ws, [MoveRecords((a, b, c), Destination("topics/deep/b.md", ("Moved",)))], message="m")
    assert "topics/a.md" not in ws.topics(), "a topic left without records is removed"
    assert ids(ws, "topics/deep/b.md") == [a, b, c]
    moved = ws.snapshot().topics["topics/deep/b.md"]
    assert set(moved.footnotes) == evidence_before, "evidence IDs survive the move"
    assert all(n.source is not None and n.source_path == "sources/test/e5/t1/m1.md" for n in moved.footnotes.values())
    recent = (ws.root / "recent.md").read_text()
    assert recent.index("Fact 2") < recent.index("Fact 1") < recent.index("Fact 0"), "creation order is kept"
    assert result.git_committed


def test_a_semantic_merge_is_update_delete_and_move(seeded: MemoryWorkspace) -> None:
    one = create(seeded, "Alice drinks tea.", "topics/x.md")
    two = create(seeded, "Alice likes green tea.", "topics/y.md")
    update_records(
        seeded,
        [
            UpdateRecord(one, "Alice drinks green tea.", "2026-11-02", (*CITE, Citation("test/t1/m2", "green"))),
            DeleteRecord(two),
            MoveRecords((one,), Destination("topics/people/alice.md", ("Drinks",))),
        ],
        message="merge",
    )
    assert ids(seeded, "topics/people/alice.md") == [one]
    assert set(seeded.topics()) == {"topics/people/alice.md"}


@pytest.mark.parametrize(
    ("build", "error", "needle"),
    [
        (
            lambda a, b, c: [MoveRecords((a,), Destination("topics/a.md", ("People", "Alice"), "before", a))],
            InvalidArgument,
            "part of the records being moved",
        ),
        (
            lambda a, b, c: [CreateRecord("x", None, CITE, Destination("topics/z.md", (), "after", a))],
            InvalidArgument,
            "not in topics/z.md",
        ),
        (lambda a, b, c: [UpdateRecord(a, "x", None, CITE), DeleteRecord(a)], InvalidArgument, "more than one content"),
        (
            lambda a, b, c: [DeleteRecord(a), MoveRecords((a,), Destination("topics/z.md"))],
            InvalidArgument,
            "both deleted and moved",
        ),
        (
            lambda a, b, c: [
                MoveRecords((a,), Destination("topics/z.md")),
                MoveRecords((a,), Destination("topics/y.md")),
            ],
            InvalidArgument,
            "moved more than once",
        ),
        (lambda a, b, c: [MoveRecords((), Destination("topics/z.md"))], InvalidArgument, "at least one"),
        (lambda a, b, c: [DeleteRecord("m-000000000000")], NotFound, "no record"),
        (
            lambda a, b, c: [CreateRecord("x", None, CITE, Destination("topics/z.md", (), "middle"))],  # type: ignore[arg-type]
            InvalidArgument,
            "position",
        ),
        (
            lambda a, b, c: [CreateRecord("x", None, CITE, Destination("topics/z.md", (), "before"))],
            InvalidArgument,
            "anchor",
        ),
        (lambda a, b, c: [CreateRecord("x", None, CITE, Destination("../etc/z.md"))], ScriptoriumError, "INVALID_PATH"),
        (lambda a, b, c: [CreateRecord("", None, CITE, Destination("topics/z.md"))], InvalidArgument, "empty"),
        (lambda a, b, c: [CreateRecord("a\n\nb", None, CITE, Destination("topics/z.md"))], InvalidArgument, "blank"),
        (lambda a, b, c: [CreateRecord("x", "2026-13", CITE, Destination("topics/z.md"))], InvalidArgument, "time"),
        (lambda a, b, c: [CreateRecord("x", None, (), Destination("topics/z.md"))], InvalidArgument, "source"),
        (
            lambda a, b, c: [CreateRecord("x", None, (Citation("test/t1/m1", " "),), Destination("topics/z.md"))],
            InvalidArgument,
            "label",
        ),
        (
            lambda a, b, c: [CreateRecord("x", None, (Citation("new-source-1", "k"),), Destination("topics/z.md"))],
            InvalidArgument,
            "new-source",
        ),
        (
            lambda a, b, c: [CreateRecord("x", None, (Citation("test/t1/m404", "k"),), Destination("topics/z.md"))],
            ValidationRejected,
            "not in the archive",
        ),
    ],
)
def test_every_rule_rejects_the_whole_batch_and_changes_nothing(
    three: tuple[MemoryWorkspace, list[str]], build: object, error: type[Exception], needle: str
) -> None:
    ws, (a, b, c) = three
    state = State(ws)
    changes = build(a, b, c)  # type: ignore[operator]
    with pytest.raises(error) as err:
        update_records(ws, [CreateRecord("Valid too.", None, CITE, Destination("topics/ok.md")), *changes], message="x")
    assert needle in str(err.value)
    state.assert_unchanged(ws)


def test_record_changes_with_a_forget_install_the_tombstone_and_never_take_new_sources(
    three: tuple[MemoryWorkspace, list[str]],
) -> None:
    """``rewrites`` sends the changes through the workspace's ``rewrite_sources``: the record goes and the
    source becomes its tombstone in one commit. A forget archives nothing, so rewrites beside appended
    sources are refused before anything changes."""
    from scriptorium.workspace.sources import tombstone
    from scriptorium.workspace.transaction import SourceRewrites

    ws, (a, _b, _c) = three
    source = ws.archive.read("sources/test/e5/t1/m1.md")
    rewrites = SourceRewrites.forget({source.path: tombstone(source, "2026-12-01T00:00:00Z", "owner", "asked")})
    state = State(ws)
    with pytest.raises(InvalidArgument, match="archives no source"):
        update_records(ws, [DeleteRecord(a)], message="x", rewrites=rewrites, appended_sources=[source.path])
    state.assert_unchanged(ws)
    result = update_records(ws, [DeleteRecord(a)], message="forget", rewrites=rewrites)
    assert ws.archive.stored_path(source.path) in result.changed_files and ws.snapshot().record(a) is None
    assert ws.archive.read(source.path).forgotten is not None and not ws.archive.read(source.path).text


def test_a_merged_paragraph_moves_and_deletes_only_whole(seeded: MemoryWorkspace) -> None:
    one = create(seeded, "Tea.", "topics/x.md")
    two = create(seeded, "More tea.", "topics/x.md")
    text = (seeded.root / "topics/x.md").read_text()
    merged = re.sub(rf" \^{two}\n", "\n", text).replace(f"^{one}", f"^{one} ^{two}")
    merged = "\n".join(line for line in merged.split("\n") if not line.startswith("2026-11-02: More tea."))
    seeded.apply_changes([TopicChange("topics/x.md", "update", merged)], message="merge by hand")
    state = State(seeded)
    for changes in (
        [MoveRecords((two,), Destination("topics/y.md"))],
        [MoveRecords((two, one), Destination("topics/y.md"))],
        [DeleteRecord(one)],
    ):
        with pytest.raises(InvalidArgument):
            update_records(seeded, changes, message="split")  # type: ignore[arg-type]
        state.assert_unchanged(seeded)
    update_records(seeded, [MoveRecords((one, two), Destination("topics/y.md"))], message="whole")
    assert [r.block_ids for r in seeded.snapshot().topics["topics/y.md"].records] == [(one, two)]


def test_an_evidence_label_that_means_another_source_is_a_conflict(seeded: MemoryWorkspace) -> None:
    one = create(seeded, "Tea.", "topics/x.md")
    label = next(iter(seeded.snapshot().topics["topics/x.md"].footnotes))
    other = f"Other [^{label}].\n\n[^{label}]: [first fact](../sources/test/e5/t1/m5.md#source-m5)\n"
    seeded.apply_changes([TopicChange("topics/y.md", "create", other)], message="same label, other source")
    state = State(seeded)
    with pytest.raises(InvalidArgument, match="evidence label"):
        update_records(seeded, [MoveRecords((one,), Destination("topics/y.md"))], message="conflict")
    state.assert_unchanged(seeded)


def test_new_sources_are_archived_with_runtime_ids_and_cited(seeded: MemoryWorkspace) -> None:
    change = CreateRecord(
        "The user's boiler code is 4417.", None, (Citation("new-source-1", "code"),), Destination("topics/home.md")
    )
    result = update_memory(
        seeded,
        memory_changes=[change],
        new_sources=[NewSource("new-source-1", "Boiler code: 4417", "user")],
        message="x",
    )
    (conversation,) = [p for p in result.changed_files if p.startswith("sources/")]
    assert conversation == "sources/scriptorium/57/owner.md", "the owner's notes: one conversation file"
    (path,) = seeded.archive.entries_of(conversation)
    assert "new-source" not in path
    source = seeded.archive.read(path)
    assert (source.text, source.role, source.trust) == ("Boiler code: 4417", "user", "trusted")
    text = (seeded.root / "topics/home.md").read_text()
    assert f"[code](../sources/scriptorium/57/owner.md#source-{source.message})" in text
    from_model = update_memory(
        seeded,
        memory_changes=[replace(change, content="The shed key is under the pot.")],
        new_sources=[NewSource("new-source-1", "shed key under the pot")],
        origin="model",
        message="model edit",
    )
    (conversation,) = [p for p in from_model.changed_files if p.startswith("sources/")]
    (model_path,) = seeded.archive.entries_of(conversation)
    assert conversation == "sources/scriptorium/1d/model.md" and seeded.archive.read(model_path).trust == "pending"


@pytest.mark.parametrize(
    ("sources", "cited", "why"),
    [
        ([], "new-source-1", "not declared"),
        ([NewSource("new-source-1", "a"), NewSource("new-source-1", "b")], "new-source-1", "declared twice"),
        ([NewSource("new-source-1", "a"), NewSource("new-source-2", "b")], "new-source-1", "never cited"),
        ([NewSource("new-source-../x", "a")], "new-source-../x", "must look like"),
        ([NewSource("new-source-1", "  ")], "new-source-1", "needs text"),
        ([NewSource("new-source-1", "a", "system")], "new-source-1", "role"),
    ],
)
def test_bad_new_sources_change_nothing(
    seeded: MemoryWorkspace, sources: list[NewSource], cited: str, why: str
) -> None:
    before = State(seeded)
    change = CreateRecord("x", None, (Citation(cited, "k"),), Destination("topics/z.md"))
    with pytest.raises(InvalidArgument, match=why):
        update_memory(seeded, memory_changes=[change], new_sources=sources, message="x")
    before.assert_unchanged(seeded)


def test_a_refused_transaction_takes_its_new_sources_back(seeded: MemoryWorkspace) -> None:
    before = State(seeded)
    bad = CreateRecord("x", "2026-13-45", (Citation("new-source-1", "k"),), Destination("topics/z.md"))
    with pytest.raises(InvalidArgument):
        update_memory(seeded, memory_changes=[bad], new_sources=[NewSource("new-source-1", "text")], message="x")
    good = CreateRecord("x", None, (Citation("new-source-1", "k"),), Destination("topics/z.md"))
    dangling = UpdateRecord("m-000000000000", "y", None, (Citation("test/t1/m1", "k"),))
    with pytest.raises(NotFound):
        update_memory(
            seeded, memory_changes=[good, dangling], new_sources=[NewSource("new-source-1", "text")], message="x"
        )
    before.assert_unchanged(seeded)
    assert not (seeded.root / "sources" / "scriptorium").exists()
