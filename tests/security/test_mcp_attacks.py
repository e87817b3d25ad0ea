"""The attacks of ``test_scope_attacks`` over MCP's streamable HTTP (``scriptorium mcp --http``), each
request speaking for its own token: alice (propose) and bob (write), each with a private session.

Every attack is answered as the same call aimed at something that does not exist is, and no byte of the
other requester's records (their text, labels or source paths) is in any answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from tests.conftest import git_log
from tests.helpers.attacks import ALICE_PRIVATE, BOB_PRIVATE, assert_no_leak, create
from tests.helpers.mcp import mcp_http, payload
from tests.helpers.tokens import requester_token
from tests.requesters_fixtures import World, requesters_world, source_of

FAKE = "m-zzzzzzzzzzzz"


class Live:
    def __init__(self, world: World, url: str) -> None:
        self.world, self.url = world, url
        self.tokens = {
            "alice": requester_token(world.state, "propose", "alice"),
            "bob": requester_token(world.state, "write", "bob"),
        }

    def call(self, who: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        async def work() -> dict[str, Any]:
            headers = {"Authorization": f"Bearer {self.tokens[who]}"}
            async with (
                create_mcp_http_client(headers=headers) as http,
                streamable_http_client(self.url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return payload(await session.call_tool(tool, arguments))

        return anyio.run(work)

    def topic_of(self, session: str) -> str:
        ws_topics = Path(self.world.state / "memory" / "topics")
        (memory_id, *_) = sorted(self.world.ids(session))
        for path in ws_topics.rglob("*.md"):
            if f"^{memory_id}" in path.read_text():
                return str(path.relative_to(self.world.state / "memory"))
        raise AssertionError(memory_id)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    world = requesters_world(tmp_path_factory.mktemp("mcp-attacks") / "state")
    with mcp_http(world.state) as url:
        yield Live(world, url)


def same_refusal(attack: dict[str, Any], absent: dict[str, Any], swap: tuple[str, str]) -> None:
    assert attack["ok"] is False and absent["ok"] is False, (attack, absent)
    assert {k: v for k, v in attack.items() if k != "message"} == {k: v for k, v in absent.items() if k != "message"}
    assert attack["message"].replace(*swap) == absent["message"], (attack, absent)


def test_a_held_preview_over_mcp_shows_no_line_of_another_requesters_records(live: Live) -> None:
    before = git_log(live.world.state / "memory")
    body = create("Memo: tea over MCP.", source_of("alice-s"), topic=live.topic_of("bob-s"))
    held = live.call("alice", "memory_update", body)
    assert held["ok"] and held["held"] and "Memo: tea over MCP." in held["dry_run"]["diff"], held
    assert_no_leak(str(held), BOB_PRIVATE)
    assert git_log(live.world.state / "memory") == before


@pytest.mark.parametrize(("who", "other"), [("alice", "bob-s"), ("bob", "alice-s")])
def test_another_requesters_record_over_mcp_is_answered_as_none(live: Live, who: str, other: str) -> None:
    (hidden, *_) = sorted(live.world.ids(other))
    private = BOB_PRIVATE if who == "alice" else ALICE_PRIVATE
    before = git_log(live.world.state / "memory")
    mine = source_of(f"{who}-s")
    calls = [
        ("memory_get", lambda i: {"memory_id": i}),
        ("memory_update", lambda i: create("Memo: placed.", mine, position="after", anchor_memory_id=i)),
        ("memory_update", lambda i: {"memory_changes": [{"op": "delete_record", "memory_id": i}]}),
        ("memory_update", lambda i: create(f"Memo: see [[topics/x#^{i}|this]].", mine)),
    ]
    for tool, arguments in calls:
        attack, absent = live.call(who, tool, arguments(hidden)), live.call(who, tool, arguments(FAKE))
        if "[[" in str(arguments(FAKE)):  # a link: the new record's own ID is fresh each time
            for refusal in (attack, absent):
                refusal["message"] = refusal["message"].split(" links to ")[1]
                refusal["rejected_text"] = refusal["rejected_text"].split(" → ")[1]
        if "rejected_text" in absent:
            attack["rejected_text"] = attack["rejected_text"].replace(hidden, FAKE)
        same_refusal(attack, absent, (hidden, FAKE))
        assert_no_leak(str(attack), private)
    assert git_log(live.world.state / "memory") == before


def test_an_inline_citation_over_mcp_is_refused_like_a_missing_source(live: Live) -> None:
    stolen, missing = source_of("alice-s"), "runtime/nobody/nobody-1"
    attack = live.call("bob", "memory_update", create(f"Memo: see [x]({stolen}).", source_of("bob-s")))
    absent = live.call("bob", "memory_update", create(f"Memo: see [x]({missing}).", source_of("bob-s")))
    assert attack.get("reason") == "INVALID_SOURCE", attack
    assert attack["rejected_text"] == absent["rejected_text"] == "", "a refused citation quotes no line"
    same_refusal(attack, absent, (stolen, missing))
    assert_no_leak(str(attack).replace(stolen, ""), ALICE_PRIVATE)


def test_search_over_mcp_finds_nothing_of_another_requester(live: Live) -> None:
    found = live.call("alice", "memory_search", {"query": "garden vault deploy keys", "limit": 20})
    assert found["ok"] and not {r["memory_id"] for r in found["results"]} & live.world.ids("bob-s", "mixed")
    assert_no_leak(str(found["results"]), BOB_PRIVATE)
