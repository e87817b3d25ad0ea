"""A forget never widens who sees a record (issue 54, items 5 and 15), over real HTTP and the CLI.

The owner writes a record citing alice's private source and a shared one: its audience is alice's alone.
Forgetting alice's session used to drop only the citation and keep the text, so the record then cited the
shared source alone and bob's search found alice's words. Now a record citing any forgotten source is
deleted whole; the forget's answer names it with the sources it cited besides (``deleted_shared``), and with
``--purge-history`` no git object keeps its text.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scriptorium.workspace.paths import source_path
from tests.helpers.hooks import SCRIPT
from tests.helpers.requesters import Served, copy_served
from tests.requesters_fixtures import World, source_of

TEXT = "ALICEDERIVED alice salary is 98765, wifi pelican"
# The number with its words: "98765" alone turns up by chance in an object ID or a commit time (one run in a hundred).
WORDS = (b"ALICEDERIVED", b"salary is 98765", b"pelican")
QUERY = {"q": "alicederived salary 98765 wifi pelican", "limit": 20}


@pytest.fixture
def served(tmp_path: Path, template: tuple[World, dict[str, str]]) -> Iterator[Served]:
    made = copy_served(template, tmp_path)
    yield made
    made.server.close()


def _derived(s: Served) -> str:
    """The owner's record citing alice's private source, then a shared one: alice's alone to see."""
    body = {
        "message": "a derived note",
        "memory_changes": [
            {
                "op": "create_record",
                "content": TEXT,
                "time": "2026-11-21",
                "sources": [
                    {"source": source_of("alice-s"), "label": "alice"},
                    {"source": source_of("shared-s"), "label": "standup"},
                ],
                "destination": {"topic_path": "topics/derived.md"},
            }
        ],
    }
    made = s.call("owner", "POST", "/api/memory/changes", json=body)
    assert made.status_code == 200, made.text
    (created,) = made.json()["created_ids"]
    return str(created)


def _finds(s: Served, who: str, route: str = "/api/memory/search") -> bool:
    """Whether ``who``'s search answers with the record (its snippet quotes it)."""
    found = s.call(who, "GET", route, params=QUERY)
    assert found.status_code == 200, found.text
    return "ALICEDERIVED" in found.text


def _files_holding(root: Path) -> list[str]:
    """Files below ``root`` (its git folder left out) holding any of the record's words."""
    files = [p for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts]
    return sorted(str(p.relative_to(root)) for p in files if any(w in p.read_bytes() for w in WORDS))


def _forget(s: Served, how: str, **body: Any) -> dict[str, Any]:
    if how == "rest":
        done = s.call("owner", "POST", "/api/memory/forget", json={"session": "alice-s", **body})
        assert done.status_code == 200, done.text
        answer: dict[str, Any] = done.json()
        return answer
    flags = [flag for name, flag in (("purge_history", "--purge-history"), ("dry_run", "--dry-run")) if body.get(name)]
    ran = subprocess.run(
        [str(SCRIPT), "memory", "forget", "--session", "alice-s", *flags, "--json", "--state", str(s.state)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    answer = json.loads(ran.stdout)
    return answer


@pytest.mark.parametrize(("how", "purge"), [("rest", False), ("cli", True), ("rest", True)])
def test_forgetting_alices_session_never_shows_bob_what_her_source_gave_a_record(
    served: Served, how: str, purge: bool
) -> None:
    s = served
    created = _derived(s)
    assert _finds(s, "alice") and _finds(s, "owner")
    assert not _finds(s, "bob"), "before the forget the record is alice's alone"
    assert not _finds(s, "runtime", "/api/runtime/search")

    # The page's Forget… shows the dry run first: the record, its text, and what else it cites.
    with httpx.Client(base_url=s.server.url, timeout=60) as page:
        page.post("/memory/login", data={"token": s.server.token})
        item = {"section": "sources", "item": source_path(*source_of("alice-s").split("/")), "view": "forget-session"}
        confirm = page.get("/memory", params=item).text.split('class="forget-confirm"')[1].split("</section>")[0]
    assert f"<code>^{created}</code> topics/derived.md: {TEXT}" in confirm
    assert f"also cited: {source_of('shared-s')}" in confirm and "deleted whole too" in confirm
    dry = _forget(s, how, dry_run=True, purge_history=purge)
    assert _finds(s, "owner"), "a dry run changes nothing"
    done = _forget(s, how, purge_history=purge, why="asked to")

    # Bob (a write token), a runtime token of no requester and alice herself: no one finds the text.
    for who, route in [
        ("bob", "/api/memory/search"),
        ("runtime", "/api/runtime/search"),
        ("alice", "/api/memory/search"),
        ("owner", "/api/memory/search"),
    ]:
        assert not _finds(s, who, route), who
    gone = s.call("owner", "GET", f"/api/memory/records/{created}")
    assert gone.status_code == 404, "the record is deleted whole, whatever else it cited"
    assert _files_holding(s.state / "memory") == [], "no topic, view or index cache keeps its words"

    # The answer (and the dry run before it) names the record and what else it cited, quoting the text only
    # in the dry run: the forget's own answer holds nothing of what it removed.
    # (The world's record of alice's and bob's sources goes too, named with bob's.)
    (mixed,) = s.world.ids("mixed")
    shared = {
        created: {"memory_id": created, "topic_path": "topics/derived.md", "other_sources": [source_of("shared-s")]},
        mixed: {"memory_id": mixed, "topic_path": "topics/mixed.md", "other_sources": [source_of("bob-s")]},
    }
    assert {created, mixed} <= set(done["deleted"]) and "kept" not in done
    assert {entry["memory_id"]: entry for entry in done["deleted_shared"]} == shared
    assert "ALICEDERIVED" not in json.dumps(done)
    assert {created, mixed} <= set(dry["deleted"])
    quoted = {entry["memory_id"]: entry.pop("content") for entry in dry["deleted_shared"]}
    assert quoted[created] == TEXT and {entry["memory_id"]: entry for entry in dry["deleted_shared"]} == shared

    if purge:
        objects = subprocess.run(
            ["git", "-C", str(s.state / "memory"), "cat-file", "--batch-all-objects", "--batch"],
            capture_output=True,
            check=True,
        ).stdout
        assert not [w for w in WORDS if w in objects], "no git object, reachable or not, holds the record's text"
