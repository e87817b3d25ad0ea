"""Claude Code: transcripts under ``$CLAUDE_CONFIG_DIR/projects``; hooks in ``settings.json``, the MCP server
in ``~/.claude.json`` (user scope) or the project's ``.claude/settings.json`` and ``.mcp.json``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scriptorium.errors import InvalidArgument
from scriptorium.runtimes.base import SERVER_NAME, Runtime, Scope, SettingsFiles


def config_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def transcripts() -> Path:
    return config_dir() / "projects"


def settings_files(scope: Scope, home: Path, project: Path) -> SettingsFiles:
    if scope == "user":
        return SettingsFiles(home / ".claude" / "settings.json", home / ".claude.json", "json")
    return SettingsFiles(project / ".claude" / "settings.json", project / ".mcp.json", "json")


PERMISSION_PREFIX = f"mcp__{SERVER_NAME}__"


def add_permissions(settings: dict[str, Any], tools: Sequence[str]) -> dict[str, Any]:
    """``settings`` whose ``permissions.allow`` lets the runtime call ``tools`` of our server without asking
    (Claude Code's rule syntax); the user's own rules untouched, ours replaced."""
    permissions = settings.setdefault("permissions", {})
    if not isinstance(permissions, dict) or not isinstance(permissions.setdefault("allow", []), list):
        raise InvalidArgument("the settings file's 'permissions.allow' is not a list; fix it by hand first")
    kept = [rule for rule in permissions["allow"] if not str(rule).startswith(PERMISSION_PREFIX)]
    permissions["allow"] = kept + [f"{PERMISSION_PREFIX}{tool}" for tool in tools]
    return settings


def remove_permissions(settings: dict[str, Any]) -> dict[str, Any]:
    permissions = settings.get("permissions")
    if not isinstance(permissions, dict) or not isinstance(permissions.get("allow"), list):
        return settings
    permissions["allow"] = [rule for rule in permissions["allow"] if not str(rule).startswith(PERMISSION_PREFIX)]
    if not permissions["allow"]:
        del permissions["allow"]
    if not permissions:
        del settings["permissions"]
    return settings


RUNTIME = Runtime(
    name="claude-code",
    transcripts=transcripts,
    settings_files=settings_files,
    writer_label="Claude Code (`claude -p`)",
    tool_permissions="settings-allow",
    http_hooks=True,
    server_options={"alwaysLoad": True},
)
