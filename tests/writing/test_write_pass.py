"""The write pass against spec 04's observed failures, on SQLite and PostgreSQL, with the verbatim writer."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from scriptorium.errors import ReasonCode
from scriptorium.sessions import MARKER_KEY, Node, NodeKind, SessionStore
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writer_interface import Batch, Repair, TopicFiles
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.outcomes import Failed, NothingDue, Pending, Written
from scriptorium.writing.service import WriteService, WriteSettings
from tests.checks import by_message, records_citing, tree_problems
from tests.conftest import State
from tests.sessions_fixtures import T0, chain

SOURCE_LINK = re.compile(r"sources/test/(s\d)/([^/]+)\.md#source-")


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[MemoryWorkspace]:
    workspace = MemoryWorkspace.init(tmp_path / "memory")
    yield workspace
    workspace.close()


def service(
    ws: MemoryWorkspace,
    store: SessionStore,
    writer: object | None = None,
    **settings: int,
) -> WriteService:
    return WriteService(ws, store, writer or VerbatimWriter(), OfflineOrganizer(), WriteSettings(**settings))  # type: ignore[arg-type]


def new_session(store: SessionStore, sid: str = "s1") -> None:
    store.create_session(sid, {"provider": "test", "title": "Planning"}, created_at=T0)


def cited_nodes(ws: MemoryWorkspace) -> Counter[str]:
    """How many records cite each node across all topics (the archive link names it)."""
    return by_message(records_citing(ws.root))


def markers(store: SessionStore, sid: str, ids: list[str], key: str) -> list[bool]:
    out = []
    for node_id in ids:
        node = store.get_node(sid, node_id)
        assert node is not None
        out.append(node.written_for(key))
    return out


MAIN = [f"m{i}" for i in range(1, 10)]
FORK = [f"b{i}" for i in range(4, 10)]


def test_a_fork_from_m3_is_written_whole_and_the_prefix_once(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    svc = service(ws, store)
    first = svc.write("s1", force=True)
    assert isinstance(first, Written) and first.nodes_written == 9
    store.add_nodes(chain("s1", FORK, parent="m3", start=20), head="b9")
    second = svc.write("s1", force=True)
    assert isinstance(second, Written)
    assert cited_nodes(ws) == Counter({node: 1 for node in MAIN + FORK})
    assert all(markers(store, "s1", MAIN + FORK, ws.key))


def test_an_eleven_turn_branch_is_written_whole(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    svc = service(ws, store)
    svc.write("s1", force=True)
    branch = [f"c{i}" for i in range(1, 12)]
    store.add_nodes(chain("s1", branch, parent="m1", start=30), head="c11")
    outcome = svc.write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.nodes_written == 11
    cited = cited_nodes(ws)
    assert all(cited[node] == 1 for node in branch)


def test_every_other_branch_tip_is_written_at_a_forced_boundary(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    store.add_nodes(chain("s1", FORK, parent="m3", start=20))  # a fork the head never moved to
    outcome = service(ws, store).write("s1", force=True)
    assert isinstance(outcome, Written)
    assert cited_nodes(ws) == Counter({node: 1 for node in MAIN + FORK})


def test_a_compaction_summary_is_never_re_ingested(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    svc = service(ws, store)
    svc.write("s1", force=True)
    revision = ws.revision
    summary = Node("sum", "s1", "m2", "user", NodeKind.COMPACTION_SUMMARY, "Summary: m3..m9 discussed", T0)
    store.add_nodes([summary], head="sum")  # a side branch from the predecessor of the first summarized turn
    outcome = svc.write("s1", force=True)
    assert isinstance(outcome, NothingDue)
    assert ws.revision == revision and "sum" not in cited_nodes(ws)


def test_only_user_and_assistant_content_enters_memory(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    kinds = [
        NodeKind.USER,
        NodeKind.TOOL_CALL,
        NodeKind.TOOL_RESULT,
        NodeKind.SCHEDULED,
        NodeKind.SYSTEM,
        NodeKind.ASSISTANT,
        NodeKind.REWIND_MARKER,
    ]
    nodes = chain("s1", [f"k{i}" for i in range(len(kinds))], kinds=kinds)
    empty = Node("k7", "s1", "k6", "user", NodeKind.USER, "   ", T0 + timedelta(hours=1))
    store.add_nodes([*nodes, empty], head="k7")
    outcome = service(ws, store).write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.nodes_written == 6  # the span up to the last content node
    assert set(cited_nodes(ws)) == {"k0", "k5"}


def test_a_crash_after_archiving_leaves_the_batch_pending(ws: MemoryWorkspace, tmp_path: Path) -> None:
    from scriptorium.sessions import open_store

    db = tmp_path / "crash-sessions.db"
    store = open_store(f"sqlite:///{db}")
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    script = f"""
import os, signal
from pathlib import Path
from scriptorium.sessions import open_store
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writing.service import WriteService

