"""What a newcomer meets first on ``scriptorium serve`` (issue 59): where it listens, ``/`` leading to the page,
a sign-in page that says where the owner token truly is, and the core counted as ``memory core`` counts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scriptorium.workspace.paths import source_identity_from_path
from scriptorium.workspace.threads import split
from tests.cluster.conftest import free_port
from tests.helpers.cli import run
from tests.helpers.served import ROOT, AppServer


@pytest.fixture
def served(tmp_path: Path) -> Iterator[AppServer]:
    state = tmp_path / "state"
    assert run("ingest", "examples/transcript.jsonl", "--state", str(state)).returncode == 0
    conversations = sorted((state / "memory" / "sources").rglob("*.md"))
    assert conversations
    first = conversations[0].relative_to(state / "memory").as_posix()
    cited = "/".join(source_identity_from_path(next(iter(split(first, conversations[0].read_bytes())))) or ())
    core = f"# Core\n\n## Preferences\n\n2026-11-01: The user prefers tea over coffee [tea]({cited}).\n"
    (tmp_path / "core.md").write_text(core)
    edited = run("memory", "edit", "topics/core.md", "--from", str(tmp_path / "core.md"), "--state", str(state))
    assert edited.returncode == 0, edited.stderr
    server = AppServer(state)
    try:
        yield server
    finally:
        server.close()


def test_the_root_leads_to_the_page(served: AppServer) -> None:
    with served.anonymous() as client:
        answer = client.get("/")
    assert answer.status_code in (302, 303, 307, 308) and answer.headers["location"] == "/memory"


def test_the_sign_in_page_says_where_the_owner_token_is(served: AppServer) -> None:
    with served.anonymous() as client:
        page = client.get("/memory").text
    assert "&lt;state&gt;" not in page and "<state>" not in page
    assert "on first run" not in page
    assert str(served.state / "owner-token") in page


def test_the_page_and_the_api_count_the_core_as_memory_core_does(served: AppServer) -> None:
    core = json.loads(run("memory", "core", "--state", str(served.state), "--json").stdout)
    status = json.loads(run("memory", "status", "--state", str(served.state), "--json").stdout)
    assert core["included_ids"] and core["tokens"] == status["core_tokens"]
    api = served.client.get("/api/memory/core").json()
    assert api["tokens"] == core["tokens"]
    login = served.anonymous()
    with login:
        signed = login.post("/memory/login", data={"token": served.token})
        cookies = signed.cookies
        page = login.get("/memory?section=core", cookies=cookies).text
    assert f"{core['tokens']} / " in page


@pytest.mark.timeout(90)
def test_serve_prints_where_it_listens(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "scriptorium", "serve", "--state", str(tmp_path / "state"), "--port", str(port)],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "http://" in line:
                break
        assert f"http://127.0.0.1:{port}/memory" in "".join(lines), lines
    finally:
        proc.terminate()
        proc.wait(timeout=30)
