"""The default organizer links a newer statement to the older one it restates (issue 58): a command changed
between two sessions of one project gets ``([supersedes](…#^id))`` on the newer record, recall ranks it above
the older and marks the older superseded. Another project's restatement, or a record said the same day, is
not linked. The candidates come from the recall index's postings; the lookup finds every near-duplicate a
scan of all records would."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scriptorium.recall import current
from scriptorium.recall.index import RecallIndex
from scriptorium.recall.records import Document
from scriptorium.sessions import Node, NodeKind, SessionStore, open_store
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.sources import SourceMessage
from scriptorium.workspace.topics import parse_topic, supersedes_links
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.service import WriteService, WriteSettings
from tests.producers.helpers import ingest

OLD = "Run the integration tests with make test-integration before you push to the main branch."
NEW = "Run the integration tests with make check-integration before you push to the main branch."
ELSEWHERE = "Run the integration tests with make verify-integration before you push to the main branch."


def repository(root: Path, remote: str) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", remote], check=True)
    return root


def transcript(path: Path, session: str, cwd: Path, day: str, said: str) -> Path:
    """A Claude Code session in ``cwd`` on ``day``: the user's ``said`` and the agent's answer."""
    entries = [
        (f"{session}-u", None, "user", said),
        (f"{session}-a", f"{session}-u", "assistant", "Understood, I will do that from now on."),
    ]
    lines = [
        json.dumps(
            {
                "uuid": uuid,
                "parentUuid": parent,
                "sessionId": session,
                "type": role,
                "timestamp": f"{day}T10:00:0{n}Z",
                "cwd": str(cwd),
                "gitBranch": "main",
                "message": {"role": role, "content": text},
            }
        )
        for n, (uuid, parent, role, text) in enumerate(entries)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def said(docs: list[Document]) -> list[str]:
    """Which wording of the make target each record has (``test``, ``check``, ``verify``…)."""
    return [doc.text.split("make ", 1)[1].split("-", 1)[0] for doc in docs]


def records_saying(memory: Path, words: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(topic, memory ID, what it supersedes) of each installed record whose text holds ``words``."""
    found = []
    for path in sorted((memory / "topics").rglob("*.md")):
        rel = path.relative_to(memory).as_posix()
        for record in parse_topic(rel, path.read_text()).records:
            if words in record.text:
                found.append((rel, record.memory_id, supersedes_links(record.text)))
    return found


@pytest.fixture
def imported(tmp_path: Path) -> Iterator[tuple[Path, SessionStore]]:
    """Three sessions imported as a user imports them: the old wording and the new one in the harbour
    repository (two clones: one project by its remote), months apart; a third wording later in another."""
    harbour = repository(tmp_path / "code" / "harbour", "https://github.com/acme/harbour.git")
    clone = repository(tmp_path / "code" / "harbour-2", "git@github.com:acme/harbour.git")
    ledger = repository(tmp_path / "code" / "ledger", "https://github.com/acme/ledger.git")
    projects = tmp_path / "claude" / "projects"
    state = tmp_path / "state"
    ingest(
        state,
        transcript(projects / "harbour" / "old.jsonl", "old", harbour, "2026-03-02", OLD),
        transcript(projects / "harbour-2" / "new.jsonl", "new", clone / "src", "2026-05-10", NEW),
        transcript(projects / "ledger" / "other.jsonl", "other", ledger, "2026-06-01", ELSEWHERE),
    )
    store = open_store(f"sqlite:///{state / 'sessions' / 'sessions.db'}")
    yield state / "memory", store
    store.close()


def test_the_nightly_organize_links_the_newer_wording_to_the_older_of_its_project(
    imported: tuple[Path, SessionStore],
) -> None:
    memory, store = imported
    ((_t, old, _),) = records_saying(memory, "make test-integration")
    ws = MemoryWorkspace(memory)
    try:
        assert WriteService(ws, store, VerbatimWriter(), OfflineOrganizer()).reorganize().ok
    finally:
        ws.close()
    ((_t, new, supersedes),) = records_saying(memory, "make check-integration")
    assert supersedes == (old,)
    # Another project's wording, said later still: its own project's statement, superseding nothing here.
    ((_t, other, elsewhere),) = records_saying(memory, "make verify-integration")
    assert elsewhere == ()
    # The older record is marked where it is found, and its successor comes just above it.
    hits = RecallIndex(memory).search("make test-integration before push", 5)
    ids = [h.memory_id for h in hits]
    assert ids.index(new) < ids.index(old), ids
    assert next(h for h in hits if h.memory_id == old).superseded_by == new
    assert other not in {h.superseded_by for h in hits}


