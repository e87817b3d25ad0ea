"""Redaction is a property of the store: a secret sent through any route that puts text or a name into memory
— a structured change (content, headings, new sources, commit message) by the owner and by a write token, a
whole-topic change, a unified patch, the core's save, a proposal, MCP's ``memory_update``, the runtime nodes
route (content, title, and the session, node, parent and provider IDs), an event, a transcript import whose
JSON escapes hide a key — leaves no byte of it under the state folder: not in any file (the SQLite store and
its WAL included) and not in any git object. ``SCRIPTORIUM_REDACT=off`` keeps them (so the scan can fail)."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from scriptorium.redaction import Redactor
from scriptorium.workspace import MemoryWorkspace
from tests.helpers.secrets import holding, ingest
from tests.helpers.served import ThreadServer
from tests.helpers.tokens import scoped_token

ROOT = Path(__file__).resolve().parents[2]
RNG = random.Random(20261206)
ALNUM = string.ascii_letters + string.digits


def fake(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def secrets_of(route: str) -> dict[str, str]:
    """Fresh secrets for one route (so a find says which route let it through)."""
    return {
        f"{route}:github": "ghp_" + fake(ALNUM, 36),
        f"{route}:aws": "AKIA" + fake(string.ascii_uppercase + string.digits, 16),
        f"{route}:password": fake(ALNUM, 20),
    }


def prose(found: dict[str, str]) -> str:
    github, aws, password = found.values()
    return f"The CI token is {github}, the key {aws}, and password={password} for the admin."


def test_a_secret_sent_through_any_route_leaves_no_byte_in_the_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    planted: dict[str, str] = {}
    MemoryWorkspace.init(state / "memory").close()
    live = ThreadServer(state)
    try:
        write = httpx.Client(
            base_url=live.url, headers={"Authorization": f"Bearer {scoped_token(state, 'write')}"}, timeout=30
        )
        propose = httpx.Client(
            base_url=live.url, headers={"Authorization": f"Bearer {scoped_token(state, 'propose')}"}, timeout=30
        )
        runtime = httpx.Client(
            base_url=live.url, headers={"Authorization": f"Bearer {scoped_token(state, 'runtime')}"}, timeout=30
        )

        def change(client: httpx.Client, route: str, **extra: object) -> dict[str, object]:
            found = secrets_of(route)
            planted.update(found)
            github, aws, _ = found.values()
            body = {
                "memory_changes": [
                    {
                        "op": "create_record",
                        "content": prose(found),
                        "sources": [{"source": "new-source-1", "label": "note"}],
                        "time": "2026-12-01",
                        "destination": {"topic_path": f"topics/{route}.md", "headings": [f"Keys {aws}"]},
                    }
                ],
                "new_sources": [{"id": "new-source-1", "text": f"noted {github} and {aws}"}],
                "message": f"Remember {github}",
                **extra,
            }
            answer = client.post("/api/memory/changes", json=body)
            assert answer.status_code in (200, 202), answer.text
            return answer.json()  # type: ignore[no-any-return]

        made = change(live.client, "owner")
        change(write, "write")
        change(propose, "propose")

        found = secrets_of("topic")
        planted.update(found)
        record = made["created_ids"][0]  # type: ignore[index]
        cited = live.client.get(f"/api/memory/records/{record}/provenance").json()["sources"][0]["source"]
        content = f"# W\n\n2026-12-01: {prose(found)} [note]({cited})\n"
        whole = {"changes": [{"path": "topics/whole.md", "action": "create", "content": content}]}
        answer = live.client.post("/api/memory/changes", json=whole)
        assert answer.status_code == 200, answer.text

        found = secrets_of("core")
        planted.update(found)
        revision = live.client.get("/api/memory/core").json()["revision"]
        core = {"content": f"# Core\n\n{prose(found)} [note]({cited})\n", "expected_revision": revision}
        answer = live.client.put("/api/memory/core", json=core)
        assert answer.status_code == 200, answer.text  # the core's save (the page's too)

        found = secrets_of("nodes")
        planted.update(found)
        github, aws, password = found.values()
        ids = {"session": "AKIA" + fake(string.ascii_uppercase, 16), "node": "ghp_" + fake(ALNUM, 36)}
        ids |= {
            "parent": "AKIA" + fake(string.ascii_uppercase, 16),
            "provider": "AKIA" + fake(string.ascii_uppercase, 16),
        }
        planted.update({f"nodes:id:{k}": v for k, v in ids.items()})
        # The escapes json.dumps would not write: the key spelled with \u0054, the password's = as \u003d.
        escaped_key = aws[:9] + "\\u" + f"{ord(aws[9]):04x}" + aws[10:]
        first = {"id": ids["node"], "kind": "user", "content": f"key {escaped_key}, password\\u003d{password}"}
        second = {"id": "n2", "parent_id": ids["node"], "kind": "assistant", "content": f"Noted {github}."}
        body = {"nodes": [first, second], "head": "n2", "title": f"Deploy with {github}"}
        body |= {"provider": ids["provider"], "parent_session_id": ids["parent"]}
        # json.dumps writes the backslash of each escape as "\\\\": undone, the body holds the escapes themselves.
        raw_body = json.dumps(body).replace("\\\\u", "\\u")
        answer = runtime.post(
            f"/api/sessions/{ids['session']}/nodes", content=raw_body, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 200, answer.text
        event = {"type": "session.idle", "workspace": "default", "session_id": ids["session"], "event_id": "e-idle-1"}
        assert runtime.post("/api/events", json=event).status_code == 202
        wait_for_write(live, ids["session"])
    finally:
        live.close()

    found = secrets_of("mcp")
    planted.update(found)
    mcp_update(state, found)

    found = secrets_of("import")
    planted.update(found)
    ingest(state, escaped_transcript(tmp_path / "transcripts", found))

    assert holding(state, planted) == {}


def wait_for_write(live: ThreadServer, session: str) -> None:
    """Until the idle event's pass has written the session (its sources are in the tree)."""
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        topics = live.client.get("/api/memory/topics").json()["topics"]
        if any(t.startswith("topics/conversations/") for t in topics):
            return
        time.sleep(0.2)
    raise AssertionError(f"session {session} was not written: {topics}")


