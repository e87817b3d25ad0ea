"""Oracles: what a requester could learn of what it may not see from how its own requests are answered.

Over real HTTP (`scriptorium serve`), in the world of ``tests.requesters_fixtures``: alice (a propose token)
and bob (a write token) each with a private session, whose topic is named after it. Each attack is the
same request aimed at something that does not exist, with one name swapped; its answer must be the
other's, byte for byte once the names are swapped back and the fresh IDs a request is given are blanked.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from tests.helpers.attacks import create, topic_of
from tests.helpers.requesters import Served, copy_served
from tests.helpers.tokens import scoped_token
from tests.requesters_fixtures import source_of
from tests.security.stored import changed, stored

_FRESH = (
    (re.compile(r"\b[me]-[0-9a-z]{12}\b"), "<id>"),  # record and evidence IDs, allocated per request
    (re.compile(r"\bp-[0-9a-f]{12}\b"), "<proposal>"),
    (re.compile(r"\b[0-9a-f]{20}\b"), "<request>"),  # the archived request's key
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?"), "<time>"),
)


@pytest.fixture
def served(tmp_path: Any, template: Any) -> Any:
    made = copy_served(template, tmp_path)
    yield made
    made.server.close()


def scrubbed(answer: httpx.Response, swap: tuple[str, str] = ("", "")) -> tuple[int, str]:
    """The answer's status and body, ``swap[0]`` written as ``swap[1]`` and fresh IDs blanked."""
    text = json.dumps(answer.json(), sort_keys=True)
    if swap[0]:
        text = text.replace(swap[0], swap[1])
    for pattern, blank in _FRESH:
        text = pattern.sub(blank, text)
    return answer.status_code, text


def other(who: str) -> str:
    return "bob" if who == "alice" else "alice"


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_a_preview_never_tells_whether_a_topic_it_cannot_see_exists(served: Served, who: str) -> None:
    """A record placed in the other requester's topic (named after its private session) is previewed as one
    placed in a topic that does not exist: the diff's header, its lines, the changed files, everything."""
    s = served
    hidden = topic_of(s, f"{other(who)}-s")
    missing = hidden.replace(f"{other(who)}-s", "carol-s")  # as deep, as long: only existence differs
    assert hidden != missing and missing not in s.call("owner", "GET", "/api/memory/topics").json()["topics"]
    before = stored(s.state)

    def preview(topic: str) -> httpx.Response:
        answer = s.call(
            who, "POST", "/api/memory/changes", json={**create("Memo: probe.", source_of(f"{who}-s"), topic=topic),
                                                       "dry_run": True},
        )  # fmt: skip
        assert answer.status_code == (202 if who == "alice" else 200), answer.text
        return answer

    attack, absent = preview(hidden), preview(missing)
    diff = (attack.json()["dry_run"] if who == "alice" else attack.json())["diff"]
    assert diff.startswith(f"--- /dev/null\n+++ b/{hidden}\n"), diff
    assert scrubbed(attack, (hidden, missing)) == scrubbed(absent), (attack.text, absent.text)
    if who == "alice":  # the held proposals, as she reads them back
        a, m = (s.call(who, "GET", f"/api/memory/proposals/{r.json()['id']}") for r in (attack, absent))
        assert scrubbed(a, (hidden, missing)) == scrubbed(m)
    else:  # a dry run keeps every byte
        assert changed(before, stored(s.state)) == []
    # What the requester sees of a topic is still a file: its own topic's preview has both sides.
    own = topic_of(s, f"{who}-s")
    mine = preview(own).json()
    assert (mine["dry_run"] if who == "alice" else mine)["diff"].startswith(f"--- a/{own}\n+++ b/{own}\n")


def test_deleting_its_last_record_of_a_topic_tells_nothing_of_what_else_the_topic_holds(served: Served) -> None:
    """bob deletes his record from the topic that also holds alice's record (``mixed``: the owner's alone)
    and from his own topic: either way the preview's new side is /dev/null, so whether the file stays
    (other records in it) is not told."""
    s = served
    made = s.call("bob", "POST", "/api/memory/changes", json=create("Memo: mine.", source_of("bob-s"),
                                                                      topic="topics/mixed.md"))  # fmt: skip
    assert made.status_code == 200, made.text
    (mine,) = made.json()["created_ids"]
    answer = s.call(
        "bob",
        "POST",
        "/api/memory/changes",
        json={"message": "m", "dry_run": True, "memory_changes": [{"op": "delete_record", "memory_id": mine}]},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["diff"].startswith("--- a/topics/mixed.md\n+++ /dev/null\n"), answer.text


STOLEN, MISSING = source_of("alice-s"), "runtime/nobody-s/nobody-s-1"
"""alice's archived source (bob may not cite it) and one that was never archived, of the same shape."""


def _citing(where: str, session: str, cited: str) -> dict[str, Any]:
    own = source_of(session)
    if where == "sources":
        return create("Memo: a note.", own, cited)
    if where == "archive path":
        provider, thread, message = cited.split("/")
        return create("Memo: a note.", own, f"sources/{provider}/{thread}/{message}.md")
    assert where == "inline, in the core"
    return create(f"Memo: see [x]({cited}).", own, topic="topics/core.md")


@pytest.mark.parametrize(
    ("who", "where"),
    [("bob", "sources"), ("bob", "archive path"), ("bob", "inline, in the core"), ("carol", "sources"),
     ("carol", "archive path")],
)  # fmt: skip
def test_citing_a_source_it_may_not_see_is_refused_as_citing_one_that_is_not_archived(
    served: Served, who: str, where: str
) -> None:
    """In the record's ``sources``, in the archive's path form, inline in a record aimed at the core (which a
    write token may not touch: refused for that once the citation passed): the status, the reason, the
    message, the guidance, the path, every field is the one a missing source gets, and nothing is stored.
    bob is a write token; carol a propose token of a requester with no session of her own (she cites the
    shared one). An inline citation elsewhere: tests/security/test_scope_attacks.py."""
    s = served
    if who == "carol":
        s.tokens["carol"] = scoped_token(s.state, "propose", "--requester", "carol")
    before, revision = stored(s.state), s.revision()
    session = "bob-s" if who == "bob" else "shared-s"
    attack = s.call(who, "POST", "/api/memory/changes", json=_citing(where, session, STOLEN))
    absent = s.call(who, "POST", "/api/memory/changes", json=_citing(where, session, MISSING))
    assert attack.status_code == 422 and attack.json()["reason"] == "INVALID_SOURCE", attack.text
    assert scrubbed(attack, (STOLEN, MISSING)) == scrubbed(absent), (attack.text, absent.text)
    assert "blue notebook" not in attack.text
    assert s.revision() == revision
    assert changed(before, stored(s.state)) == []
