"""Claude Code: transcripts under ``$CLAUDE_CONFIG_DIR/projects``; hooks in ``settings.json``, the MCP server
in ``~/.claude.json`` (user scope) or the project's ``.claude/settings.json`` and ``.mcp.json``."""

from __future__ import annotations

import os
from pathlib import Path

from scriptorium.runtimes.base import Runtime, Scope, SettingsFiles


def config_dir() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")


def transcripts() -> Path:
    return config_dir() / "projects"


def settings_files(scope: Scope, home: Path, project: Path) -> SettingsFiles:
    if scope == "user":
        return SettingsFiles(home / ".claude" / "settings.json", home / ".claude.json", "json")
    return SettingsFiles(project / ".claude" / "settings.json", project / ".mcp.json", "json")


RUNTIME = Runtime(
    name="claude-code",
    transcripts=transcripts,
    settings_files=settings_files,
    writer_label="Claude Code (`claude -p`)",
    tool_permissions="settings-allow",
)
