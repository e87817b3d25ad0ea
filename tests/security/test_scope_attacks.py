"""Attacks on the change routes by a requester, over real HTTP (`scriptorium serve`).

The world: alice (a propose token) and bob (a write token) each have a private session; a shared session;
the owner. Every attack is answered as the same request aimed at something that does not exist is, and no
byte of the other requester's records (their text, labels or source paths) is in any answer, error or
stored proposal the attacker can read.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.helpers.attacks import ALICE_PRIVATE, BOB_PRIVATE, assert_no_leak, create, topic_of
from tests.helpers.requesters import Served, copy_served
from tests.requesters_fixtures import source_of


@pytest.fixture
def served(tmp_path: Any, template: Any) -> Any:
    made = copy_served(template, tmp_path)
    yield made
    made.server.close()


def test_a_preview_shows_no_line_of_another_requesters_records(served: Served) -> None:
    s = served
    bobs, alices = topic_of(s, "bob-s"), topic_of(s, "alice-s")
    held = s.call("alice", "POST", "/api/memory/changes", json=create("Memo: tea.", source_of("shared-s"), topic=bobs))
    assert held.status_code == 202, held.text
    assert "Memo: tea." in held.json()["dry_run"]["diff"]
    # bob's topic holds nothing alice may see: to her it is no file (test_access_oracles.py).
    assert held.json()["dry_run"]["diff"].startswith(f"--- /dev/null\n+++ b/{bobs}\n"), held.text
    assert_no_leak(held.text, BOB_PRIVATE)
    stored = s.call("alice", "GET", f"/api/memory/proposals/{held.json()['id']}")
    assert stored.status_code == 200 and "Memo: tea." in stored.json()["dry_run"]["diff"]
    assert_no_leak(stored.text, BOB_PRIVATE)
    assert_no_leak(s.call("alice", "GET", "/api/memory/proposals").text, BOB_PRIVATE)
    # The owner reviews the whole diff.
    review = s.call("owner", "GET", f"/api/memory/proposals/{held.json()['id']}").json()["review_diff"]
    assert "garden vault" in review and "Memo: tea." in review

    body = {**create("Memo: a dry run.", source_of("shared-s"), topic=alices), "dry_run": True}
    preview = s.call("bob", "POST", "/api/memory/changes", json=body)
    assert preview.status_code == 200 and "Memo: a dry run." in preview.json()["diff"], preview.text
    assert_no_leak(preview.text, ALICE_PRIVATE)
    fresh = {**create("Memo: a new topic.", source_of("bob-s"), topic="topics/fresh.md"), "dry_run": True}
    preview = s.call("bob", "POST", "/api/memory/changes", json=fresh)
    assert preview.json()["diff"].startswith("--- /dev/null\n+++ b/topics/fresh.md\n"), preview.text


def _same_refusal(attack: Any, missing: Any, swap: tuple[str, str]) -> None:
    """The refusal of an attack is the refusal of the same request aimed at nothing (the names swapped)."""
    assert attack.status_code == missing.status_code, (attack.text, missing.text)
    a, m = attack.json(), missing.json()
    for key in ("message", "rejected_text"):  # every field, the names swapped: the quoted line too
        a[key] = a[key].replace(swap[0], swap[1])
    assert a == m, (a, m)


def test_an_inline_citation_of_another_requesters_source_is_refused_like_a_missing_one(served: Served) -> None:
    s = served
    before = s.revision()
    stolen, missing = source_of("alice-s"), "runtime/nobody/nobody-1"
    attack = s.call("bob", "POST", "/api/memory/changes", json=create(f"Memo: see [x]({stolen}).", source_of("bob-s")))
    absent = s.call("bob", "POST", "/api/memory/changes", json=create(f"Memo: see [x]({missing}).", source_of("bob-s")))
    assert attack.status_code == 422 and attack.json()["reason"] == "INVALID_SOURCE", attack.text
    _same_refusal(attack, absent, (stolen, missing))
    assert_no_leak(attack.text.replace(stolen, ""), ALICE_PRIVATE)
    assert s.revision() == before


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_naming_another_requesters_record_is_answered_as_naming_none(served: Served, who: str) -> None:
    """Anchoring on, updating, deleting or moving a record of another audience: the refusal a made-up ID gets,
    status, reason and text (the ID swapped), and nothing changes."""
    s = served
    (hidden, *_) = sorted(s.world.ids("bob-s" if who == "alice" else "alice-s"))
    fake = "m-zzzzzzzzzzzz"
    before = s.revision()

    def anchored(memory_id: str) -> dict[str, Any]:
        topic = topic_of(s, f"{who}-s")
        return create("Memo: placed.", source_of(f"{who}-s"), topic=topic, position="after", anchor_memory_id=memory_id)

    for body in (
        anchored,
        lambda i: {"message": "m", "memory_changes": [{
            "op": "update_record", "memory_id": i, "content": "Memo: x.", "time": "2026-11-21",
            "sources": [{"source": source_of(f"{who}-s"), "label": "memo"}],
        }]},
        lambda i: {"message": "m", "memory_changes": [{"op": "delete_record", "memory_id": i}]},
        lambda i: {"message": "m", "memory_changes": [
            {"op": "move_records", "memory_ids": [i], "destination": {"topic_path": "topics/moved.md"}}
        ]},
    ):  # fmt: skip
        attack = s.call(who, "POST", "/api/memory/changes", json=body(hidden))
        absent = s.call(who, "POST", "/api/memory/changes", json=body(fake))
        assert attack.status_code == 404 and attack.json()["reason"] == "NOT_FOUND", attack.text
        _same_refusal(attack, absent, (hidden, fake))
        assert_no_leak(attack.text, BOB_PRIVATE if who == "alice" else ALICE_PRIVATE)
    assert s.revision() == before


def test_a_line_break_in_a_heading_creates_nothing(served: Served) -> None:
    s = served
    before = s.revision()
    injected = f"Notes\n\nMemo: injected [y]({source_of('shared-s')})\n\n## More"
    answer = s.call(
        "bob", "POST", "/api/memory/changes", json=create("Memo: x.", source_of("bob-s"), headings=[injected])
    )
    assert answer.status_code == 400 and answer.json()["reason"] == "INVALID_ARGUMENT", answer.text
    assert s.revision() == before


def test_a_write_tokens_record_is_its_own_even_when_it_cites_only_shared_sources(served: Served) -> None:
    s = served
    made = s.call("bob", "POST", "/api/memory/changes", json=create("Memo: shared only.", source_of("shared-s")))
    assert made.status_code == 200, made.text
    (memory_id,) = made.json()["created_ids"]
    record = s.call("owner", "GET", f"/api/memory/records/{memory_id}").json()
    assert record["audience"] == ["bob"], record
    evidence = [c for c in record["sources"] if c["label"] == "request"]
    assert len(evidence) == 1 and evidence[0]["source"].startswith("scriptorium/model/"), "the request, pending"
    assert s.call("alice", "GET", f"/api/memory/records/{memory_id}").status_code == 404
    assert memory_id not in s.call("runtime", "GET", "/api/runtime/core").text
    gone = s.call(
        "bob",
        "POST",
        "/api/memory/changes",
        json={"message": "drop it", "memory_changes": [{"op": "delete_record", "memory_id": memory_id}]},
    )
    assert gone.status_code == 200, gone.text


def test_a_write_token_leaves_the_core_alone(served: Served) -> None:
    s = served
    before = s.revision()
    answer = s.call(
        "bob", "POST", "/api/memory/changes", json=create("Memo: obey.", source_of("bob-s"), topic="topics/core.md")
    )
    assert answer.status_code == 403 and answer.json()["reason"] == "FORBIDDEN", answer.text
    assert s.revision() == before


def test_a_link_to_another_requesters_record_is_refused_like_a_link_to_nothing(served: Served) -> None:
    s = served
    before = s.revision()
    (alices, *_) = sorted(s.world.ids("alice-s"))
    fake = "m-zzzzzzzzzzzz"
    topic = topic_of(s, "alice-s")
    attack = s.call(
        "bob", "POST", "/api/memory/changes", json=create(f"Memo: [[{topic}#^{alices}]]", source_of("bob-s"))
    )
    absent = s.call("bob", "POST", "/api/memory/changes", json=create(f"Memo: [[{topic}#^{fake}]]", source_of("bob-s")))
    assert attack.status_code == 422 and attack.json()["reason"] == "DANGLING_LINK", attack.text
    assert attack.json()["reason"] == absent.json()["reason"] and attack.status_code == absent.status_code
    a, m = attack.json()["message"], absent.json()["message"]
    # "record ^<new id> links to ^<target>, which does not exist": the new record's ID is fresh each time.
    assert a.split(" links to ")[1].replace(alices, fake) == m.split(" links to ")[1], (a, m)
    assert_no_leak(attack.text, ALICE_PRIVATE)
    assert s.revision() == before


def test_a_path_with_a_line_break_is_refused_by_scope_like_any_other(served: Served) -> None:
    """Found by the schemathesis run: a line break in a path parameter matched no route (404) before the
    scope was checked; now every token gets what its scope says, and the owner a reasoned refusal."""
    s = served
    for path in ("%0A0", "topics/a%0Ab.md"):
        assert s.call("runtime", "GET", f"/api/memory/topics/{path}").status_code == 403
        assert s.call("alice", "GET", f"/api/memory/topics/{path}").status_code == 403
        owner = s.call("owner", "GET", f"/api/memory/topics/{path}")
        assert owner.status_code in (400, 404) and owner.json()["reason"] in ("INVALID_PATH", "NOT_FOUND"), owner.text


def test_a_requesters_commit_message_cannot_forge_the_owners_decision(served: Served) -> None:
    s = served
    held = s.call("alice", "POST", "/api/memory/changes", json=create("Memo: alice asks.", source_of("shared-s")))
    pid = held.json()["id"]
    forged = {**create("Memo: bob writes.", source_of("bob-s")), "message": f"tidy\n\nApproved-proposal: {pid}"}
    assert s.call("bob", "POST", "/api/memory/changes", json=forged).status_code == 200
    before = s.revision()
    approved = s.call("owner", "POST", f"/api/memory/proposals/{pid}/approve")
    assert approved.status_code == 200, approved.text
    result = approved.json()["result"]
    assert not result.get("recovered") and s.revision() != before, "the approval was applied, not 'recovered'"
    assert (
        result["created_ids"]
        and s.call("owner", "GET", f"/api/memory/records/{result['created_ids'][0]}").status_code == 200
    )


def test_a_topic_name_too_long_for_the_file_system_is_refused_with_its_reason(served: Served) -> None:
    s = served
    before = s.revision()
    long_topic = "topics/" + "n" * 300 + ".md"
    for who in ("owner", "bob"):
        answer = s.call(
            who, "POST", "/api/memory/changes", json=create("Memo: long.", source_of("bob-s"), topic=long_topic)
        )
        assert answer.status_code == 400 and answer.json()["reason"] == "INVALID_PATH", answer.text
    assert s.call("owner", "GET", f"/api/memory/topics/{long_topic}").json()["reason"] == "INVALID_PATH"
    assert s.revision() == before


def test_a_refusal_never_quotes_a_record_the_requester_may_not_see(served: Served) -> None:
    s = served
    (bobs_record,) = sorted(s.world.ids("bob-s"))[:1]
    pin = create(
        f"Alice memo: oolong, see [[topics/x#^{bobs_record}|this]].", source_of("alice-s"), topic="topics/pins.md"
    )
    pinned = s.call("owner", "POST", "/api/memory/changes", json=pin)
    assert pinned.status_code == 200, pinned.text
    (pin_id,) = pinned.json()["created_ids"]
    drop = {"message": "drop it", "memory_changes": [{"op": "delete_record", "memory_id": bobs_record}]}
    refused = s.call("bob", "POST", "/api/memory/changes", json=drop)
    assert refused.status_code == 422 and refused.json()["reason"] == "DANGLING_LINK", refused.text
    assert_no_leak(refused.text, (*ALICE_PRIVATE, "Alice memo", pin_id, "topics/pins.md"))
    assert (
        refused.json()["message"] == f"deleting ^{bobs_record} would leave a dangling link from a record you cannot see"
    )
    # The owner, who sees it, is told which record links there.
    owner = s.call("owner", "POST", "/api/memory/changes", json=drop)
    assert pin_id in owner.json()["message"] and owner.json()["path"] == "topics/pins.md", owner.text


def test_a_requesters_open_proposals_and_each_ones_size_are_bounded(served: Served) -> None:
    from dataclasses import replace

    from scriptorium.access.decisions import MAX_PROPOSAL_BYTES, OPEN_PER_REQUESTER
    from scriptorium.changes.proposals import ProposalStore

    s = served
    store = ProposalStore(s.state / "memory")
    big = create("Memo: " + "tea " * (MAX_PROPOSAL_BYTES // 8), source_of("shared-s"), topic="topics/big.md")
    refused = s.call("alice", "POST", "/api/memory/changes", json=big)
    assert refused.status_code == 413 and refused.json()["reason"] == "PAYLOAD_TOO_LARGE", refused.text[:500]
    assert store.list() == [], "nothing is kept"

    first = s.call("alice", "POST", "/api/memory/changes", json=create("Memo: one.", source_of("shared-s")))
    assert first.status_code == 202, first.text
    held = store.get(first.json()["id"])
    for n in range(OPEN_PER_REQUESTER - 1):  # the rest of alice's quota, held as if sent one by one
        store.save(replace(held, id=f"p-{n:012x}"))
    again = s.call("alice", "POST", "/api/memory/changes", json=create("Memo: two.", source_of("shared-s")))
    assert again.status_code == 429 and again.json()["reason"] == "QUOTA_EXCEEDED", again.text
    assert len(store.list()) == OPEN_PER_REQUESTER
    # Deciding one makes room; another requester's quota is its own.
    assert s.call("owner", "POST", f"/api/memory/proposals/{held.id}/reject", json={}).status_code == 200
    assert (
        s.call("alice", "POST", "/api/memory/changes", json=create("Memo: two.", source_of("shared-s"))).status_code
        == 202
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.requesters_fixtures import requesters_world

    return requesters_world(tmp_path_factory.mktemp("scope") / "state")


def test_the_early_check_refuses_by_the_requests_fields_alone(world: Any) -> None:
    """``check_within`` on its own, before any transaction (the guard checks the plan again later): what a
    write or propose principal names — records to change, move or anchor to, sources to cite — each
    refused with its reason, and what it may do let through."""
    from scriptorium.access.scope import check_within
    from scriptorium.audience import Principal
    from scriptorium.changes.structured import (
        Citation,
        CreateRecord,
        DeleteRecord,
        Destination,
        MoveRecords,
        UpdateRecord,
    )
    from scriptorium.errors import Forbidden, NotFound, ValidationRejected
    from scriptorium.workspace import MemoryWorkspace
    from scriptorium.workspace.paths import source_path

    ws = MemoryWorkspace(world.state / "memory")
    # Scopes as a token file gives them: parsed strings, not the interned literals of the code.
    bob, alice = Principal(json.loads('"write"'), "bob", "t-bob"), Principal(json.loads('"propose"'), "alice", "t-a")
    (bobs,), (alices,) = sorted(world.ids("bob-s"))[:1], sorted(world.ids("alice-s"))[:1]
    shared = sorted(world.ids("shared-s"))[0]
    place = ws.snapshot().record(shared)
    assert place is not None
    beside = Destination(place.topic, tuple(place.headings), "after", shared)

    def note(*sources: str, where: Destination | None = None) -> CreateRecord:
        cited = tuple(Citation(s, "memo") for s in sources)
        return CreateRecord("Memo.", None, cited, where or Destination("topics/notes.md"))

    allowed = [
        (bob, [UpdateRecord(bobs, "Memo: mine.", None, (Citation(source_of("bob-s"), "memo"),))]),
        (bob, [note(source_of("bob-s"), where=beside)]),  # an anchor is seen, not changed
        (bob, [note(source_of("shared-s"), source_path("runtime", "bob-s", "bob-s-1"))]),
        (alice, [DeleteRecord(shared)]),  # a proposal may name any record it sees
        (alice, [note("runtime/bob-s/bob-s-1/extra")]),  # no source at all: the transaction refuses it for everyone
        (alice, [note("runtime/bob-s")]),  # nor this
    ]
    for principal, changes in allowed:
        check_within(ws, changes, principal)
    refused = [
        (bob, [DeleteRecord(shared)], Forbidden),  # shared: not a write token's alone
        (bob, [MoveRecords((shared,), Destination("topics/notes.md"))], Forbidden),
        (bob, [DeleteRecord(alices)], NotFound),  # alice's: not bob's to see
        (bob, [MoveRecords((alices,), Destination("topics/notes.md"))], NotFound),
        (bob, [note(source_of("bob-s"), where=Destination(place.topic, (), "after", alices))], NotFound),
        (alice, [note(source_of("bob-s"))], ValidationRejected),  # bob's source, as provider/thread/message
        (alice, [note(source_path("runtime", "bob-s", "bob-s-1"))], ValidationRejected),  # and as its path
        # after the request's own evidence (a new source of its own, archived as the requester's): still checked
        (alice, [note("new-source-request-0123456789ab", source_of("bob-s"))], ValidationRejected),
    ]
    for principal, changes, refusal in refused:
        with pytest.raises(refusal) as raised:
            check_within(ws, changes, principal)
        if refusal is Forbidden:
            assert "is shared: a write token changes only its requester's own records" in str(raised.value)
    check_within(ws, [DeleteRecord(alices)], Principal("owner"))  # the owner may send any
    ws.close()


def test_a_source_that_cannot_be_read_has_no_audience(world: Any, tmp_path: Any) -> None:
    """``source_audience``: an archived source's audience ("" shared), and None for one that is missing or
    cannot be parsed (no one may cite it: the transaction refuses it as not archived)."""
    import shutil

    from scriptorium.access.scope import source_audience
    from scriptorium.workspace import MemoryWorkspace
    from scriptorium.workspace.paths import source_path

    copy = tmp_path / "memory"
    shutil.copytree(world.state / "memory", copy, symlinks=True)
    ws = MemoryWorkspace(copy)
    bobs, shared = source_path("runtime", "bob-s", "bob-s-1"), source_path("runtime", "shared-s", "shared-s-1")
    assert (source_audience(ws, bobs), source_audience(ws, shared)) == ("bob", "")
    assert source_audience(ws, source_path("runtime", "bob-s", "bob-s-9")) is None
    broken = copy / ws.archive.stored_path(shared)
    broken.chmod(0o600)
    broken.write_text("not a source\n")
    assert source_audience(ws, shared) is None
    ws.close()


def test_a_requesters_view_of_a_topic_is_its_records_the_headings_above_them_once_and_their_notes(
    tmp_path: Any,
) -> None:
    """What a requester's dry-run diff is built from (``RequesterGuard._visible``), line for line: each visible
    record under the chain of headings above it — each heading once, a deeper one after its parent, a
    sibling section's heading only where a visible record is under it — and the footnote definitions its
    records use; nothing of another requester's records, their headings alone or their notes."""
    from scriptorium.access.guard import RequesterGuard
    from scriptorium.audience import Principal
    from scriptorium.workspace import MemoryWorkspace, TopicChange
    from scriptorium.workspace.sources import SourceMessage

    ws = MemoryWorkspace.init(tmp_path / "memory")
    owners = {"a1": "alice", "b1": "bob", "b2": "bob", "a2": "alice", "s1": None, "a3": "alice"}
    turns = [
        SourceMessage("test", "t", mid, "user", "2026-11-20T10:00:00Z", f"said {mid}", audience=who)
        for mid, who in owners.items()
    ]
    with ws.lock():
        paths = ws.archive_sources(turns)
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    line = {mid: f"Note {mid} [k](test/t/{mid})." for mid in owners}
    line["a3"] = "Note a3 is a record of two lines,\nthis one and [k](test/t/a3)."  # shown whole, never half
    text = (
        "# Trip\n\n## Day zero\n\nEarlier b2 [k](test/t/b2).\n\n## Day one\n\n"
        + line["a1"]
        + "\n\n"
        + line["b1"]
        + "\n\n## Day two\n\n"
        + line["b2"]
        + "\n\n"
        "### Evening\n\n"
        + line["a2"]
        + "\n\n## Day three\n\n"
        + "Later b1 [k](test/t/b1)."
        + "\n\n# Other\n\n"
        + line["s1"]
        + "\n\n"
        + line["a3"]
        + "\n"
    )
    ws.apply_changes([TopicChange("topics/trip.md", "create", text)], message="trip")
    snap = ws.snapshot()
    topic = snap.topics["topics/trip.md"]
    shown = "".join(RequesterGuard(ws, Principal("propose", "alice"), 0)._visible(snap, topic))
    installed = (tmp_path / "memory" / "topics" / "trip.md").read_text()
    lines = installed.splitlines()
    record = {m: next(x for x in lines if x.startswith(f"Note {m} ")) for m in ("a1", "a2", "s1", "a3")}
    record["a3"] += "\n" + lines[lines.index(record["a3"]) + 1]
    assert record["a3"].splitlines()[1].startswith("this one and "), record["a3"]
    notes = [x for x in installed.splitlines() if x.startswith("[^")]
    label = {m: next(n for n in notes if n.endswith(f".md#source-{m})")) for m in owners}
    expected = (
        f"# Trip\n\n## Day one\n\n{record['a1']}\n\n## Day two\n\n### Evening\n\n{record['a2']}\n\n"
        f"# Other\n\n{record['s1']}\n\n{record['a3']}\n\n" + "".join(f"{label[m]}\n" for m in ("a1", "a2", "s1", "a3"))
    )
    assert shown == expected, shown
    everything = "".join(RequesterGuard(ws, Principal("propose", "bob"), 0)._visible(snap, topic))
    assert "Note a1" not in everything and "## Day three" in everything and "### Evening" not in everything
    assert "## Day zero" not in shown, "a section with none of alice's records shows no heading to her"


