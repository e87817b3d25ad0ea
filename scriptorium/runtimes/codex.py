"""Codex: transcripts (rollouts) under ``$CODEX_HOME/sessions``; hooks in ``$CODEX_HOME/hooks.json`` and the
MCP server in ``$CODEX_HOME/config.toml`` (``[mcp_servers.scriptorium]``). Codex reads no project scope."""

from __future__ import annotations

import os
from pathlib import Path

from scriptorium.errors import InvalidArgument
from scriptorium.runtimes.base import Runtime, Scope, SettingsFiles


def home_dir(home: Path | None = None) -> Path:
    return Path(os.environ.get("CODEX_HOME") or (home or Path.home()) / ".codex")


def transcripts() -> Path:
    return home_dir() / "sessions"


def settings_files(scope: Scope, home: Path, project: Path) -> SettingsFiles:
    if scope != "user":
        raise InvalidArgument("Codex reads its hooks and MCP servers from $CODEX_HOME: use --scope user")
    codex_home = home_dir(home)
    return SettingsFiles(codex_home / "hooks.json", codex_home / "config.toml", "toml")


RUNTIME = Runtime(
    name="codex",
    transcripts=transcripts,
    settings_files=settings_files,
    writer_label="Codex (`codex exec`)",
    tool_permissions="server-approval",
)
