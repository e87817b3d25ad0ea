"""``scriptorium mcp`` exercised by the MCP SDK's own client: over stdio in a subprocess, and over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp.types as types
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from scriptorium.runtimes.mcp.server import CORE_URI
from scriptorium.runtimes.mcp.tools import tool_definitions
from tests.conftest import git_log, tree_bytes
from tests.helpers.edge import console
from tests.helpers.mcp import mcp_http, payload, run
from tests.helpers.tokens import requester_token

SCRIPT = Path(sys.executable).with_name("scriptorium")


def test_the_tools_are_the_model_tools_with_their_annotations(state: Path) -> None:
    async def work(session: ClientSession) -> types.ListToolsResult:
        return await session.list_tools()

    listed = {tool.name: tool for tool in run(state, work).tools}
    definitions = {d["function"]["name"]: d["function"] for d in tool_definitions()}
    assert set(definitions) == {"memory_status", "memory_get", "memory_search", "memory_update", "memory_remember"}
    assert set(listed) == {*definitions, "hook"}, "over stdio, the hook tool the runtime's mcp_tool hooks call"
    assert listed["hook"].input_schema["required"] == ["hook_event_name", "session_id"]
    del listed["hook"]
    for name, tool in listed.items():
        assert tool.input_schema == definitions[name]["parameters"], f"{name}: one source of truth for schemas"
    assert listed["memory_search"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert listed["memory_update"].annotations.destructive_hint is True  # type: ignore[union-attr]


def test_each_tool_can_be_called(state: Path) -> None:
    async def work(session: ClientSession) -> list[dict[str, Any]]:
        out = [payload(await session.call_tool("memory_status", {}))]
        out.append(payload(await session.call_tool("memory_search", {"query": "when do releases ship"})))
        out.append(payload(await session.call_tool("memory_search", {"query": "yacht moored Kiel"})))
        found = out[1]["results"][0]["memory_id"]
        out.append(payload(await session.call_tool("memory_get", {"memory_id": found})))
        change = {
            "memory_changes": [
                {
                    "op": "create_record",
                    "content": "Hotfixes may ship any day.",
                    "time": None,
                    "sources": [{"source": "new-source-1", "label": "hotfix rule"}],
                    "destination": {"topic_path": "topics/deploy.md"},
                }
            ],
            "new_sources": [{"id": "new-source-1", "text": "The lead said hotfixes can ship any day.", "role": "user"}],
            "message": "A rule from the chat",
        }
        out.append(payload(await session.call_tool("memory_update", change)))
        return out

    status, search, pending_only, got, updated = run(state, work)
    assert status["ok"] and status["records"] == 4
    assert search["results"][0]["snippet"].startswith("Releases ship on Thursdays")
    assert pending_only["results"] == [], "records backed by pending sources never reach the model"
    assert got["ok"] and "Thursdays" in got["content"] and got["sources"][0]["source"] == "test/t1/m1"
    assert updated["ok"] and updated["created_ids"], updated
    pending = [p for p in (state / "memory" / "sources" / "scriptorium").rglob("*.md")]
    assert len(pending) == 1 and 'trust: "pending"' in pending[0].read_text(), "a model's evidence stays pending"


def test_an_invalid_update_returns_its_reason_code_and_changes_nothing(state: Path) -> None:
    memory = state / "memory"
    before = (tree_bytes(memory), git_log(memory))

    async def work(session: ClientSession) -> list[dict[str, Any]]:
        bad_source = {
            "memory_changes": [
                {
                    "op": "create_record",
                    "content": "Made up.",
                    "time": None,
                    "sources": [{"source": "test/t1/nope", "label": "x"}],
                    "destination": {"topic_path": "topics/deploy.md"},
                }
            ]
        }
        return [
            payload(await session.call_tool("memory_update", bad_source)),
            payload(await session.call_tool("memory_update", {"memory_changes": "not a list"})),
            payload(await session.call_tool("memory_get", {"memory_id": "m-doesnotexist"})),
            payload(await session.call_tool("memory_search", {"query": ""})),
        ]

    missing_source, malformed, missing_record, empty_query = run(state, work)
    assert (missing_source["ok"], missing_source["reason"]) == (False, "INVALID_SOURCE")
    assert (malformed["reason"], missing_record["reason"], empty_query["reason"]) == (
        "INVALID_ARGUMENT",
        "NOT_FOUND",
        "INVALID_ARGUMENT",
    )
    assert (tree_bytes(memory), git_log(memory)) == before


def test_the_core_block_and_topics_are_resources(state: Path) -> None:
    async def work(session: ClientSession) -> tuple[list[str], list[str], str, str]:
        listed = [str(r.uri) for r in (await session.list_resources()).resources]
        templates = [t.uri_template for t in (await session.list_resource_templates()).resource_templates]
        core = (await session.read_resource("scriptorium://core")).contents[0]
        topic = (await session.read_resource("scriptorium://topics/deploy.md")).contents[0]
        assert isinstance(core, types.TextResourceContents) and isinstance(topic, types.TextResourceContents)
        return listed, templates, core.text, topic.text

    listed, templates, core, topic = run(state, work)
    assert listed == ["scriptorium://core"] and templates == ["scriptorium://topics/{+path}"]
    assert "The user is called Sam" in core and "Releases ship on Thursdays" in topic


def test_http_needs_the_owner_token(state: Path) -> None:
    with mcp_http(state) as url:
        token = (state / "owner-token").read_text().strip()
        assert httpx.post(url, json={}, headers={"Authorization": "Bearer nope"}).status_code == 403
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        ok = httpx.post(
            url,
            json=initialize,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
        )
        assert ok.status_code == 200 and "scriptorium" in ok.text


# -- requesters ---------------------------------------------------------------------------------


async def _as(state: Path, token: str | None, work: Any) -> Any:
    env = {**os.environ, **({"SCRIPTORIUM_TOKEN": token} if token else {})}
    params = StdioServerParameters(command=str(SCRIPT), args=["mcp", "--state", str(state)], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await work(session)


@pytest.fixture(scope="module")
def requesters(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.requesters_fixtures import requesters_world

    return requesters_world(tmp_path_factory.mktemp("mcp-requesters") / "state")


def test_over_stdio_a_requester_token_sees_its_own_and_the_shared_records(requesters: Any) -> None:
    from tests.requesters_fixtures import BOB_SEES, EVERYTHING

    state = requesters.state
    bob = requester_token(state, "write", "bob")
    (alices,) = sorted(requesters.ids("alice-s"))[:1]

    async def work(session: ClientSession) -> tuple[Any, ...]:
        found = payload(await session.call_tool("memory_search", {"query": "memo", "limit": 20}))
        hidden = payload(await session.call_tool("memory_get", {"memory_id": alices}))
        core = await session.read_resource(CORE_URI)
        resources = await session.list_resources()
        return found, hidden, core, resources

    found, hidden, core, resources = anyio.run(_as, state, bob, work)
    assert {r["memory_id"] for r in found["results"]} == requesters.ids(*BOB_SEES)
    assert hidden["ok"] is False and hidden["reason"] == "NOT_FOUND"
    text = core.contents[0].text
    assert "standups are short" in text and "oolong" not in text
    assert [str(r.uri) for r in resources.resources] == [CORE_URI], "topics are the owner's"
    owner, *_ = anyio.run(_as, state, None, work)
    assert {r["memory_id"] for r in owner["results"]} == requesters.ids(*EVERYTHING)


def test_over_stdio_a_propose_token_holds_its_update(requesters: Any) -> None:
    from tests.requesters_fixtures import source_of

    state = requesters.state
    alice = requester_token(state, "propose", "alice")
    before = git_log(state / "memory")
    change = {
        "op": "create_record",
        "content": "Memo: proposed over MCP.",
        "time": "2026-11-21",
        "sources": [{"source": source_of("alice-s"), "label": "memo"}],
        "destination": {"topic_path": "topics/notes.md"},
    }

    async def work(session: ClientSession) -> dict[str, Any]:
        return payload(await session.call_tool("memory_update", {"memory_changes": [change]}))

    held = anyio.run(_as, state, alice, work)
    assert held["ok"] and held["held"] and held["state"] == "held" and "proposed over MCP" in held["dry_run"]["diff"]
    assert git_log(state / "memory") == before


def test_stdio_refuses_a_runtime_token(requesters: Any) -> None:
    runtime = requester_token(requesters.state, "runtime", "alice")
    done = subprocess.run(
        [str(SCRIPT), "mcp", "--state", str(requesters.state)],
        input="",
        env={**os.environ, "SCRIPTORIUM_TOKEN": runtime},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "FORBIDDEN" in done.stdout + done.stderr


def test_over_http_each_request_speaks_for_its_token(requesters: Any) -> None:
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    from tests.requesters_fixtures import ALICE_SEES

    state = requesters.state
    alice = requester_token(state, "propose", "alice")
    runtime = requester_token(state, "runtime", "alice")
    with mcp_http(state) as url:
        assert httpx.post(url, json={}, headers={"Authorization": f"Bearer {runtime}"}).status_code == 403

        async def search() -> dict[str, Any]:
            async with (
                create_mcp_http_client(headers={"Authorization": f"Bearer {alice}"}) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return payload(await session.call_tool("memory_search", {"query": "memo", "limit": 20}))

        found = anyio.run(search)
        assert {r["memory_id"] for r in found["results"]} == requesters.ids(*ALICE_SEES)


def _tool(state: Path, name: str, arguments: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """``scriptorium tool NAME`` with ``arguments`` on stdin (as the pi and OpenClaw extensions call it), run in
    this process (:func:`tests.helpers.edge.console`; the extensions' own runs start the real process)."""
    return console(
        ["tool", name, "--state", str(state)],
        env={"SCRIPTORIUM_TOKEN": token} if token else {},
        unset=() if token else ("SCRIPTORIUM_TOKEN",),
        stdin=arguments,
    )


def test_the_tool_command_answers_as_the_mcp_server_does_for_the_owner_and_a_requester(requesters: Any) -> None:
    """``scriptorium tool`` is the MCP server's handlers from a command: the same answers, the same principal
    (the owner, or ``SCRIPTORIUM_TOKEN``'s requester, who finds no other requester's private records)."""
    from tests.requesters_fixtures import BOB_SEES, EVERYTHING

    state = requesters.state
    query = json.dumps({"query": "memo", "limit": 20})
    owner = _tool(state, "memory_search", query)
    assert owner.returncode == 0, owner.stderr
    assert {r["memory_id"] for r in json.loads(owner.stdout)["results"]} == requesters.ids(*EVERYTHING)
    bob = requester_token(state, "write", "bob")
    found = _tool(state, "memory_search", query, bob)
    assert {r["memory_id"] for r in json.loads(found.stdout)["results"]} == requesters.ids(*BOB_SEES)
    (alices,) = sorted(requesters.ids("alice-s"))[:1]
    hidden = _tool(state, "memory_get", json.dumps({"memory_id": alices}), bob)
    assert hidden.returncode == 3 and json.loads(hidden.stdout)["reason"] == "NOT_FOUND"
    shown = _tool(state, "memory_get", json.dumps({"memory_id": alices}))
    assert shown.returncode == 0 and json.loads(shown.stdout)["memory_id"] == alices


def test_the_tool_command_refuses_bad_arguments_with_a_reason_and_changes_nothing(state: Path) -> None:
    before = tree_bytes(state / "memory"), git_log(state / "memory")
    for arguments, reason in (("{not json", "INVALID_ARGUMENT"), ("[1, 2]", "INVALID_ARGUMENT")):
        done = _tool(state, "memory_update", arguments)
        assert done.returncode == 3 and f"error {reason}" in done.stderr, (done.stdout, done.stderr)
    bad_change = json.dumps({"memory_changes": [{"op": "delete_record", "memory_id": "m-nope"}]})
    refused = _tool(state, "memory_update", bad_change)
    assert refused.returncode == 3 and json.loads(refused.stdout)["ok"] is False
    runtime = requester_token(state, "runtime", "alice")
    assert "FORBIDDEN" in _tool(state, "memory_search", '{"query": "x"}', runtime).stderr
    assert (tree_bytes(state / "memory"), git_log(state / "memory")) == before
