"""Claude Code: transcripts under ``$CLAUDE_CONFIG_DIR/projects``; hooks in ``settings.json``, the MCP server
in ``~/.claude.json`` (user scope) or the project's ``.claude/settings.json`` and ``.mcp.json``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scriptorium.defaults import HOOK_TOOL
from scriptorium.errors import InvalidArgument
from scriptorium.runtimes.base import MCP_HOOK_ARGUMENTS, SERVER_NAME, Requirement, Runtime, Scope, SettingsFiles
from scriptorium.runtimes.openings import FIRST_PROMPT


def config_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def transcripts() -> Path:
    return config_dir() / "projects"


def settings_files(scope: Scope, home: Path, project: Path) -> SettingsFiles:
    if scope == "user":
        return SettingsFiles(home / ".claude" / "settings.json", home / ".claude.json", "json")
    return SettingsFiles(project / ".claude" / "settings.json", project / ".mcp.json", "json")


PERMISSION_PREFIX = f"mcp__{SERVER_NAME}__"


def add_permissions(settings: dict[str, Any], tools: Sequence[str], hidden: Sequence[str] = ()) -> dict[str, Any]:
    """``settings`` whose ``permissions.allow`` lets the runtime call ``tools`` of our server without asking
    (Claude Code's rule syntax) and whose ``permissions.deny`` keeps ``hidden`` from the model (a denied tool
    is not in its requests; an ``mcp_tool`` hook still calls it); the user's own rules untouched, ours
    replaced."""
    permissions = settings.setdefault("permissions", {})
    if not isinstance(permissions, dict):
        raise InvalidArgument("the settings file's 'permissions' is not an object; fix it by hand first")
    for key, ours in (("allow", tools), ("deny", hidden)):
        if key not in permissions and not ours:
            continue
        rules = permissions.get(key, [])
        if not isinstance(rules, list):
            raise InvalidArgument(f"the settings file's 'permissions.{key}' is not a list; fix it by hand first")
        kept = [rule for rule in rules if not str(rule).startswith(PERMISSION_PREFIX)]
        permissions[key] = kept + [f"{PERMISSION_PREFIX}{tool}" for tool in ours]
    return settings


def remove_permissions(settings: dict[str, Any]) -> dict[str, Any]:
    permissions = settings.get("permissions")
    if not isinstance(permissions, dict):
        return settings
    for key in ("allow", "deny"):
        if isinstance(permissions.get(key), list):
            permissions[key] = [rule for rule in permissions[key] if not str(rule).startswith(PERMISSION_PREFIX)]
            if not permissions[key]:
                del permissions[key]
    if not permissions:
        del settings["permissions"]
    return settings


MCP_HOOKS = {
    "UserPromptSubmit": {**MCP_HOOK_ARGUMENTS["UserPromptSubmit"], "core": FIRST_PROMPT},
    "Stop": MCP_HOOK_ARGUMENTS["Stop"],
}
"""The hooks of every turn, answered by our MCP server (``mcp_tool`` hooks, Claude Code 2.1.118 and later)
instead of a process each. Claude Code runs SessionStart before any MCP server is up (it refuses an
``mcp_tool`` hook there: "no MCP client context"), so the session's first prompt asks for the core instead
(``core=first-prompt``: :mod:`scriptorium.runtimes.openings`), and SessionStart runs its command only after
a compaction (:data:`HOOK_MATCHERS`); the rarer events keep their commands."""
HOOK_MATCHERS = {"SessionStart": "compact"}
"""SessionStart's command runs for a compaction only: a new, cleared or resumed session starts no process
(its opening prompt carries the core; a resumed one's context holds it)."""
HIDDEN_TOOLS = (HOOK_TOOL,)
"""Our tools the model is not offered (a ``permissions.deny`` rule): the ``hook`` tool is for the hooks."""

REQUIREMENT = Requirement(
    product="Claude Code",
    command="claude",
    minimum=(2, 1, 118),
    needs="the first to run the `mcp_tool` hooks setup writes (an older one rejects the whole settings.json: "
    "'Found 0 total hooks', your own hooks and env ignored with them)",
    package="@anthropic-ai/claude-code",
)
"""Claude Code 2.1.118 added ``mcp_tool`` hooks (:data:`MCP_HOOKS`; its release notes)."""


RUNTIME = Runtime(
    name="claude-code",
    transcripts=transcripts,
    settings_files=settings_files,
    writer_label="Claude Code (`claude -p`)",
    tool_permissions="settings-allow",
    http_hooks=True,
    server_options={"alwaysLoad": True},
    hook_matchers=HOOK_MATCHERS,
    mcp_hooks=MCP_HOOKS,
    requirement=REQUIREMENT,
)