class DiesMidWrite:
    name = "dies"
    def write(self, batch, topics, repair=None):
        os.kill(os.getpid(), signal.SIGKILL)

ws = MemoryWorkspace(Path({str(ws.root)!r}))
WriteService(ws, open_store("sqlite:///{db}"), DiesMidWrite(), OfflineOrganizer()).write("s1", force=True)
"""
    state = State(ws)
    proc = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert proc.returncode == -9
    archived = {p: p.read_bytes() for p in (ws.root / "sources").rglob("*.md")}
    keys = [key for p in archived for key in ws.archive.entries_of(p.relative_to(ws.root).as_posix())]
    assert len(keys) == 9, "sources are archived before the writer runs"
    reopened = MemoryWorkspace(ws.root)
    assert reopened.revision == state.revision
    assert not any(markers(store, "s1", MAIN, reopened.key))
    outcome = service(reopened, store).write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.nodes_written == 9
    assert {p: p.read_bytes() for p in archived} == archived, "re-archiving is byte-identical"
    assert cited_nodes(reopened) == Counter({node: 1 for node in MAIN})
    reopened.close()
    store.close()


def _killed_between_install_and_marking(ws: MemoryWorkspace, tmp_path: Path) -> tuple[SessionStore, MemoryWorkspace]:
    """A pass over MAIN SIGKILLed right after its install, before marking: the store and the reopened
    workspace (its turns installed, none marked)."""
    from scriptorium.sessions import open_store

    db = tmp_path / "crash-sessions.db"
    store = open_store(f"sqlite:///{db}")
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    script = f"""
import os, signal
from pathlib import Path
from scriptorium.sessions import open_store
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.service import WriteService

store = open_store("sqlite:///{db}")
store.mark_written = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)  # dies right after the install
ws = MemoryWorkspace(Path({str(ws.root)!r}))
WriteService(ws, store, VerbatimWriter(), OfflineOrganizer()).write("s1", force=True)
"""
    before = ws.revision
    proc = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[2], timeout=60)
    assert proc.returncode == -9
    assert tree_problems(ws.root) == [], "the install itself completed"
    reopened = MemoryWorkspace(ws.root)
    assert reopened.revision != before and not any(markers(store, "s1", MAIN, reopened.key))
    assert cited_nodes(reopened) == Counter({node: 1 for node in MAIN})
    return store, reopened


def test_a_kill_between_install_and_marking_only_marks_next_time(ws: MemoryWorkspace, tmp_path: Path) -> None:
    """The one window where a duplicate can arise: installed, not yet marked. The next pass finds the
    turns' sources in the installed tree and only marks them; every turn is cited by exactly one record."""
    store, reopened = _killed_between_install_and_marking(ws, tmp_path)
    installed = reopened.revision
    outcome = service(reopened, store).write("s1", force=True)
    assert isinstance(outcome, NothingDue), outcome
    assert reopened.revision == installed, "nothing is written again"
    assert all(markers(store, "s1", MAIN, reopened.key))
    assert cited_nodes(reopened) == Counter({node: 1 for node in MAIN})
    reopened.close()
    store.close()