def test_a_merged_record_is_shown_to_its_requester_by_its_first_id_with_both_notes(tmp_path: Any) -> None:
    """A record that merged two (two block IDs on its line) is found by its first ID, its memory ID: alice
    sees her merged record whole, with the notes of both its citations, and none of bob's."""
    from scriptorium.access.guard import RequesterGuard
    from scriptorium.audience import Principal
    from scriptorium.workspace import MemoryWorkspace, TopicChange
    from scriptorium.workspace.sources import SourceMessage

    ws = MemoryWorkspace.init(tmp_path / "memory")
    owners = {"a1": "alice", "a2": "alice", "b1": "bob"}
    turns = [
        SourceMessage("test", "t", mid, "user", "2026-11-20T10:00:00Z", f"said {mid}", audience=who)
        for mid, who in owners.items()
    ]
    with ws.lock():
        paths = ws.archive_sources(turns)
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    trip = "# Trip\n\nOne [k](test/t/a1).\n\nTwo [k](test/t/a2).\n\nBob's [k](test/t/b1).\n"
    ws.apply_changes([TopicChange("topics/trip.md", "create", trip)], message="trip")
    installed = (tmp_path / "memory" / "topics" / "trip.md").read_text()
    one, two, bobs = re.findall(r"\^(m-[0-9a-z]{12})", installed)
    e1, e2, e3 = re.findall(r"^\[\^(e-[0-9a-z]+)\]:", installed, re.M)
    notes = {e: f"[^{e}]: [k](../sources/test/8e/t.md#source-{m})\n" for e, m in ((e1, "a1"), (e2, "a2"), (e3, "b1"))}
    merged = f"One and two [^{e1}] [^{e2}]. ^{one} ^{two}"
    text = f"# Trip\n\n{merged}\n\nBob's [^{e3}]. ^{bobs}\n\n" + "".join(notes.values())
    ws.apply_changes([TopicChange("topics/trip.md", "update", text)], message="merge")
    snap = ws.snapshot()
    assert snap.record(one) is not None and snap.record(one).block_ids == (one, two)  # type: ignore[union-attr]
    shown = "".join(RequesterGuard(ws, Principal("propose", "alice"), 0)._visible(snap, snap.topics["topics/trip.md"]))
    assert shown == f"# Trip\n\n{merged}\n\n{notes[e1]}{notes[e2]}", shown


