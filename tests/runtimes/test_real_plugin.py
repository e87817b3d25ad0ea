"""The Claude Code plugin, installed as a user would after ``pip install``: this checkout as the marketplace,
``claude plugin marketplace add`` and ``claude plugin install`` — then the released ``claude -p`` against the
scripted model server. And beside ``setup claude-code``: the two never both fire."""

from __future__ import annotations

import json
import os
from pathlib import Path

from scriptorium.runtimes.plugin import PLUGIN_ID
from tests.conftest import trusted_and_pending_world
from tests.model_server import Reply, ToolCall, tool_results
from tests.requirements import cli
from tests.runtimes.real import SCRIPT, Machine, machine

ROOT = Path(__file__).resolve().parents[2]
TOOL = "mcp__plugin_scriptorium_scriptorium__memory_search"


def installed(user: Machine) -> Machine:
    """``user`` with ``scriptorium`` on PATH (``pip install``) and a memory holding the test world."""
    user.extra_env["PATH"] = f"{SCRIPT.parent}{os.pathsep}{user.path}"
    trusted_and_pending_world(user.state / "memory")
    return user


def claude(user: Machine, *args: str) -> str:
    done = user.run([str(cli("claude")), *args], timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def install_plugin(user: Machine) -> None:
    claude(user, "plugin", "marketplace", "add", str(ROOT))
    claude(user, "plugin", "install", PLUGIN_ID)


def test_the_plugin_is_the_whole_setup(tmp_path: Path) -> None:
    """After the two plugin commands: the plugin is listed enabled, the first request holds the core once,
    the prompt's recall and the tools, a search round-trips headless on the first turn (the plugin allows
    its read tools), and the session is written once."""
    with machine(tmp_path) as user:
        installed(user)
        install_plugin(user)
        listed = claude(user, "plugin", "list")
        assert PLUGIN_ID in listed and "enabled" in listed.split(PLUGIN_ID, 1)[1].split("❯", 1)[0], listed

        user.model.script = [Reply(tool_calls=(ToolCall("memory_search", {"query": "when do releases ship"}),))]
        result = user.claude("When do releases ship?")
        assert result["permission_denials"] == [], result
        first, second = user.model.conversation()[:2]
        assert first.text.count("The user is called Sam") == 1, "the core, once"
        assert "Releases ship on Thursdays" in first.text, "the recall"
        assert TOOL in first.tool_names, first.tool_names
        (answer,) = tool_results(second)
        assert answer["ok"] is True and any("Thursdays" in r["snippet"] for r in answer["results"]), answer
        user.wait_written(str(result["session_id"]), 2, 60, "the prompt and the reply, each written once")


def test_the_plugin_and_the_settings_files_never_both_fire(tmp_path: Path) -> None:
    """Setup refuses while the plugin is enabled; set up first, then the plugin installed: its hooks stand
    down and its server lists no tools, so a request holds one core block and one set of tools, and the
    session is written once."""
    with machine(tmp_path) as user:
        installed(user)
        install_plugin(user)
        refused = user.run([str(SCRIPT), "setup", "claude-code", "--no-writer"])
        assert refused.returncode != 0 and "INVALID_ARGUMENT" in refused.stderr and PLUGIN_ID in refused.stderr
        claude(user, "plugin", "disable", PLUGIN_ID)
        user.scriptorium("setup", "claude-code", "--no-writer")
        claude(user, "plugin", "enable", PLUGIN_ID)

        result = user.claude("When do releases ship?")
        first = user.model.conversation()[0]
        assert first.text.count("The user is called Sam") == 1, "one core block, not two"
        assert first.text.count("Releases ship on Thursdays") == 1, "one recall"
        tools = [name for name in first.tool_names if name.endswith("__memory_search")]
        assert tools == ["mcp__scriptorium__memory_search"], tools
        user.wait_written(str(result["session_id"]), 2, 60, "the prompt and the reply, each written once")
        history = user.state / "memory" / ".scriptorium" / "history.jsonl"
        passes = [json.loads(line) for line in history.read_text().splitlines()]
        mine = [p for p in passes if p.get("op") == "write" and p.get("session") == result["session_id"]]
        assert len([p for p in mine if p["outcome"] == "written"]) == 1, mine