def test_after_the_kill_new_turns_and_a_rejected_pass_leave_only_the_installed_turns_marked(
    ws: MemoryWorkspace, tmp_path: Path
) -> None:
    """Only the installed prefix is marked by the recovery: two turns that came after the crash stay pending
    through a rejected pass, and the next good pass writes them, once."""
    store, reopened = _killed_between_install_and_marking(ws, tmp_path)
    store.add_nodes(chain("s1", ["m10", "m11"], parent="m9", start=len(MAIN)), head="m11")
    outcome = service(reopened, store, RejectedEveryTime()).write("s1", force=True)
    assert isinstance(outcome, Failed) and outcome.reason is ReasonCode.COMMIT_REJECTED, outcome
    assert all(markers(store, "s1", MAIN, reopened.key)), "the installed turns are marked"
    assert markers(store, "s1", ["m10", "m11"], reopened.key) == [False, False], "the new turns stay pending"
    assert isinstance(service(reopened, store).write("s1", force=True), Written)
    assert cited_nodes(reopened) == Counter({node: 1 for node in [*MAIN, "m10", "m11"]})
    reopened.close()
    store.close()


def test_a_git_failure_is_not_reported_as_written(ws: MemoryWorkspace, store: SessionStore) -> None:
    """The install landed but git refused the commit (its reference-transaction hook aborts): the pass says
    GIT_COMMIT_FAILED, retryable, never written; the next open commits the installed files."""
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    hook = ws.root / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text('#!/bin/sh\n[ "$1" = prepared ] && exit 1\nexit 0\n')
    hook.chmod(0o755)
    outcome = service(ws, store).write("s1", force=True)
    assert isinstance(outcome, Pending) and outcome.reason is ReasonCode.GIT_COMMIT_FAILED, outcome
    assert outcome.retryable
    assert all(markers(store, "s1", MAIN, ws.key)), "installed: its turns are written, the commit is what is due"
    hook.unlink()
    reopened = MemoryWorkspace(ws.root)
    head_tree = subprocess.run(
        ["git", "-C", str(ws.root), "rev-parse", "main^{tree}"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert head_tree == reopened.revision and cited_nodes(reopened) == Counter({node: 1 for node in MAIN})
    reopened.close()


class RejectedEveryTime:
    """A writer whose edit is always invalid (uncited prose), recording the repair it was given."""

    name = "broken"

    def __init__(self) -> None:
        self.repairs: list[Repair | None] = []

    def write(self, batch: Batch, topics: TopicFiles, repair: Repair | None = None) -> None:
        self.repairs.append(repair)
        topics.write("topics/notes.md", "x")


def test_twenty_turns_rejected_twice_end_commit_rejected(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    turns = [f"t{i}" for i in range(20)]
    store.add_nodes(chain("s1", turns), head="t19")
    writer = RejectedEveryTime()
    state = State(ws)
    outcome = service(ws, store, writer).write("s1", force=True)
    assert isinstance(outcome, Failed) and outcome.reason is ReasonCode.COMMIT_REJECTED and not outcome.retryable
    assert writer.repairs[0] is None
    repair = writer.repairs[1]
    assert (
        repair is not None
        and repair.reason == "INVALID_TOPIC_FORMAT"
        and repair.guidance
        and repair.rejected_text == "x"
    )
    assert len(writer.repairs) == 2
    assert not any(markers(store, "s1", turns, ws.key))
    assert not (ws.root / "topics" / "notes.md").exists()
    assert ws.revision == state.revision


def test_a_held_lock_is_pending_not_nothing_due(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with ws.lock():
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    try:
        outcome = service(ws, store).write("s1", force=False)
    finally:
        release.set()
        thread.join()
    assert isinstance(outcome, Pending) and outcome.reason is ReasonCode.LOCK_HELD and outcome.retryable
    assert outcome.pending_nodes == 9


def test_marking_never_changes_updated_at(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9", updated_at=T0 + timedelta(hours=3))
    before = store.get_session("s1")
    service(ws, store).write("s1", force=True)
    after = store.get_session("s1")
    assert before is not None and after is not None and after.updated_at == before.updated_at


def test_an_unforced_write_waits_for_the_threshold_then_runs_once(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    svc = service(ws, store, trigger_tokens=10_000)
    below = svc.write("s1", force=False)
    assert isinstance(below, NothingDue) and below.pending_nodes == 9 and below.pending_tokens > 0
    svc = service(ws, store, trigger_tokens=10, batch_tokens=60)
    once = svc.write("s1", force=False)
    assert isinstance(once, Written) and once.batches == 1 and once.pending_nodes > 0


def test_forced_writes_cut_batches_and_write_everything(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    outcome = service(ws, store, batch_tokens=30).write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.batches >= 3 and outcome.pending_nodes == 0
    assert cited_nodes(ws) == Counter({node: 1 for node in MAIN})


def test_organize_runs_after_five_batches(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", [f"o{i}" for i in range(12)]), head="o11")
    outcome = service(ws, store, batch_tokens=20).write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.batches >= 5 and outcome.organized


def test_nodes_covered_by_archived_sources_count_as_written(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    svc = service(ws, store)
    svc.write("s1", force=True)
    # Migration: an older runtime left no markers, but the sources are in the installed tree.
    other = service(ws, store)
    other.workspace_key = "legacyworkspace"
    revision = ws.revision
    assert isinstance(other.write("s1", force=True), NothingDue)
    assert ws.revision == revision
    # ...and the covered nodes are only marked, so the next walk stops at the head.
    assert all(markers(store, "s1", MAIN, "legacyworkspace"))
    assert store.pending("s1", "m9", "legacyworkspace") == []


@pytest.mark.parametrize("installed", [["m1"], ["m1", "m2"]], ids=["the first", "the first two"])
def test_an_installed_prefix_of_any_length_is_only_marked(
    ws: MemoryWorkspace, store: SessionStore, installed: list[str]
) -> None:
    """A pass died after installing the first message(s) of the branch: those are marked, never written
    again, and the rest is written once — whether the installed prefix ends at an even or an odd index,
    and also when it is the oldest message alone (found by mutation testing: neither was tested)."""
    from scriptorium.writing.batch import to_message

    new_session(store)
    nodes = chain("s1", MAIN)
    store.add_nodes(nodes, head="m9")
    with ws.lock():
        paths = ws.archive_sources([to_message(n, "test", "trusted").source for n in nodes if n.id in installed])
    ws.transact(lambda stage: None, message="a pass that died before marking", appended_sources=paths)
    outcome = service(ws, store).write("s1", force=True)
    assert isinstance(outcome, Written), outcome
    assert all(markers(store, "s1", MAIN, ws.key)), "every node marked: the installed ones by the walk"
    assert cited_nodes(ws) == Counter({node: 1 for node in MAIN if node not in installed})


def _tool_turns_fork_and_installed_prefix(ws: MemoryWorkspace, store: SessionStore, sid: str) -> list[Node]:
    """Session ``sid``: a branch with tool turns among its six messages (an even count), a fork from its
    second message, and a pass that died after installing the first three messages. Its nodes."""
    from scriptorium.writing.batch import to_message

    new_session(store, sid)
    K = NodeKind
    kinds = [K.USER, K.ASSISTANT, K.TOOL_CALL, K.TOOL_RESULT, K.ASSISTANT, K.TOOL_CALL, K.TOOL_RESULT]
    kinds += [K.USER, K.ASSISTANT, K.USER]
    main = chain(sid, [f"n{i}" for i in range(1, 11)], kinds=kinds)
    fork = chain(sid, ["f3", "f4"], parent="n2", start=20)
    store.add_nodes(fork, head="f4")
    store.add_nodes(main, head="n10")
    with ws.lock():
        installed = [to_message(n, "test", "trusted").source for n in main if n.id in ("n1", "n2", "n5")]
        paths = ws.archive_sources(installed)
    ws.transact(lambda stage: None, message="a pass that died before marking", appended_sources=paths)
    return [*main, *fork]


def test_after_an_installed_prefix_the_pass_marks_every_node_the_tool_turns_too(
    ws: MemoryWorkspace, store: SessionStore
) -> None:
    """The installed prefix ends before two tool turns: the next pass writes the rest once and every node
    is marked, the tool turns after the prefix too (found by mutation testing: no prefix ended past the
    second message or before a tool turn)."""
    nodes = _tool_turns_fork_and_installed_prefix(ws, store, "s1")
    assert isinstance(service(ws, store).write("s1", force=True), Written)
    every = [n.id for n in nodes]
    marked = markers(store, "s1", every, ws.key)
    assert all(marked), dict(zip(every, marked, strict=True))
    assert cited_nodes(ws) == Counter({n: 1 for n in ["n8", "n9", "n10", "f3", "f4"]})


def test_pending_counts_and_age_cover_every_live_branch(ws: MemoryWorkspace, store: SessionStore) -> None:
    """What a session has pending (counted on every live branch, and the age of its oldest), what its head
    has, and none for a session without a head (found by mutation testing: these were never read)."""
    from scriptorium.writing.selection import PendingContent

    _tool_turns_fork_and_installed_prefix(ws, store, "s1")
    pending = PendingContent(ws, store, ws.key)
    assert pending.on_head("s1") == 3, "n8, n9, n10"
    assert pending.messages("s1") == 5, "n8, n9, n10 and the fork's f3, f4: every live branch"
    assert pending.since("s1") == T0 + timedelta(minutes=7), "n8, the oldest unwritten message"
    store.create_session("s2", {"provider": "test"})
    assert (pending.messages("s2"), pending.since("s2"), pending.on_head("s2")) == (0, None, 0), "no head yet"
    assert (pending.messages("nope"), pending.since("nope"), pending.on_head("nope")) == (0, None, 0), "no session"
    assert isinstance(service(ws, store).write("s1", force=True), Written)
    assert (pending.messages("s1"), pending.since("s1"), pending.on_head("s1")) == (0, None, 0)


def test_a_missing_session_id_is_terminal(ws: MemoryWorkspace, store: SessionStore) -> None:
    outcome = service(ws, store).write(None)
    assert isinstance(outcome, Failed) and outcome.reason is ReasonCode.NO_SESSION_ID


def test_every_pass_is_in_the_writer_history(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    svc = service(ws, store, trigger_tokens=10_000)
    svc.write("s1")
    svc.write("s1", force=True)
    history = svc.history.recent()
    assert [h["outcome"] for h in history] == ["nothing_due", "written"]
    assert history[0]["pending_nodes"] == 9 and history[1]["pending_nodes"] == 0
    assert history[1]["revision"] == ws.revision and history[1]["ms"] > 0


def test_reorganize_merges_duplicates_without_touching_sources_or_markers(
    ws: MemoryWorkspace, store: SessionStore
) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN), head="m9")
    svc = service(ws, store)
    svc.write("s1", force=True)
    topic = next(iter(ws.topics()))
    text = (ws.root / topic).read_text()
    m1 = next(line for line in text.splitlines() if line.startswith("2026") and "m1:" in line)
    duplicate = m1.split(" ^")[0].replace("[^", "[x").split("[x")[0].rstrip()
    from scriptorium.workspace import TopicChange

    ws.apply_changes([TopicChange(topic, "update", text + f"\n{duplicate} [again](test/s1/m2)\n")], message="duplicate")
    ids_before = set(ws.snapshot().id_to_topic)
    sources = {p: p.read_bytes() for p in (ws.root / "sources").rglob("*.md")}
    outcome = svc.reorganize()
    assert isinstance(outcome, Written) and outcome.changed_files and topic in outcome.changed_files
    assert set(ws.snapshot().id_to_topic) == ids_before
    assert {p: p.read_bytes() for p in (ws.root / "sources").rglob("*.md")} == sources
    assert (ws.root / topic).read_text().count("m1: the") == 1
    assert isinstance(svc.reorganize(), NothingDue)


def test_markers_are_keyed_by_the_workspace(ws: MemoryWorkspace, store: SessionStore) -> None:
    new_session(store)
    store.add_nodes(chain("s1", MAIN[:2]), head="m2")
    service(ws, store).write("s1", force=True)
    node = store.get_node("s1", "m1")
    assert node is not None and set(node.metadata[MARKER_KEY]) == {ws.key}
    assert node.metadata[MARKER_KEY][ws.key] == ws.revision
