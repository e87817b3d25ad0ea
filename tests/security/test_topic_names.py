"""Topic names that only look like another topic's, or the core's.

``topics/Core.md`` is the core on a case-insensitive file system, and on a page ``topics/corе.md`` (a
Cyrillic ``е``), ``topics/ｃｏｒｅ.md`` and ``topics/core\\u200b.md`` pass for it. A new topic's name is
normalized (NFKC, case-folded, invisible characters removed, look-alike characters mapped: UTS #39's
confusables) and refused (``INVALID_PATH``) when it comes out as the core's or an existing topic's; one
holding a character that shows as nothing is refused outright. Over real HTTP (`scriptorium serve`), for a
write token and for the owner; the key itself: tests/workspace/test_topic_name_keys.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.attacks import create
from tests.helpers.requesters import Served, copy_served
from tests.helpers.topic_names import CORE, INVISIBLE, LOOK_ALIKES
from tests.requesters_fixtures import source_of
from tests.security.stored import changed, stored


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, template: Any) -> Any:
    """One server for the refusals (none of them changes a byte: each test checks)."""
    made = copy_served(template, tmp_path_factory.mktemp("names"))
    yield made
    made.server.close()


def _refused(s: Served, who: str, body: dict[str, Any]) -> dict[str, Any]:
    before, revision = stored(s.state), s.revision()
    answer = s.call(who, "POST", "/api/memory/changes", json=body)
    assert answer.status_code == 400 and answer.json()["reason"] == "INVALID_PATH", answer.text
    assert answer.json()["guidance"], answer.text
    assert s.revision() == revision and changed(before, stored(s.state)) == []
    refusal: dict[str, Any] = answer.json()
    return refusal


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_a_write_token_cannot_name_a_topic_like_the_core(shared: Served, name: str) -> None:
    refusal = _refused(shared, "bob", create("Memo: obey.", source_of("bob-s"), topic=LOOK_ALIKES[name]))
    assert CORE in refusal["message"], refusal


@pytest.mark.parametrize("name", sorted(INVISIBLE))
def test_a_write_token_cannot_hide_a_character_in_a_topic_name(shared: Served, name: str) -> None:
    path = f"topics/core{INVISIBLE[name]}.md"
    refusal = _refused(shared, "bob", create("Memo: obey.", source_of("bob-s"), topic=path))
    assert f"U+{ord(INVISIBLE[name]):04X}" in refusal["message"], refusal


def test_a_write_token_cannot_name_a_topic_like_another_and_is_not_told_which(shared: Served) -> None:
    """``topics/MIXED.md`` is ``topics/mixed.md`` (a topic of the owner's alone); alice's topic, in
    capitals, is hers: both refused, and the refusal names no topic but the one bob sent."""
    s = shared
    alices = next(t for t in s.call("owner", "GET", "/api/memory/topics").json()["topics"] if "alice-s" in t)
    for taken, attempt in (("topics/mixed.md", "topics/MIXED.md"), (alices, alices.replace("alice", "ALICE"))):
        refusal = _refused(s, "bob", create("Memo: mine.", source_of("bob-s"), topic=attempt))
        assert refusal["message"] == f"topic path {attempt} looks like an existing topic", refusal
        assert taken not in str(refusal)


def test_the_owner_is_refused_a_look_alike_too_and_told_which(shared: Served) -> None:
    s = shared
    body = {"message": "m", "changes": [{"path": "topics/Mixed.md", "action": "create",
                                         "content": f"2026-11-21: Memo [x]({source_of('shared-s')}).\n"}]}  # fmt: skip
    refusal = _refused(s, "owner", body)
    assert "topics/mixed.md" in refusal["message"], refusal
    body["changes"][0]["path"] = "topics/Core.md"
    assert CORE in _refused(s, "owner", body)["message"]


def test_a_name_that_looks_like_no_other_is_taken_and_then_its_look_alikes_are_not(served: Served) -> None:
    s = served
    for topic, look_alike in (
        ("topics/café-notes.md", "topics/CAFE\u0301-NOTES.md"),
        ("topics/заметки.md", "topics/ЗАМЕТКИ.md"),
        ("topics/cores.md", "topics/c\u043eres.md"),
    ):
        made = s.call("bob", "POST", "/api/memory/changes", json=create("Memo: fine.", source_of("bob-s"), topic=topic))
        assert made.status_code == 200, made.text
        record = s.call("bob", "GET", f"/api/memory/records/{made.json()['created_ids'][0]}").json()
        assert record["topic_path"] == topic
        refusal = _refused(s, "bob", create("Memo: again.", source_of("bob-s"), topic=look_alike))
        assert refusal["message"] == f"topic path {look_alike} looks like an existing topic", refusal


@pytest.fixture
def served(tmp_path: Path, template: Any) -> Any:
    made = copy_served(template, tmp_path)
    yield made
    made.server.close()