def test_the_guard_alone_refuses_a_write_tokens_delete_of_a_shared_or_hidden_record(tmp_path: Any) -> None:
    """The plan guard on its own, without the early check before it (each check stands if the other is
    lost): a delete changes no citation, so only the guard's look at what a plan touches stands between a
    write token and a shared record (FORBIDDEN) or another requester's (NOT_FOUND, as if none); its own
    record goes."""
    from scriptorium.access.guard import guarded
    from scriptorium.audience import Principal
    from scriptorium.changes.structured import DeleteRecord
    from scriptorium.changes.update import update as update_memory
    from scriptorium.errors import Forbidden, NotFound
    from scriptorium.workspace import MemoryWorkspace
    from tests.requesters_fixtures import requesters_world

    world = requesters_world(tmp_path / "state")
    scope = json.loads('"write"')  # as a token file holds it: equal to the literal, never the same object
    assert scope == "write" and scope is not "write"  # noqa: F632
    bob = Principal(scope, "bob")
    (shared, *_) = sorted(world.ids("shared-s"))
    (alices, *_) = sorted(world.ids("alice-s"))
    (bobs, *_) = sorted(world.ids("bob-s"))
    with MemoryWorkspace(world.state / "memory") as ws:
        before = ws.revision
        for memory_id, refused, told in (
            (shared, Forbidden, rf"record \^{shared} is shared: a write token changes only its requester's own"),
            (alices, NotFound, rf": no record \^{alices}$"),
        ):
            arguments, guard = guarded(ws, bob, {"message": "drop", "memory_changes": [DeleteRecord(memory_id)]})
            with pytest.raises(refused, match=told):
                update_memory(ws, **arguments, origin="model", audience="bob", guard=guard)
            assert ws.revision == before
        arguments, guard = guarded(ws, bob, {"message": "drop", "memory_changes": [DeleteRecord(bobs)]})
        update_memory(ws, **arguments, origin="model", audience="bob", guard=guard)
        assert ws.snapshot().record(bobs) is None


