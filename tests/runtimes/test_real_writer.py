"""The Claude Code writer backend running the released ``claude -p`` (pinned in tests/runtimes/clis) against
the scripted model server, which answers with Claude Code's own file tools on the staging folder: an edit
under ``topics/`` lands as one validated transaction; an edit outside it is refused by the CLI's own
permission rules and the batch stays pending; the organizer runs the same way on the topics alone."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from scriptorium.composition import build_runtime
from scriptorium.settings import Settings
from scriptorium.workspace import MemoryWorkspace
from tests.model_server import Logged, Reply, ToolCall
from tests.requirements import ROOT, cli
from tests.runtimes.real import SCRIPT, Machine, machine

MESSAGE = re.compile(r"^\[([^\]\s/]+/[^\]\s/]+/[^\]\s/]+)\] (user|assistant) at (\d{4}-\d\d-\d\d)", re.M)
WORKDIR = re.compile(r"Primary working directory: (\S+)")


def workdir(request: Logged) -> Path:
    found = WORKDIR.search(request.text.replace("\\n", "\n"))
    assert found, "Claude Code names its working folder in the system prompt"
    return Path(found.group(1))


def write_topic(outside: bool = False) -> Any:
    """The model's first answer: one Write of a topic citing every message the batch shows."""

    def step(request: Logged) -> Reply:
        root = workdir(request)
        cited = MESSAGE.findall(request.text.replace("\\n", "\n"))
        assert cited, "the batch names its messages by source"
        records = [f"{day}: The {role} spoke. [{role}]({ref})" for ref, role, day in cited]
        path = root / "notes.md" if outside else root / "topics" / "agent" / "notes.md"
        content = "# Agent notes\n\n" + "\n\n".join(records) + "\n"
        return Reply(tool_calls=(ToolCall("Write", {"file_path": str(path), "content": content}),))

    return step


def ingest(user: Machine) -> subprocess.CompletedProcess[str]:
    return user.run([str(SCRIPT), "ingest", str(ROOT / "examples" / "transcript.jsonl"), "--json"], timeout=300)


def test_an_edit_under_topics_is_installed_as_one_transaction(tmp_path: Path) -> None:
    writer = {"SCRIPTORIUM_WRITER": "claude-code", "SCRIPTORIUM_WRITER_COMMAND": str(cli("claude"))}
    with machine(tmp_path, **writer) as user:
        user.model.script = [write_topic()]
        user.model.default = Reply(text="Recorded every message.")
        done = ingest(user)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        first = user.model.conversation()[0]
        assert {"Write", "Edit", "Read"} <= set(first.tool_names)
        with MemoryWorkspace(user.state / "memory") as ws:
            topic = ws.snapshot().topics["topics/agent/notes.md"]
            cited = {path for record in topic.records for path in topic.cited_paths(record)}
            assert cited and all(ws.archive.exists(path) for path in cited)
            assert ws.git.head() is not None and ws.revision == ws.snapshot().tree
        history = user.state / "memory" / ".scriptorium" / "history.jsonl"
        passes = [json.loads(line) for line in history.read_text().splitlines()]
        assert [p["outcome"] for p in passes if p.get("op") == "write"][-1] == "written"


def test_an_edit_outside_topics_is_refused_by_the_cli_and_the_turns_stay_pending(tmp_path: Path) -> None:
    writer = {"SCRIPTORIUM_WRITER": "claude-code", "SCRIPTORIUM_WRITER_COMMAND": str(cli("claude"))}
    with machine(tmp_path, **writer) as user:
        user.model.script = [write_topic(outside=True), Reply(text="done"), write_topic(outside=True)]
        user.model.default = Reply(text="done")
        done = ingest(user)
        assert done.returncode != 0 or '"pending"' in done.stdout, done.stdout[-2000:]
        memory = user.state / "memory"
        assert not (memory / "notes.md").exists() and not (memory / "topics" / "agent").exists()
        history = [json.loads(line) for line in (memory / ".scriptorium" / "history.jsonl").read_text().splitlines()]
        writes = [h for h in history if h.get("op") == "write"]
        assert writes and all(not h["ok"] for h in writes), writes
        assert writes[-1]["reason"] == "COMMIT_REJECTED" and "INVALID_PATH" in writes[-1]["message"], writes
        assert "may not do: Write" in writes[-1]["message"], "Claude Code's own rules refused the Write"
        refused = [
            block
            for request in user.model.conversation()
            for message in request.body.get("messages") or []
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]
        assert refused and all(block.get("is_error") for block in refused), "the model was told it was refused"


