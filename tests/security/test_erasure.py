"""The erasure canary: a conversation forgotten with ``--purge-history`` while ``serve``, ``mcp --http`` and
the hook daemon run leaves no byte of itself anywhere, and the other conversation keeps every byte.

The forgotten conversation's text exercises every change the verbatim writer makes (brackets escaped,
backslashes doubled, whitespace runs folded, lines joined) and its title is distinctive (it names the
topic's file and heading and so the views' link targets). Before the forget every process has read it, a
requester holds a proposal quoting it and citing it, and the owner's record elsewhere links to it. After:
no file under the state folder (binary files included), no git object (packs included), no answer of the
API, the page, MCP or the hook daemon holds the marker; re-importing the rewritten transcript does not
bring the title back.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession

from scriptorium.runtimes.hooks import daemon as hook_daemon
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.paths import conversation_file, source_path
from tests.cluster.conftest import wait_for
from tests.helpers.daemon import client
from tests.helpers.hooks import common, hook
from tests.helpers.mcp import mcp_http, payload
from tests.helpers.served import ThreadServer
from tests.helpers.tokens import scoped_token

SCRIPT = Path(sys.executable).with_name("scriptorium")
MARKER = b"zorbulon"
TITLE = "Trip with Zorbulon planning"
SECRET = [
    "Pack the [Zorbulon] maps from C:\\trips\\zorbulon\\  please,   twice\nthen the second line about zorbulon"
    "\n\n  and a third\tparagraph, zorbulon again",
    "Noted: the \\zorbulon\\ maps go in [the red case], then   zorbulon-7.",
]
KEPT = ["The standup moves to nine thirty on Mondays [room 4].", "Noted, Mondays at nine thirty in room 4."]


def _transcript(path: Path, session: str, title: str, texts: list[str]) -> Path:
    lines: list[dict[str, Any]] = []
    parent = None
    for n, text in enumerate(texts):
        role = "user" if n % 2 == 0 else "assistant"
        lines.append(
            {
                "parentUuid": parent,
                "isSidechain": False,
                "sessionId": session,
                "type": role,
                "uuid": f"{session}-{n}",
                "timestamp": f"2026-11-2{n}T09:00:00.000Z",
                "message": {"role": role, "content": text if role == "user" else [{"type": "text", "text": text}]},
            }
        )
        parent = f"{session}-{n}"
    lines.append({"type": "summary", "summary": title, "leafUuid": parent})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def cli(state: Path, *args: str) -> str:
    done = subprocess.run(
        [str(SCRIPT), *args, "--state", str(state)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _files_holding(state: Path) -> list[str]:
    files = [p for p in sorted(state.rglob("*")) if p.is_file()]
    return [str(p.relative_to(state)) for p in files if MARKER in p.read_bytes().lower()]


def _objects_holding(repo: Path) -> int:
    objects = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout
    return objects.lower().count(MARKER)


def _kept_history(repo: Path, topic: str) -> str:
    """The kept conversation's topic and sources as every commit had them (hashes left out: they change)."""
    out = subprocess.run(
        ["git", "-C", str(repo), "log", "--format=%s", "-p", "--", topic, "sources/claude-code/keep-s"],
        capture_output=True,
        text=True,
        check=True,
    )
    return "\n".join(line for line in out.stdout.splitlines() if not line.startswith("index "))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    secret = _transcript(tmp_path / "secret.jsonl", "secret-s", TITLE, SECRET)
    keep = _transcript(tmp_path / "keep.jsonl", "keep-s", "Standup", KEPT)
    state = tmp_path / "state"
    cli(state, "ingest", str(secret), str(keep))
    yield state, secret


def _mcp_search(url: str, token: str, query: str) -> str:
    from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

    async def work() -> str:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            found = payload(await session.call_tool("memory_search", {"query": query, "limit": 20}))
            status = payload(await session.call_tool("memory_status", {}))
            return json.dumps([found, status])

    return anyio.run(work)


def _api_answers(server: ThreadServer) -> str:
    """Every read the owner and the page make, concatenated (no query names the marker: answers echo it)."""
    c = server.client
    bodies = [c.get(url).text for url in ("/api/memory/status", "/api/memory/topics", "/api/memory/core")]
    bodies.append(c.get("/api/memory/search", params={"q": "maps trip planning red case twice", "limit": 50}).text)
    for topic in c.get("/api/memory/topics").json()["topics"]:
        bodies.append(c.get(f"/api/memory/topics/{topic['path'] if isinstance(topic, dict) else topic}").text)
    for proposal in c.get("/api/memory/proposals").json()["proposals"]:
        bodies.append(c.get(f"/api/memory/proposals/{proposal['id']}").text)
    bodies.append(c.get("/api/memory/sources", params={"session": "secret-s"}).text)
    page = httpx.Client(base_url=server.url, timeout=30)
    page.post("/memory/login", data={"token": server.token})
    bodies += [page.get("/memory").text, page.get("/memory", params={"q": "maps red case"}).text]
    return "\n".join(bodies)