def test_the_guard_alone_sees_a_change_of_citations_only_whichever_way_they_sort(tmp_path: Any) -> None:
    """A plan that leaves a record's line alone and changes only what its footnotes cite is a change of that
    record to the guard: re-pointing another requester's record is refused as naming none, and re-pointing
    a write token's own record at a source it may not see as citing none — whether the new paths sort after
    the old ones or before. So is a change of its text alone, sorting after the old text or before it."""
    from scriptorium.access.guard import RequesterGuard
    from scriptorium.audience import Principal
    from scriptorium.errors import NotFound, ValidationRejected
    from scriptorium.workspace import MemoryWorkspace
    from scriptorium.workspace.staging import Staging
    from tests.requesters_fixtures import requesters_world

    world = requesters_world(tmp_path / "state")
    (alices, *_) = sorted(world.ids("alice-s"))
    (bobs, *_) = sorted(world.ids("bob-s"))
    with MemoryWorkspace(world.state / "memory") as ws:
        before = ws.revision
        snap = ws.snapshot()
        for memory_id, old, new, refused in (
            (alices, "alice-s-1", "alice-s-2", NotFound),  # the new path sorts after the old
            (bobs, "bob-s", "alice-s", ValidationRejected),  # before
        ):
            record = snap.record(memory_id)
            assert record is not None and any(old in p for p in snap.topics[record.topic].cited_paths(record))

            def repoint(stage: Staging, topic: str = record.topic, old: str = old, new: str = new) -> None:
                text = stage.read(topic)
                lines = [line.replace(old, new) if line.startswith("[^") else line for line in text.split("\n")]
                assert lines != text.split("\n"), "a footnote definition changed"
                stage.write(topic, "\n".join(lines))

            guard = RequesterGuard(ws, Principal("write", "bob"), creates=0)
            with pytest.raises(refused):
                ws.transact(repoint, message="re-point", guard=guard)
            assert ws.revision == before

            def reword(stage: Staging, topic: str = record.topic, memory_id: str = memory_id) -> None:
                lines = stage.read(topic).split("\n")
                (at,) = [n for n, line in enumerate(lines) if line.endswith(f"^{memory_id}")]
                lines[at] = lines[at].replace(" [^", " too [^", 1)  # its text alone, sorting after the old
                stage.write(topic, "\n".join(lines))

            def reword_before(stage: Staging, topic: str = record.topic, memory_id: str = memory_id) -> None:
                lines = stage.read(topic).split("\n")
                (at,) = [n for n, line in enumerate(lines) if line.endswith(f"^{memory_id}")]
                lines[at] = "0 " + lines[at]  # its text alone, sorting before the old
                stage.write(topic, "\n".join(lines))

            if refused is NotFound:
                for edit in (reword, reword_before):
                    with pytest.raises(NotFound):
                        ws.transact(edit, message="reword", guard=RequesterGuard(ws, Principal("write", "bob"), 0))
                    assert ws.revision == before
            if refused is NotFound:  # the record's own line is unchanged: only its citation moved
                staged = ws.transact(repoint, message="re-point", dry_run=True)
                assert staged.diff and f"^{memory_id}" not in "".join(
                    line for line in staged.diff.splitlines() if line.startswith(("+", "-"))
                )


