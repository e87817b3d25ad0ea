"""The Claude Code plugin's files say what ``setup claude-code`` writes: the same events and timeouts, the
same server with its tools in the first request, this release's version, and a marketplace that lists it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import scriptorium
from scriptorium.runtimes import claude_code, codex
from scriptorium.runtimes.base import HOOK_TIMEOUTS_S, READ_TOOLS, SERVER_NAME
from scriptorium.runtimes.plugin import PLUGIN_FLAG, PLUGIN_ID, wired_by_settings
from scriptorium.runtimes.setup.entries import hook_command, mcp_tool_hook

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "integrations" / "claude-code"


def test_the_plugin_wires_what_setup_wires() -> None:
    marketplace = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    (entry,) = marketplace["plugins"]
    assert f"{entry['name']}@{marketplace['name']}" == PLUGIN_ID
    assert (ROOT / entry["source"]).resolve() == PLUGIN
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == entry["name"] and manifest["version"] == scriptorium.__version__

    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    ours = {event: groups for event, groups in hooks.items() if event != "PreToolUse"}
    # Codex installs the same plugin from the same marketplace: each timeout within both runtimes' limits
    limits = {event: min(HOOK_TIMEOUTS_S[event], codex.RUNTIME.hook_timeouts_s[event]) for event in HOOK_TIMEOUTS_S}
    assert {event: groups[0]["hooks"][0]["timeout"] for event, groups in ours.items()} == limits
    assert {groups[0]["hooks"][0]["command"] for groups in ours.values()} == {f"scriptorium hook {PLUGIN_FLAG}"}
    (allow,) = hooks["PreToolUse"]
    prefix = f"mcp__plugin_{entry['name']}_{SERVER_NAME}__"
    assert allow["matcher"] == prefix + "memory_(" + "|".join(t.removeprefix("memory_") for t in READ_TOOLS) + ")"

    server = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"][SERVER_NAME]
    assert server == {"command": "scriptorium", "args": ["mcp", PLUGIN_FLAG], "alwaysLoad": True}


def test_the_plugin_sees_every_kind_of_hook_setup_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin stands down where the settings files hold our hooks: commands, ``--server``'s HTTP hooks,
    and the ``mcp_tool`` hooks of every turn; the user's own hooks alone do not count."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))
    settings = tmp_path / "settings.json"
    theirs = {"type": "mcp_tool", "server": "github", "tool": "hook", "input": {}}
    for entry, ours in (
        (theirs, False),
        ({"type": "command", "command": "notify-done"}, False),
        (mcp_tool_hook(claude_code.MCP_HOOKS, lambda e, t: {})("Stop", 60), True),
        ({"type": "command", "command": hook_command(tmp_path / "state")}, True),
    ):
        settings.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [entry]}]}}))
        assert wired_by_settings("hooks", None) is ours, entry