def mcp_update(state: Path, found: dict[str, str]) -> None:
    from tests.helpers.mcp import payload, run

    body = {
        "memory_changes": [
            {
                "op": "create_record",
                "content": prose(found),
                "sources": [{"source": "new-source-1", "label": "note"}],
                "time": "2026-12-02",
                "destination": {"topic_path": "topics/mcp.md"},
            }
        ],
        "new_sources": [{"id": "new-source-1", "text": "noted " + next(iter(found.values()))}],
    }

    async def tools(session: object) -> str:
        done = payload(await session.call_tool("memory_update", body))  # type: ignore[attr-defined]
        return json.dumps(done)

    answer = json.loads(run(state, tools))
    assert answer.get("memory_committed") or answer.get("revision"), answer


def escaped_transcript(folder: Path, found: dict[str, str]) -> Path:
    """A Claude Code transcript whose every secret is written with a JSON escape inside it."""
    github, aws, password = found.values()

    def hidden(secret: str) -> str:
        return secret[:6] + "\\u" + f"{ord(secret[6]):04x}" + secret[7:]

    lines = []
    for n, text in enumerate([f"use {hidden(github)} and {hidden(aws)}", f"password\\u003d{hidden(password)} set"]):
        role = "user" if n == 0 else "assistant"
        line = {
            "parentUuid": None if n == 0 else "esc-0",
            "isSidechain": False,
            "sessionId": "esc-cc",
            "type": role,
            "uuid": f"esc-{n}",
            "timestamp": f"2026-11-20T09:00:0{n}.000Z",
            "message": {"role": role, "content": text},
        }
        lines.append(json.dumps(line).replace("\\\\u", "\\u"))  # the escapes as written, not escaped again
    path = folder / "claude" / "esc-cc.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    assert all(secret not in path.read_text() for secret in found.values()), "the file hides them"
    assert all(secret in json.dumps([json.loads(x) for x in lines]) for secret in found.values()), "decoded: there"
    return path


def test_with_redaction_off_the_same_scan_finds_them(tmp_path: Path) -> None:
    """The scan above can fail: an import with redaction off leaves the escaped secrets in the store."""
    found = secrets_of("off")
    state = tmp_path / "state"
    ingest(state, escaped_transcript(tmp_path / "transcripts", found), SCRIPTORIUM_REDACT="off")
    assert set(holding(state, found)) == set(found)


def test_an_aws_secret_key_in_prose_is_redacted_and_a_commit_hash_is_not() -> None:
    redactor = Redactor(b"k" * 32)
    key_id, secret = "AKIA" + fake(string.ascii_uppercase, 16), fake(ALNUM + "/+", 39) + "Q"
    for text in (
        f"I set the AWS access key {key_id} with secret {secret} on the box.",
        f"aws secret: {secret}",
        f"The secret is {secret}",
    ):
        assert secret not in redactor.text(text), text
    sha = "9fceb02d0ae598e95dc970b74767f19372d61af8"
    words = fake(string.ascii_lowercase, 40)
    for text in (f"the secret fix is in {sha}", f"secret {words}", f"{fake(ALNUM, 40)} stands alone"):
        assert redactor.text(text) == text