def test_the_guard_alone_refuses_a_write_tokens_record_that_would_not_be_its_own(tmp_path: Any) -> None:
    """The request's own evidence makes what a write token writes its own; without it (the guard alone, as
    if that step were lost) a record citing only shared sources would be shared, and the guard refuses it.
    Citing the requester's own source, the same change goes through."""
    from scriptorium.access.guard import RequesterGuard
    from scriptorium.audience import Principal
    from scriptorium.errors import Forbidden
    from scriptorium.workspace import MemoryWorkspace
    from scriptorium.workspace.staging import Staging
    from tests.requesters_fixtures import requesters_world

    world = requesters_world(tmp_path / "state")
    with MemoryWorkspace(world.state / "memory") as ws:
        before = ws.revision

        def create(stage: Staging, cited: str) -> None:
            stage.write("topics/bobs-notes.md", f"# Notes\n\nA memo of bob's [memo]({source_of(cited)}).\n")

        guard = RequesterGuard(ws, Principal("write", "bob"), creates=1)
        with pytest.raises(Forbidden, match=r"record \^m-[0-9a-z]{12} would not be bob's own"):
            ws.transact(lambda stage: create(stage, "shared-s"), message="shared", guard=guard)
        assert ws.revision == before
        guard = RequesterGuard(ws, Principal("write", "bob"), creates=1)
        ws.transact(lambda stage: create(stage, "bob-s"), message="own", guard=guard)
        assert "A memo of bob's" in (ws.root / "topics/bobs-notes.md").read_text()


