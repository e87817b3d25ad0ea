"""Property: random sequences of the four operations, valid and invalid, against a reference model."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from scriptorium.changes.structured import (
    Citation,
    CreateRecord,
    DeleteRecord,
    Destination,
    MoveRecords,
    UpdateRecord,
    update_records,
)
from scriptorium.errors import ScriptoriumError
from scriptorium.workspace import MemoryWorkspace
from tests.conftest import State, message
from tests.helpers.worlds import copied_to

TOPICS = ["topics/a.md", "topics/b.md", "topics/sub/c.md"]
CHAINS: list[tuple[str, ...]] = [(), ("People",), ("People", "Alice"), ("Projects",)]
WORDS = st.lists(
    st.sampled_from(["tea", "coffee", "git", "redis", "alice", "bob", "fork", "branch"]), min_size=1, max_size=4
)
TIMES = st.sampled_from([None, "undated", "2025", "2026-11", "2026-11-02"])
Section = tuple[str, tuple[str, ...]]


def archived(folder: Path) -> None:
    """The world every example starts from: six archived sources and no topic."""
    ws = MemoryWorkspace.init(folder / "memory")
    with ws.lock():
        paths = ws.archive_sources([message(n) for n in range(6)])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.close()


class ChangesMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="scriptorium-changes-"))
        # Built once per process and copied: each example gets a workspace of its own.
        self.ws = MemoryWorkspace(copied_to("structured-properties", archived, self.tmp / "world") / "memory")
        self.sections: dict[Section, list[str]] = {}
        self.content: dict[str, str] = {}

    def teardown(self) -> None:
        self.ws.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- model helpers ---------------------------------------------------------

    def _where(self, rid: str) -> Section:
        return next(section for section, ids in self.sections.items() if rid in ids)

    def _ids(self) -> list[str]:
        return sorted(self.content)

    def _place(self, section: Section, rids: list[str], position: str, anchor: str | None) -> None:
        order = self.sections.setdefault(section, [])
        if position == "start":
            at = 0
        elif position == "end":
            at = len(order)
        else:
            assert anchor is not None
            at = order.index(anchor) + (1 if position == "after" else 0)
        order[at:at] = rids

    def _run(self, changes: list[object], valid: bool) -> list[str] | None:
        before = State(self.ws)
        try:
            result = update_records(self.ws, changes, message="property")  # type: ignore[arg-type]
        except ScriptoriumError:
            assert not valid, f"a valid batch was refused: {changes}"
            before.assert_unchanged(self.ws)
            return None
        assert valid, f"an invalid batch was accepted: {changes}"
        return list(result.created_ids)

    def _destination(self, data: st.DataObject, exclude: set[str]) -> tuple[Destination, Section]:
        topic = data.draw(st.sampled_from(TOPICS))
        chain = data.draw(st.sampled_from(CHAINS))
        section = (topic, chain)
        anchors = [rid for rid in self.sections.get(section, []) if rid not in exclude]
        position = data.draw(st.sampled_from(["start", "end", "before", "after"] if anchors else ["start", "end"]))
        anchor = data.draw(st.sampled_from(anchors)) if position in ("before", "after") else None
        return Destination(topic, chain, position, anchor), section  # type: ignore[arg-type]

    # -- rules -------------------------------------------------------------------

    @rule(data=st.data(), words=WORDS, time=TIMES, source=st.integers(0, 5))
    def create(self, data: st.DataObject, words: list[str], time: str | None, source: int) -> None:
        destination, section = self._destination(data, set())
        text = " ".join(words) + "."
        change = CreateRecord(text, time, (Citation(f"test/t1/m{source}", f"kw {source}"),), destination)
        created = self._run([change], valid=True)
        assert created is not None and len(created) == 1
        self._place(section, created, destination.position, destination.anchor_memory_id)
        self.content[created[0]] = text

    @precondition(lambda self: self.content)
    @rule(data=st.data(), words=WORDS, time=TIMES)
    def update(self, data: st.DataObject, words: list[str], time: str | None) -> None:
        rid = data.draw(st.sampled_from(self._ids()))
        text = " ".join(words) + "!"
        self._run([UpdateRecord(rid, text, time, (Citation("test/t1/m1", "upd"),))], valid=True)
        self.content[rid] = text

    @precondition(lambda self: self.content)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(self._ids()))
        self._run([DeleteRecord(rid)], valid=True)
        self.sections[self._where(rid)].remove(rid)
        del self.content[rid]

    @precondition(lambda self: self.content)
    @rule(data=st.data())
    def move(self, data: st.DataObject) -> None:
        rids = data.draw(st.lists(st.sampled_from(self._ids()), min_size=1, max_size=3, unique=True))
        destination, section = self._destination(data, set(rids))
        self._run([MoveRecords(tuple(rids), destination)], valid=True)
        for rid in rids:
            self.sections[self._where(rid)].remove(rid)
        self._place(section, rids, destination.position, destination.anchor_memory_id)

    @precondition(lambda self: self.content)
    @rule(data=st.data(), kind=st.sampled_from(["anchor-in-move-set", "delete-and-move", "twice", "unknown"]))
    def invalid(self, data: st.DataObject, kind: str) -> None:
        rid = data.draw(st.sampled_from(self._ids()))
        topic, chain = self._where(rid)
        if kind == "anchor-in-move-set":
            changes: list[object] = [MoveRecords((rid,), Destination(topic, chain, "after", rid))]
        elif kind == "delete-and-move":
            changes = [DeleteRecord(rid), MoveRecords((rid,), Destination("topics/a.md"))]
        elif kind == "twice":
            changes = [UpdateRecord(rid, "x.", None, (Citation("test/t1/m1", "k"),)), DeleteRecord(rid)]
        else:
            changes = [DeleteRecord("m-zzzzzzzzzzzz")]
        self._run(changes, valid=False)

    # -- invariants ----------------------------------------------------------------

    @invariant()
    def the_workspace_equals_the_model(self) -> None:
        snap = self.ws.snapshot()
        actual: dict[Section, list[str]] = {}
        for topic in snap.topics.values():
            for record in topic.records:
                actual.setdefault((topic.path, record.headings), []).append(record.memory_id)
        expected = {section: ids for section, ids in self.sections.items() if ids}
        assert actual == expected
        for rid, text in self.content.items():
            record = snap.record(rid)
            assert record is not None and record.text.startswith(text)
        assert set(snap.id_to_topic) == set(self.content), "no lost or extra block IDs"


ChangesMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=12, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_random_structured_changes = ChangesMachine.TestCase
