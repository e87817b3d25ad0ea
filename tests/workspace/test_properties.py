"""Property: random sequences of valid and invalid edits never lose IDs, touch sources, or leave views stale."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from scriptorium.errors import ScriptoriumError
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.staging import Staging
from scriptorium.workspace.views import render_all, render_timeline_records, timeline_groups
from tests.checks import head_tree, tree_problems
from tests.conftest import State, git_tree_of_files, message, tree_bytes
from tests.helpers.worlds import copied_to

RECORD = re.compile(r"^(.*?) \^(m-[0-9a-z]{12}(?: \^m-[0-9a-z]{12})*)$", re.M)
WORDS = st.lists(
    st.sampled_from(["tea", "coffee", "redis", "git", "fork", "branch", "topic", "alice", "bob"]),
    min_size=1,
    max_size=5,
)
DATES = st.sampled_from(["", "2024: ", "2025-02: ", "2025-02-14: ", "2026-11-30: "])
TOPICS = st.sampled_from(["topics/a.md", "topics/b.md", "topics/sub/c.md", "topics/core.md"])
N_SOURCES = 8


def seeded(folder: Path) -> None:
    """The world every example starts from: N_SOURCES archived sources and two topics of two records each;
    beside the workspace, the archived paths and the seed's block IDs as the calls returned them."""
    ws = MemoryWorkspace.init(folder / "memory")
    with ws.lock():
        paths = ws.archive_sources([message(n) for n in range(N_SOURCES)])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    seed = ws.apply_changes(
        [
            TopicChange("topics/a.md", "create", "# A\n\n2025-02: one [k](test/t1/m1).\n\ntwo [k](test/t1/m2).\n"),
            TopicChange("topics/b.md", "create", "2026-11-30: three [k](test/t1/m3).\n\nfour [k](test/t1/m4).\n"),
        ],
        message="seed",
    )
    ws.close()
    (folder / "seeded.json").write_text(json.dumps({"sources": paths, "ids": sorted(seed.created_ids)}))


class WorkspaceMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="scriptorium-prop-"))
        # Built once per process and copied: building it is a dozen git commits, each example's own.
        copied_to("workspace-properties", seeded, self.tmp / "world")
        self.ws = MemoryWorkspace(self.tmp / "world" / "memory")
        made = json.loads((self.tmp / "world" / "seeded.json").read_text())
        self.sources = {p: self.ws.archive.entry(p) for p in made["sources"]}
        self.ids: set[str] = set(made["ids"])

    def teardown(self) -> None:
        self.ws.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -------------------------------------------------------------

    def _text(self, path: str) -> str:
        return (self.ws.root / path).read_text() if (self.ws.root / path).exists() else ""

    def _attempt(self, changes: list[TopicChange], deleted: set[str] | None = None, valid: bool | None = None) -> None:
        before = State(self.ws)
        try:
            result = self.ws.apply_changes(changes, message="property edit")
        except ScriptoriumError:
            assert valid is not True, "a valid edit was rejected"
            before.assert_unchanged(self.ws)
            return
        assert valid is not False, "an invalid edit was accepted"
        self.ids = (self.ids - (deleted or set())) | set(result.created_ids)

    def _records(self, path: str) -> list[tuple[str, str]]:
        return [(m.group(1), m.group(2)) for m in RECORD.finditer(self._text(path))]

    # -- rules ---------------------------------------------------------------

    @rule(path=TOPICS, date=DATES, words=WORDS, source=st.integers(0, N_SOURCES - 1))
    def append_cited_record(self, path: str, date: str, words: list[str], source: int) -> None:
        text = self._text(path) + f"\n{date}{' '.join(words)} [kw {source}](test/t1/m{source}).\n"
        action = "update" if (self.ws.root / path).exists() else "create"
        self._attempt([TopicChange(path, action, text)], valid=True)

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), words=WORDS)
    def rewrite_a_record(self, data: st.DataObject, words: list[str]) -> None:
        path = data.draw(st.sampled_from(sorted(self.ws.topics())))
        records = self._records(path)
        if not records:
            return
        body, ids = data.draw(st.sampled_from(records))
        new_body = re.sub(
            r"^(\d{4}(?:-\d\d){0,2}: )?[^\[]*", lambda m: (m.group(1) or "") + " ".join(words) + " ", body
        )
        text = self._text(path).replace(f"{body} ^{ids}", f"{new_body} ^{ids}", 1)
        self._attempt([TopicChange(path, "update", text)], valid=True)

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), destination=TOPICS)
    def move_a_record(self, data: st.DataObject, destination: str) -> None:
        path = data.draw(st.sampled_from(sorted(self.ws.topics())))
        records = self._records(path)
        if not records or destination == path:
            return
        body, ids = data.draw(st.sampled_from(records))
        # Footnotes move with the record: cite the same source again inline at the destination.
        source = re.search(r"\[\^([^\]]+)\]", body)
        assert source is not None
        definition = re.search(
            rf"^\[\^{re.escape(source.group(1))}\]: \[(.*)\]\(.*sources/test/e5/t1\.md#source-(m\d+)\)",
            self._text(path),
            re.M,
        )
        assert definition is not None
        moved = re.sub(r"\[\^[^\]]+\]", "", body) + f" [{definition.group(1)}](test/t1/{definition.group(2)}). ^{ids}"
        src_text = self._text(path).replace(f"{body} ^{ids}", "", 1)
        dst_exists = (self.ws.root / destination).exists()
        dst_text = self._text(destination) + "\n" + moved + "\n"
        remaining = bool(RECORD.search(src_text))
        changes = [TopicChange(destination, "update" if dst_exists else "create", dst_text)]
        changes.insert(0, TopicChange(path, "update", src_text) if remaining else TopicChange(path, "delete"))
        self._attempt(changes, valid=True)

    @precondition(lambda self: self.ids)
    @rule(data=st.data())
    def drop_a_record_silently(self, data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(sorted(self.ws.topics())))
        records = self._records(path)
        if len(records) < 2:
            return
        body, ids = data.draw(st.sampled_from(records))
        self._attempt([TopicChange(path, "update", self._text(path).replace(f"{body} ^{ids}", "", 1))], valid=False)

    @precondition(lambda self: self.ids)
    @rule(data=st.data())
    def delete_a_topic(self, data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(sorted(self.ws.topics())))
        gone = {bid for _, ids in self._records(path) for bid in ids.replace("^", "").split()}
        self._attempt([TopicChange(path, "delete")], deleted=gone, valid=None)

    @rule(path=TOPICS, words=WORDS)
    def add_uncited_prose(self, path: str, words: list[str]) -> None:
        text = self._text(path) + "\n" + " ".join(words) + "\n"
        action = "update" if (self.ws.root / path).exists() else "create"
        self._attempt([TopicChange(path, action, text)], valid=False)

    @rule(path=TOPICS, missing=st.integers(N_SOURCES, 99))
    def cite_a_missing_source(self, path: str, missing: int) -> None:
        text = self._text(path) + f"\nA claim [kw](test/t1/m{missing}).\n"
        action = "update" if (self.ws.root / path).exists() else "create"
        self._attempt([TopicChange(path, action, text)], valid=False)

    @precondition(lambda self: self.ids)
    @rule(data=st.data(), path=TOPICS, dangling=st.booleans())
    def link_to_a_record(self, data: st.DataObject, path: str, dangling: bool) -> None:
        target = "m-zzzzzzzzzzzz" if dangling else data.draw(st.sampled_from(sorted(self.ids)))
        text = self._text(path) + f"\nSee [[topics/x#^{target}]] [kw](test/t1/m0).\n"
        action = "update" if (self.ws.root / path).exists() else "create"
        self._attempt([TopicChange(path, action, text)], valid=not dangling)

    @rule()
    def tamper_with_staged_sources(self) -> None:
        before = State(self.ws)
        path = sorted(self.sources)[0]

        def edit(stage: Staging) -> None:
            staged = stage.root / self.ws.archive.stored_path(path)
            staged.parent.chmod(0o755)
            staged.chmod(0o644)
            staged.write_text("forged")

        try:
            self.ws.transact(edit, message="tamper", appended_sources=[path])
        except ScriptoriumError:
            before.assert_unchanged(self.ws)
        else:
            raise AssertionError("tampering with sources was accepted")

    # -- invariants ------------------------------------------------------------

    @invariant()
    def block_ids_are_never_silently_lost(self) -> None:
        snap = self.ws.snapshot()
        assert set(snap.id_to_topic) == self.ids

    @invariant()
    def sources_are_never_modified(self) -> None:
        for path, data in self.sources.items():
            assert self.ws.archive.entry(path) == data

    @invariant()
    def views_equal_a_rebuild_from_scratch(self) -> None:
        expected = render_all(self.ws.snapshot().topics.values(), 50, 2000)
        actual = {p: b for p, b in tree_bytes(self.ws.root).items() if not p.startswith(("topics/", "sources/"))}
        assert actual == expected
        # The Timeline is rendered from each topic's cached lines; the reference sorts the records afresh.
        topics = list(self.ws.snapshot().topics.values())
        for path, group in timeline_groups(topics).items():
            records = [record for topic in group for record in topic.by_timeline[path]]
            assert actual[path] == render_timeline_records(path, records)

    @invariant()
    def git_head_records_the_installed_tree(self) -> None:
        """HEAD's tree (read from git, not state.json) is the installed files', and state.json agrees."""
        assert tree_problems(self.ws.root) == []
        assert git_tree_of_files(self.ws.root) == head_tree(self.ws.root) == self.ws.revision


WorkspaceMachine.TestCase.settings = settings(
    max_examples=22,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_random_edit_sequences = WorkspaceMachine.TestCase