def test_a_refusal_quoting_a_record_the_requester_sees_names_it(served: Served) -> None:
    """The other side of hiding what a requester may not see: a refusal that quotes a shared record names
    it, as it would to the owner."""
    s = served
    (bobs_record,) = sorted(s.world.ids("bob-s"))[:1]
    pin = create(f"Shared memo: see [[topics/x#^{bobs_record}|this]].", source_of("shared-s"), topic="topics/pins.md")
    pinned = s.call("owner", "POST", "/api/memory/changes", json=pin)
    assert pinned.status_code == 200, pinned.text
    (pin_id,) = pinned.json()["created_ids"]
    drop = {"message": "drop it", "memory_changes": [{"op": "delete_record", "memory_id": bobs_record}]}
    refused = s.call("bob", "POST", "/api/memory/changes", json=drop)
    assert refused.status_code == 422 and refused.json()["reason"] == "DANGLING_LINK", refused.text
    assert refused.json()["message"] == f"deleting ^{bobs_record} would leave a dangling link from ^{pin_id}"


def test_a_requesters_record_may_link_to_a_record_it_sees(served: Served) -> None:
    s = served
    (shared,) = sorted(s.world.ids("shared-s"))[:1]
    topic = topic_of(s, "shared-s")
    made = s.call("bob", "POST", "/api/memory/changes", json=create(f"Memo: [[{topic}#^{shared}]]", source_of("bob-s")))
    assert made.status_code == 200, made.text
    (memory_id,) = made.json()["created_ids"]
    record = s.call("bob", "GET", f"/api/memory/records/{memory_id}").json()
    assert record["content"].startswith(f"Memo: [[{topic}#^{shared}]]"), record


