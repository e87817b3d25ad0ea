"""``scriptorium.changes.update.update``: three request formats, one transaction, one result shape."""

from __future__ import annotations

import difflib

import pytest

from scriptorium.changes.structured import Citation, CreateRecord, Destination
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import InvalidArgument, InvalidPatch, InvalidPath, ReasonCode, ValidationRejected
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import State


def diff(path: str, old: str, new: str) -> str:
    a = f"a/{path}" if old else "/dev/null"
    lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True), a, f"b/{path}")
    return "".join(lines)


@pytest.fixture
def ws(seeded: MemoryWorkspace) -> MemoryWorkspace:
    update_memory(
        seeded,
        changes=[TopicChange("topics/a.md", "create", "# A\n\n2026-11-01: Tea [tea](test/t1/m1).\n")],
        message="seed",
    )
    return seeded


def test_the_three_formats_return_the_same_result_shape(ws: MemoryWorkspace) -> None:
    structured = update_memory(
        ws,
        memory_changes=[CreateRecord("Coffee.", None, (Citation("test/t1/m2", "coffee"),), Destination("topics/b.md"))],
        message="structured",
    )
    whole = update_memory(
        ws, changes=[TopicChange("topics/c.md", "create", "Juice [juice](test/t1/m3).\n")], message="whole"
    )
    old = (ws.root / "topics/a.md").read_text()
    patched = update_memory(ws, patch=diff("topics/a.md", old, old.replace("Tea", "Green tea")), message="patch")
    for result in (structured, whole, patched):
        assert result.git_committed and result.memory_committed and result.changed_files
        assert set(result.to_dict()) >= {
            "revision",
            "changed_files",
            "created_ids",
            "created_evidence_ids",
            "memory_committed",
            "git_committed",
            "commit",
        }
    assert "Green tea" in (ws.root / "topics/a.md").read_text()
    assert patched.revision == ws.revision and patched.previous_revision == whole.revision


@pytest.mark.parametrize("kwargs", [{}, {"patch": "x", "changes": []}])
def test_exactly_one_format_is_required(ws: MemoryWorkspace, kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidArgument, match="exactly one"):
        update_memory(ws, message="x", **kwargs)  # type: ignore[arg-type]


def test_a_patch_can_create_and_delete_topics(ws: MemoryWorkspace) -> None:
    created = update_memory(ws, patch=diff("topics/new.md", "", "Water [water](test/t1/m4).\n"), message="create")
    assert created.created_ids and "topics/new.md" in ws.topics()
    old = (ws.root / "topics/new.md").read_text()
    removal = "".join(difflib.unified_diff(old.splitlines(True), [], "a/topics/new.md", "/dev/null"))
    removal = removal.replace(
        "--- a/topics/new.md",
        "diff --git a/topics/new.md b/topics/new.md\ndeleted file mode 100644\n--- a/topics/new.md",
        1,
    )
    update_memory(ws, patch=removal, message="delete")
    assert "topics/new.md" not in ws.topics()


@pytest.mark.parametrize(
    ("make", "error", "reason"),
    [
        (lambda old: diff("sources/test/e5/t1/m1.md", "x\n", "y\n"), InvalidPath, ReasonCode.INVALID_PATH),
        (lambda old: diff("core.md", "x\n", "y\n"), InvalidPath, ReasonCode.INVALID_PATH),
        (lambda old: diff("topics/../x.md", "", "Fact [k](test/t1/m1).\n"), InvalidPath, ReasonCode.INVALID_PATH),
        (
            lambda old: diff("topics/a.md", old.replace("Tea", "Toast"), "nothing\n"),
            InvalidPatch,
            ReasonCode.INVALID_PATCH,
        ),
        (lambda old: "this is not a diff", InvalidPatch, ReasonCode.INVALID_PATCH),
        (lambda old: "", InvalidPatch, ReasonCode.INVALID_PATCH),
        (
            lambda old: diff("topics/a.md", old, old + "\nUncited prose.\n"),
            ValidationRejected,
            ReasonCode.INVALID_TOPIC_FORMAT,
        ),
        (
            lambda old: (
                "diff --git a/topics/b.bin b/topics/b.bin\nnew file mode 100644\nBinary files /dev/null and "
                "b/topics/b.bin differ\n"
            ),
            InvalidPatch,
            ReasonCode.INVALID_PATCH,
        ),
    ],
)
def test_bad_patches_change_nothing(
    ws: MemoryWorkspace, make: object, error: type[Exception], reason: ReasonCode
) -> None:
    state = State(ws)
    old = (ws.root / "topics/a.md").read_text()
    with pytest.raises(error) as err:
        update_memory(ws, patch=make(old), message="bad")  # type: ignore[operator]
    assert err.value.reason is reason  # type: ignore[attr-defined]
    state.assert_unchanged(ws)