def test_the_organizer_runs_through_the_cli_on_topics_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The nightly organize with the Claude Code backend: the released CLI edits the staged topics (it is
    never shown the sources), and the edit lands as one transaction that keeps every record's ID."""
    writer = {"SCRIPTORIUM_WRITER": "claude-code", "SCRIPTORIUM_WRITER_COMMAND": str(cli("claude"))}
    with machine(tmp_path, **writer) as user:
        user.model.script = [write_topic()]
        user.model.default = Reply(text="Recorded every message.")
        assert ingest(user).returncode == 0
        with MemoryWorkspace(user.state / "memory") as ws:
            before = ws.snapshot().topics["topics/agent/notes.md"]
        seen: list[bool] = []

        def retitle(request: Logged) -> Reply:
            root = workdir(request)
            seen.append((root / "sources").exists())
            topic = root / "topics" / "agent" / "notes.md"
            return Reply(
                tool_calls=(
                    ToolCall(
                        "Edit",
                        {"file_path": str(topic), "old_string": "# Agent notes", "new_string": "# What the agent said"},
                    ),
                )
            )

        user.model.script = [retitle]
        user.model.default = Reply(text="Organized.")
        for key, value in user.env.items():
            monkeypatch.setenv(key, value)
        runtime = build_runtime(Settings(state=user.state), create=False)
        try:
            outcome = runtime.service.reorganize()
        finally:
            runtime.close()
        assert outcome.ok and getattr(outcome, "organized", False), outcome
        assert seen == [False], "the organizer's folder holds topics only"
        with MemoryWorkspace(user.state / "memory") as ws:
            after = ws.snapshot().topics["topics/agent/notes.md"]
            assert ws.revision == ws.snapshot().tree
        assert "# What the agent said" in (user.state / "memory" / "topics" / "agent" / "notes.md").read_text()
        assert [r.block_ids for r in after.records] == [r.block_ids for r in before.records], (
            "every record keeps its ID"
        )


# -- Codex: `codex exec` on the user's own provider ------------------------------------------------------

CODEX_WRITER = {"SCRIPTORIUM_WRITER": "codex", "SCRIPTORIUM_WRITER_COMMAND": str(cli("codex"))}


def shell_write(request: Logged) -> Reply:
    """The model's answer as Codex's own tool: one shell command writing a topic citing every message."""
    cited = MESSAGE.findall(request.text.replace("\\n", "\n"))
    assert cited, "the batch names its messages by source"
    records = [f"{day}: The {role} spoke. [{role}]({ref})" for ref, role, day in cited]
    content = "# Agent notes\n\n" + "\n\n".join(records) + "\n"
    command = f"mkdir -p topics/agent && cat > topics/agent/notes.md <<'NOTES'\n{content}NOTES\n"
    return Reply(tool_calls=(ToolCall("exec_command", {"cmd": command}),))


def shell(command: str) -> Reply:
    return Reply(tool_calls=(ToolCall("exec_command", {"cmd": command}),))


def test_the_codex_writer_runs_on_the_users_own_provider_and_its_edit_is_one_transaction(tmp_path: Path) -> None:
    """`codex exec --ignore-user-config` leaves the user's config.toml out, its model provider with it: the
    writer passes that provider on (here the scripted server, a custom provider with its own key). The
    sandbox refuses a write outside the staging folder; the edit under topics/ is installed whole."""
    escape = tmp_path / "escaped.txt"
    with machine(tmp_path, **CODEX_WRITER) as user:
        user.codex_config()
        user.model.script = [shell(f"echo x > {escape}"), shell_write]
        user.model.default = Reply(text="Recorded every message.")
        done = ingest(user)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        requests = user.model.conversation()
        assert requests and all(r.path == "/v1/responses" for r in requests), "the user's own provider answered"
        assert "exec_command" in requests[0].tool_names
        assert not escape.exists(), "Codex's sandbox kept the write inside the staging folder"
        outputs = [i.get("output", "") for i in requests[1].body["input"] if i.get("type") == "function_call_output"]
        assert any("Read-only file system" in str(o) for o in outputs), outputs
        with MemoryWorkspace(user.state / "memory") as ws:
            topic = ws.snapshot().topics["topics/agent/notes.md"]
            cited = {path for record in topic.records for path in topic.cited_paths(record)}
            assert len(cited) == 7 and all(ws.archive.exists(path) for path in cited)
            assert ws.revision == ws.snapshot().tree
        history = user.state / "memory" / ".scriptorium" / "history.jsonl"
        writes = [json.loads(line) for line in history.read_text().splitlines() if '"op": "write"' in line]
        assert [(w["writer"], w["outcome"]) for w in writes] == [("codex", "written")]


def test_a_codex_edit_beside_topics_is_refused_and_the_turns_stay_pending(tmp_path: Path) -> None:
    with machine(tmp_path, **CODEX_WRITER) as user:
        user.codex_config()
        user.model.script = [shell("echo x > notes.md"), Reply(text="done"), shell("echo x > notes.md")]
        user.model.default = Reply(text="done")
        done = ingest(user)
        assert done.returncode != 0, done.stdout[-2000:]
        memory = user.state / "memory"
        assert not (memory / "notes.md").exists() and not (memory / "topics" / "agent").exists()
        history = [json.loads(line) for line in (memory / ".scriptorium" / "history.jsonl").read_text().splitlines()]
        (write,) = [h for h in history if h.get("op") == "write"]
        assert not write["ok"] and write["reason"] == "COMMIT_REJECTED" and write["pending_nodes"] == 7, write
        assert "INVALID_PATH: the edit wrote outside topics/: notes.md" in write["message"]