def test_a_secret_cut_in_two_between_two_messages_is_caught_where_it_is_stored(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from scriptorium.redaction_store import RedactingStore
    from scriptorium.sessions import Node, NodeKind, open_store

    token = "ghp_" + fake(ALNUM, 36)
    now = datetime.now(UTC)
    store = RedactingStore(open_store(f"sqlite:///{tmp_path / 'sessions.db'}"), Redactor(b"k" * 32))
    try:
        store.create_session("s")
        first = Node("a", "s", None, "user", NodeKind.USER, f"my token is {token[:20]}", now)
        second = Node("b", "s", "a", "user", NodeKind.USER, f"{token[20:]} and that is all", now)
        store.add_nodes([first, second], head="b")
        third = Node("c", "s", "b", "user", NodeKind.USER, f"then {token[:15]}", now)
        store.add_nodes([third], head="c")
        fourth = Node("d", "s", "c", "user", NodeKind.USER, f"{token[15:]} again", now)
        store.add_nodes([fourth], head="d")
        stored = {node.id: node.content for node in store.get_branch("s")}
    finally:
        store.close()
    assert token[:20] not in stored["a"] and token[20:] not in stored["b"], stored
    assert stored["a"].endswith("]") and stored["b"].startswith("[redacted: github-token #"), stored
    assert token[15:] not in stored["d"], "the later half, its parent stored before"


def test_a_name_holding_a_secret_is_stored_under_the_redacted_name_and_found_by_either(tmp_path: Path) -> None:
    from scriptorium.redaction_store import RedactingStore
    from scriptorium.sessions import open_store

    key = "AKIA" + fake(string.ascii_uppercase, 16)
    inner = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    store = RedactingStore(inner, Redactor(b"k" * 32))
    try:
        store.create_session(f"s-{key}", {"provider": key, "title": f"about {key}"})
        made = store.get_session(f"s-{key}")
        assert made is not None and key not in json.dumps([made.id, dict(made.metadata)])
        assert made.id.startswith("s-redacted-aws-access-key-"), made.id
        assert inner.get_session(f"s-{key}") is None
    finally:
        store.close()


@pytest.mark.parametrize("unit", ["pwd", "token", "sk-", "eyJ", "AKIA", "password=", "-----BEGIN RSA PRIVATE KEY-----"])
def test_a_long_repetition_is_scanned_in_one_go_not_once_per_start(unit: str) -> None:
    """What made the old patterns quadratic — a rule run again from every start inside a long run — is gone:
    on 100 KB of a prefix, each rule the RE2 set flags is searched a bounded number of times (counted, not
    timed: the benchmark times it)."""
    redactor = Redactor(b"k" * 32)
    text = (unit * (100_000 // len(unit) + 1))[:100_000]
    rules, _set = redactor._matcher()
    searches = 0
    for rule in rules:
        original = rule.regex.search

        def counted(data: bytes, pos: int = 0, *, _search=original) -> object:  # type: ignore[no-untyped-def]
            nonlocal searches
            searches += 1
            return _search(data, pos)

        object.__setattr__(rule, "regex", _Counting(rule.regex, counted))
    redactor.text(text)
    assert searches <= 20, searches


class _Counting:
    def __init__(self, regex: object, search: object) -> None:
        self.pattern = regex.pattern  # type: ignore[attr-defined]
        self.search = search


def test_a_patterns_engine_is_linear_and_a_user_pattern_it_cannot_run_is_refused() -> None:
    from scriptorium.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="RE2"):
        Redactor(b"k" * 32, [r"(a)\1"])
    assert Redactor(b"k" * 32, [r"ACME-[0-9]{8}"]).text("id ACME-12345678 here") != "id ACME-12345678 here"


def test_the_command_line_import_redacts_names_too(tmp_path: Path) -> None:
    """A transcript file named after a secret-shaped session: the stored session and the archived path hold
    only the redacted name."""
    key = "AKIA" + fake(string.ascii_uppercase, 16)
    folder = tmp_path / "t" / "claude"
    folder.mkdir(parents=True)
    line = {
        "parentUuid": None,
        "sessionId": key,
        "type": "user",
        "uuid": "u1",
        "timestamp": "2026-11-20T09:00:00.000Z",
        "message": {"role": "user", "content": "Ship it on Friday after the standup, please."},
    }
    (folder / f"{key}.jsonl").write_text(json.dumps(line) + "\n")
    state = tmp_path / "state"
    ingest(state, folder / f"{key}.jsonl")
    assert holding(state, {"id": key}) == {}
    listed = subprocess.run(
        ["git", "-C", str(state / "memory"), "ls-tree", "-r", "--name-only", "main"], capture_output=True, text=True
    ).stdout
    assert "redacted-aws-access-key-" in listed and key not in listed and sys.executable


def test_a_message_ending_in_a_secret_name_is_written_with_its_citation(tmp_path: Path) -> None:
    """``… secret:`` right before the writer's citation made the citation's ``[label](source)`` look like the
    name's value: redacted, the record cited nothing and the whole session was refused, at every import."""
    folder = tmp_path / "t" / "claude"
    folder.mkdir(parents=True)
    lines = []
    for n, text in enumerate(["Checkpoints with the staging cookie secret:", "Rotated; the api_key:"]):
        role = "user" if n == 0 else "assistant"
        lines.append(
            {
                "parentUuid": None if n == 0 else "c-0",
                "sessionId": "colon-cc",
                "type": role,
                "uuid": f"c-{n}",
                "timestamp": f"2026-11-20T09:00:0{n}.000Z",
                "message": {"role": role, "content": text},
            }
        )
    (folder / "colon-cc.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    state = tmp_path / "state"
    report = ingest(state, folder / "colon-cc.jsonl")
    assert not report.get("failed"), report
    written = "\n".join(p.read_text() for p in (state / "memory" / "topics").rglob("*.md"))
    assert "staging cookie secret:" in written and "the api\\_key:" in written.replace("api_key", "api\\_key")