def test_a_pass_that_organizes_links_what_it_wrote_and_the_link_is_valid_markdown(
    imported: tuple[Path, SessionStore],
) -> None:
    memory, store = imported
    ((_t, new, _),) = records_saying(memory, "make check-integration")
    # A later session of the harbour project says it again, in other words that still share most terms.
    session = store.get_session("new")
    assert session is not None
    store.create_session("later", dict(session.metadata), created_at=datetime(2026, 7, 1, 9, tzinfo=UTC))
    said = "Run the integration tests with make ci-integration before you push to the main branch please."
    store.add_nodes(
        [
            Node(
                id="later-u",
                session_id="later",
                parent_id=None,
                role="user",
                kind=NodeKind.USER,
                content=said,
                created_at=datetime(2026, 7, 1, 9, tzinfo=UTC),
            )
        ],
        head="later-u",
    )
    ws = MemoryWorkspace(memory)
    try:
        writes = WriteService(ws, store, VerbatimWriter(), OfflineOrganizer(), WriteSettings(organize_batches=1))
        assert writes.write("later", force=True).ok
    finally:
        ws.close()
    ((topic, latest, supersedes),) = records_saying(memory, "make ci-integration")
    ((new_topic, _new, _),) = records_saying(memory, "make check-integration")
    # The newest older wording is named (the nightly organize has not linked it to the oldest yet: a
    # pass organizes what changed); recall follows the chain from there.
    assert supersedes == (new,)
    text = (memory / topic).read_text()
    line = next(line for line in text.splitlines() if "make ci-integration" in line)
    target = line.split("[supersedes](", 1)[1].split(")", 1)[0]
    assert target == f"../2026-05/{Path(new_topic).name}#^{new}"
    assert (memory / topic).parent.joinpath(target.split("#", 1)[0]).resolve() == (memory / new_topic).resolve()
    hits = RecallIndex(memory).search("make check-integration before push", 5)
    ids = [h.memory_id for h in hits]
    assert ids.index(latest) < ids.index(new), ids
    assert hits[ids.index(new)].superseded_by == latest


def test_what_is_not_a_restatement_is_not_linked(seeded: MemoryWorkspace, store: SessionStore) -> None:
    """Said the same day; sharing too little; repeated word for word (it replaces nothing); the agent saying
    what the user said (another speaker): none of them names another as superseded."""
    deploy = "Deploy the api service with fly deploy from the main branch only"
    dev = (
        "# Dev\n\n"
        f"2026-03-02: {OLD} [k](test/t1/m1)\n\n"
        f"2026-03-02: {NEW} [k](test/t1/m3)\n\n"
        "2026-05-02: Run the unit tests with pytest before you open a pull request [k](test/t1/m5)\n\n"
        f"2026-06-02: User: {deploy} [k](test/t1/m6)\n\n"
        f"2026-08-02: Assistant: {deploy.replace('fly deploy', 'fly deploy remote')} [k](test/t1/m8)\n"
    )
    ops = f"# Ops\n\n2026-07-02: User: {deploy} [k](test/t1/m7)\n"  # another topic: not merged as one
    seeded.apply_changes(
        [TopicChange("topics/dev.md", "create", dev), TopicChange("topics/ops.md", "create", ops)], message="dev"
    )
    assert WriteService(seeded, store, VerbatimWriter(), OfflineOrganizer()).reorganize().ok
    assert [s for _t, _i, s in records_saying(seeded.root, "integration")] == [(), ()]
    assert [s for _t, _i, s in records_saying(seeded.root, "pytest")] == [()]
    assert [s for _t, _i, s in records_saying(seeded.root, "fly deploy")] == [(), (), ()]
    # The agent's wording changed, later: an agent narrating its work is never taken to replace anything; the
    # user changing theirs is.
    later = (
        f"\n2026-09-02: Assistant: {deploy.replace('fly deploy', 'fly deploy local')} [k](test/t1/m9)\n\n"
        f"2026-09-03: User: {deploy.replace('fly deploy', 'fly deploy local')} [k](test/t1/m9)\n"
    )
    dev_now = (seeded.root / "topics/dev.md").read_text()
    seeded.apply_changes([TopicChange("topics/dev.md", "update", dev_now + later)], message="later")
    assert WriteService(seeded, store, VerbatimWriter(), OfflineOrganizer()).reorganize().ok
    ((_t, newest_user, _),) = [r for r in records_saying(seeded.root, f"User: {deploy}") if r[0] == "topics/ops.md"]
    local = deploy.replace("fly deploy", "fly deploy local")
    assert [s for _t, _i, s in records_saying(seeded.root, f"Assistant: {local}")] == [()]
    assert [s for _t, _i, s in records_saying(seeded.root, f"User: {local}")] == [(newest_user,)]