def test_the_guard_alone_refuses_a_change_that_would_create_more_records_than_it_asks(tmp_path: Any) -> None:
    """Content that smuggles a record in (a line break, a heading, a second cited line) past the early check:
    the plan holds two new records where the change asks for one, and the guard refuses it."""
    from scriptorium.access.guard import guarded
    from scriptorium.audience import Principal
    from scriptorium.changes.structured import Citation, CreateRecord, Destination
    from scriptorium.changes.update import update as update_memory
    from scriptorium.errors import InvalidArgument
    from scriptorium.workspace import MemoryWorkspace
    from tests.requesters_fixtures import requesters_world

    world = requesters_world(tmp_path / "state")
    smuggled = f"Memo: x [y]({source_of('bob-s')})\n# H\nMemo: y"
    change = CreateRecord(
        smuggled, "2026-11-20", (Citation(source_of("bob-s"), "memo"),), Destination("topics/notes.md")
    )
    with MemoryWorkspace(world.state / "memory") as ws:
        before = ws.revision
        arguments, guard = guarded(ws, Principal("write", "bob"), {"message": "m", "memory_changes": [change]})
        with pytest.raises(InvalidArgument, match=r"would create 2 record\(s\) where it asks for 1"):
            update_memory(ws, **arguments, origin="model", audience="bob", guard=guard)
        assert ws.revision == before
