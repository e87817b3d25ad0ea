"""A write token's and a runtime token's storage, bounded per requester and day, over real HTTP.

Before the quota, 60 requests of a write token added 12.8 MB to git history in 3 s, and the runtime nodes
route (8 MB bodies) took any number of them. Here the limits are set low (``SCRIPTORIUM_*_QUOTA_BYTES``);
a request past them is refused with ``QUOTA_EXCEEDED`` (429) and changes no stored byte; the count
survives a restart and is shared by a second server on the same state folder; the owner is never
counted; each requester has its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.attacks import create
from tests.helpers.requesters import Served, copy_served
from tests.helpers.served import Server
from tests.helpers.tokens import scoped_token
from tests.requesters_fixtures import source_of
from tests.security.stored import changed, stored

WRITE_LIMIT = 400_000
RUNTIME_LIMIT = 300_000
FILLER = " ".join(f"word{n}" for n in range(3000))  # about 26 KB of one paragraph


@pytest.fixture
def limited(tmp_path: Path, template: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("SCRIPTORIUM_WRITE_QUOTA_BYTES", str(WRITE_LIMIT))
    monkeypatch.setenv("SCRIPTORIUM_RUNTIME_QUOTA_BYTES", str(RUNTIME_LIMIT))
    made = copy_served(template, tmp_path)  # its servers take the environment
    yield made
    made.server.close()


def git_bytes(state: Path) -> int:
    return sum(p.stat().st_size for p in (state / "memory" / ".git").rglob("*") if p.is_file())


def _refused(answer: httpx.Response) -> None:
    assert answer.status_code == 429, answer.text
    body = answer.json()
    assert body["reason"] == "QUOTA_EXCEEDED" and not body["retryable"] and body["guidance"], body


def test_a_write_tokens_day_is_bounded_across_restarts_and_processes(limited: Served) -> None:
    s = limited
    grown_from = git_bytes(s.state)

    def note(n: int, who: str = "bob", **extra: Any) -> httpx.Response:
        body = {**create(f"Memo {n}: {FILLER}", source_of("bob-s"), topic="topics/bulk.md"), **extra}
        return s.call(who, "POST", "/api/memory/changes", json=body)

    applied = 0
    for n in range(60):
        answer = note(n)
        if answer.status_code != 200:
            break
        applied += 1
    _refused(answer)
    assert 3 <= applied < 20, applied
    assert git_bytes(s.state) - grown_from <= WRITE_LIMIT, "what the day added to git is within the quota"
    before, revision = stored(s.state), s.revision()
    _refused(note(99))
    assert s.revision() == revision and changed(before, stored(s.state)) == [], "a refusal stores nothing"

    dry = note(100, dry_run=True)  # a dry run stores nothing, and is not counted
    assert dry.status_code == 200 and dry.json()["dry_run"], dry.text

    s.restart()
    _refused(note(101))
    second = Server(s.state)  # another process serving the same state folder
    try:
        body = create(f"Memo: {FILLER}", source_of("bob-s"), topic="topics/bulk.md")
        _refused(httpx.post(f"{second.url}/api/memory/changes", json=body,
                            headers={"Authorization": f"Bearer {s.tokens['bob']}"}, timeout=60))  # fmt: skip
    finally:
        second.close()

    # The owner is never counted; another requester's write token has its own day.
    owner = s.call("owner", "POST", "/api/memory/changes", json=create(f"Memo: {FILLER}", source_of("bob-s")))
    assert owner.status_code == 200, owner.text
    s.tokens["carol"] = scoped_token(s.state, "write", "--requester", "carol")
    carol = s.call("carol", "POST", "/api/memory/changes", json=create("Memo: mine.", source_of("shared-s")))
    assert carol.status_code == 200, carol.text
    ledger = sorted(p.name for p in (s.state / "memory" / ".scriptorium" / "quota").glob("*.json"))
    assert ledger == ["write.bob.json", "write.carol.json"]


def _nodes(session: str, first: int, count: int, size: int) -> dict[str, Any]:
    nodes = [
        {"id": f"{session}-n{n}", "parent_id": f"{session}-n{n - 1}" if n else None, "kind": "user",
         "content": f"turn {n} " + "x" * size}
        for n in range(first, first + count)
    ]  # fmt: skip
    return {"nodes": nodes, "head": nodes[-1]["id"]}


def test_a_runtime_tokens_node_bytes_are_bounded(limited: Served) -> None:
    s = limited
    posted = 0
    for batch in range(40):
        answer = s.call("runtime-alice", "POST", "/api/sessions/q-1/nodes", json=_nodes("q-1", batch * 2, 2, 25_000))
        if answer.status_code != 200:
            break
        posted += 1
    _refused(answer)
    assert 2 <= posted <= RUNTIME_LIMIT // 50_000, posted
    before = stored(s.state)
    _refused(s.call("runtime-alice", "POST", "/api/sessions/q-2/nodes", json=_nodes("q-2", 0, 2, 25_000)))
    assert changed(before, stored(s.state)) == [], "a refused batch stores nothing (nor a new session)"
    s.restart()
    _refused(s.call("runtime-alice", "POST", "/api/sessions/q-1/nodes", json=_nodes("q-1", 200, 2, 25_000)))
    # A runtime token made without a requester is counted by itself.
    other = s.call("runtime", "POST", "/api/sessions/q-3/nodes", json=_nodes("q-3", 0, 2, 25_000))
    assert other.status_code == 200, other.text
    ledger = sorted(p.name for p in (s.state / "quota").glob("*.json"))
    assert ledger[0] == "runtime.alice.json" and ledger[1].startswith("runtime.token-") and len(ledger) == 2
