"""How ``setup codex --trust-hooks`` asks ``codex app-server`` for its hooks' hashes, against stand-in
app-servers that misbehave as a real one can under load (the real pinned Codex: tests/runtimes/test_real_codex.py):
the list is asked for once the handshake is answered, lines that arrive together are all read, a stuck
app-server is replaced by a fresh one, and what cannot be listed fails with its reason."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from scriptorium.errors import InvalidArgument
from scriptorium.runtimes import codex

OURS = {
    "key": "user:UserPromptSubmit:0",
    "currentHash": "sha256:abc",
    "handlerType": "mcpTool",
    "server": "scriptorium",
    "tool": "hook",
}


def stand_in(tmp_path: Path, body: str) -> str:
    """An executable ``codex`` whose ``app-server`` runs ``body`` (Python, with ``read()`` and ``say()``)."""
    script = tmp_path / "codex"
    script.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""\
            import json, sys, time
            from pathlib import Path
            STARTS = Path({str(tmp_path / "starts")!r})
            STARTS.write_text(STARTS.read_text() + "x" if STARTS.exists() else "x")
            def read():
                return json.loads(sys.stdin.readline())
            def say(*messages):
                sys.stdout.write("".join(json.dumps(m) + "\\n" for m in messages))
                sys.stdout.flush()
            HOOKS = {{"data": [{{"cwd": "/", "hooks": [{OURS!r}]}}]}}
            """
        )
        + textwrap.dedent(body)
    )
    script.chmod(0o755)
    return str(script)


def starts(tmp_path: Path) -> int:
    return len((tmp_path / "starts").read_text())


def test_the_list_is_asked_for_after_the_handshake_and_read_when_it_arrives_with_other_lines(tmp_path: Path) -> None:
    program = stand_in(
        tmp_path,
        """\
        hello = read()
        assert hello["method"] == "initialize"
        time.sleep(0.3)  # anything sent before the answer would already be waiting: the client waits instead
        say({"id": 1, "result": {}})
        assert read()["method"] == "initialized"
        asked = read()
        assert asked["method"] == "hooks/list"
        say({"method": "notice", "params": {}}, {"id": 2, "result": HOOKS})  # one write, two lines
        time.sleep(60)
        """,
    )
    assert codex.hook_hashes(program, tmp_path) == {OURS["key"]: OURS["currentHash"]}


def test_a_stuck_app_server_is_replaced_by_a_fresh_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codex, "APP_SERVER_ATTEMPT_S", 2.0)
    program = stand_in(
        tmp_path,
        """\
        read()
        if len(STARTS.read_text()) == 1:
            time.sleep(60)  # the first one never answers
        say({"id": 1, "result": {}})
        read(); read()
        say({"id": 2, "result": HOOKS})
        time.sleep(60)
        """,
    )
    assert codex.hook_hashes(program, tmp_path) == {OURS["key"]: OURS["currentHash"]}
    assert starts(tmp_path) == 2


def test_app_servers_that_never_list_fail_with_the_way_to_trust_by_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codex, "APP_SERVER_ATTEMPT_S", 1.0)
    program = stand_in(tmp_path, "time.sleep(60)\n")
    with pytest.raises(InvalidArgument, match=r"did not list the hooks \(2 tries.*trust them in `codex`"):
        codex.hook_hashes(program, tmp_path)
    assert starts(tmp_path) == codex.APP_SERVER_ATTEMPTS


REFUSES_HELLO = 'read()\nsay({"id": 1, "error": {"message": "no"}})\ntime.sleep(60)\n'
REFUSES_LIST = (
    'read()\nsay({"id": 1, "result": {}})\nread()\nread()\nsay({"id": 2, "error": {"message": "no"}})\ntime.sleep(60)\n'
)
EXITS = "read()\n"


@pytest.mark.parametrize(
    ("body", "reason"),
    [(REFUSES_HELLO, "refused initialize"), (REFUSES_LIST, "refused hooks/list"), (EXITS, "ended before it listed")],
)
def test_a_refusal_or_an_exit_fails_at_once_with_its_reason(tmp_path: Path, body: str, reason: str) -> None:
    with pytest.raises(InvalidArgument, match=reason):
        codex.hook_hashes(stand_in(tmp_path, body), tmp_path)
    assert starts(tmp_path) == 1, "a refusal is an answer: no second app-server"