def test_a_purged_conversation_leaves_no_byte_in_files_objects_or_any_answer(
    world: tuple[Path, Path],
    env: dict[str, str],
) -> None:
    state, secret = world
    repo = state / "memory"
    with MemoryWorkspace(repo) as ws:
        snap = ws.snapshot()
        (kept_topic,) = [p for p in snap.topics if "standup" in p]
        secret_ids = sorted(r.memory_id for p, t in snap.topics.items() if "zorbulon" in p for r in t.records)
        kept_sources = [conversation_file(source_path("claude-code", "keep-s", "x"))]
        kept_bytes = {p: (repo / p).read_bytes() for p in [kept_topic, *kept_sources]}
    kept_history = _kept_history(repo, kept_topic)
    proposer = scoped_token(state, "propose")
    server = ThreadServer(state)
    try:
        with mcp_http(state) as mcp_url:
            # Every process reads the conversation first: its caches hold the text.
            assert MARKER in _mcp_search(mcp_url, server.token, "maps red case twice").lower().encode()
            assert MARKER in _api_answers(server).lower().encode()
            prompt = common("UserPromptSubmit", prompt="what about the maps and the red case, twice?")
            hook(state, prompt, **env)
            path = hook_daemon.socket_path(state.resolve())
            assert path is not None
            wait_for(lambda: path.exists() and hook_daemon.is_running(path), 30, "the hook daemon")
            answer, _loaded = client(state, prompt)
            assert MARKER in answer.lower().encode(), "the daemon recalls the conversation before the forget"
            # A requester's proposal quoting and citing it; the owner's record elsewhere linking to it.
            quote = {
                "message": "remember the trip",
                "memory_changes": [
                    {
                        "op": "create_record",
                        "content": "Zorbulon trip: pack the maps.",
                        "time": "2026-11-21",
                        "sources": [{"source": "claude-code/secret-s/secret-s-0", "label": "trip"}],
                        "destination": {"topic_path": "topics/trips.md"},
                    }
                ],
            }
            held = httpx.post(
                f"{server.url}/api/memory/changes", json=quote, headers={"Authorization": f"Bearer {proposer}"}
            )
            assert held.status_code == 202, held.text
            link = {
                "message": "plans",
                "memory_changes": [
                    {
                        "op": "create_record",
                        "content": f"Plans: see [[topics/x#^{secret_ids[0]}|the trip]] and the standup.",
                        "time": "2026-11-22",
                        "sources": [{"source": "claude-code/keep-s/keep-s-0", "label": "standup"}],
                        "destination": {"topic_path": "topics/plans.md"},
                    }
                ],
            }
            linked = server.client.post("/api/memory/changes", json=link)
            assert linked.status_code == 200, linked.text

            forgot = server.client.post(
                "/api/memory/forget", json={"session": "secret-s", "purge_history": True, "why": "asked to"}
            )
            assert forgot.status_code == 200, forgot.text
            done = forgot.json()
            assert set(done["deleted"]) == set(secret_ids) and done["unlinked"] == linked.json()["created_ids"]
            assert done["derived"]["proposals_erased"] == [held.json()["id"]]
            # The rewritten transcript imported again: the nodes stay erased, the title stays forgotten.
            _transcript(secret, "secret-s", f"{TITLE}, again", SECRET)
            cli(state, "ingest", str(secret))

            assert _files_holding(state) == []
            assert _objects_holding(repo) == 0
            titled = f"topics/conversations/2026-11/2026-11-20-{TITLE.lower().replace(' ', '-')}.md"
            assert done["purge"]["paths_removed"] == [titled]
            assert MARKER not in _api_answers(server).lower().encode()
            assert MARKER not in _mcp_search(mcp_url, server.token, "maps red case twice").lower().encode()
            answer, _loaded = client(state, prompt)
            assert MARKER not in answer.lower().encode()
            approve = server.client.post(f"/api/memory/proposals/{held.json()['id']}/approve")
            assert approve.status_code == 409 and approve.json()["reason"] == "PROPOSAL_CLOSED", approve.text
    finally:
        server.close()
    with MemoryWorkspace(repo) as ws:
        assert {p: (repo / p).read_bytes() for p in kept_bytes} == kept_bytes
        plans = next(t for p, t in ws.snapshot().topics.items() if p == "topics/plans.md")
        assert "see the trip and the standup" in plans.records[0].text
    assert _kept_history(repo, kept_topic) == kept_history