def test_the_postings_find_every_near_duplicate_a_scan_of_all_records_finds(seeded: MemoryWorkspace) -> None:
    """The lookup reads the postings of a record's rarest terms only; over a corpus of generated records with
    many near-duplicates it finds exactly what comparing the record with every record finds."""
    rng = random.Random(58)
    vocabulary = [f"word{n}" for n in range(60)]
    bases = [rng.sample(vocabulary, rng.randint(6, 14)) for _ in range(12)]
    lines = []
    for n in range(150):
        words = list(rng.choice(bases))
        for _ in range(rng.randint(0, 4)):  # a few words changed: some stay near, some drift away
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
        lines.append(f"2026-{1 + n % 12:02d}-{1 + n % 28:02d}: {' '.join(words)} [k](test/t1/m{n % 10})")
    ws = seeded
    try:
        ws.apply_changes([TopicChange("topics/gen.md", "create", "# Gen\n\n" + "\n\n".join(lines) + "\n")], message="g")
        index = RecallIndex(ws.root)
        index.refresh()
        state = index._state
        assert state is not None
        live = [slot for slot, doc in enumerate(state.docs) if doc is not None]
        compared = 0
        for slot in live:
            doc = state.docs[slot]
            assert doc is not None
            terms = current.comparison_terms(doc.text)
            scanned = {s for s in live if current._near(terms, current.comparison_terms(state.docs[s].text))}  # type: ignore[union-attr]
            assert set(current.near_duplicate_slots(state, terms)) == scanned, doc.text
            compared += len(scanned) > 1
        assert compared > 30, "the corpus holds near-duplicates to find"
    finally:
        ws.close()


def test_a_lookup_refreshes_at_most_as_often_as_asked_and_leaves_the_disk_cache_to_the_next_search(
    seeded: MemoryWorkspace,
) -> None:
    """A pass's lookups bring the index up to the installed files no more often than ``within_s`` allows, and
    do not write the disk cache (a bulk import would write it whole at every organize); the next refresh
    that may (a search's, the one after the writes) writes it."""
    index = RecallIndex(seeded.root)
    index.refresh()
    cache = index.cache.path
    written = cache.stat().st_mtime_ns
    dev = f"# Dev\n\n2026-03-02: {OLD} [k](test/t1/m1)\n"
    seeded.apply_changes([TopicChange("topics/dev.md", "create", dev)], message="dev")
    assert said(index.restated(NEW, "2026-05-10")) == ["test"]  # refreshed: the new topic is in
    assert cache.stat().st_mtime_ns == written
    ops = f"# Ops\n\n2026-04-02: {ELSEWHERE} [k](test/t1/m2)\n"
    seeded.apply_changes([TopicChange("topics/ops.md", "create", ops)], message="ops")
    assert said(index.restated(NEW, "2026-05-10", within_s=3600)) == ["test"]  # not refreshed yet
    assert said(index.restated(NEW, "2026-05-10")) == ["verify", "test"]  # newest first
    assert cache.stat().st_mtime_ns == written
    index.refresh()  # nothing changed since the last scan: the state is saved all the same
    assert cache.stat().st_mtime_ns != written
    fresh = RecallIndex(seeded.root)
    assert said(fresh.restated(NEW, "2026-05-10", within_s=3600)) == ["verify", "test"]
    assert fresh.last_refresh.topics_parsed == 0, "the saved cache held both topics"


def test_a_record_a_requester_alone_may_see_is_never_named(seeded: MemoryWorkspace) -> None:
    """A link names a record's topic and ID from another record, which others may see: a record citing a
    requester's own sources is never a candidate; the same words from a shared source are."""
    private = SourceMessage("test", "t9", "m0", "user", "2026-03-02T09:00:00Z", OLD, audience="alice")
    with seeded.lock():
        paths = seeded.archive_sources([private])
    seeded.transact(lambda stage: None, message="archive", appended_sources=paths)
    alice = f"# Alice\n\n2026-03-02: {OLD} [k](test/t9/m0)\n"
    seeded.apply_changes([TopicChange("topics/alice.md", "create", alice)], message="alice")
    index = RecallIndex(seeded.root)
    assert index.restated(NEW, "2026-05-10") == []
    shared = f"# Shared\n\n2026-03-03: {OLD} [k](test/t1/m1)\n"
    seeded.apply_changes([TopicChange("topics/shared.md", "create", shared)], message="shared")
    assert [(d.topic, said([d])) for d in index.restated(NEW, "2026-05-10")] == [("topics/shared.md", ["test"])]


def test_a_state_left_unsaved_is_never_saved_after_a_forget(seeded: MemoryWorkspace) -> None:
    """A lookup's refresh leaves the disk cache behind; a forget in between (which drops every process's
    cache: the old vocabulary held the forgotten words) means that state is never written after all."""
    dev = f"# Dev\n\n2026-03-02: {OLD} [k](test/t1/m1)\n"
    seeded.apply_changes([TopicChange("topics/dev.md", "create", dev)], message="dev")
    index = RecallIndex(seeded.root)
    assert said(index.restated(NEW, "2026-05-10")) == ["test"]
    RecallIndex.forget(seeded.root)
    index.refresh()
    assert not index.cache.path.exists(), "the state from before the forget was written again"
