"""Codex: transcripts (rollouts) under ``$CODEX_HOME/sessions``; hooks in ``$CODEX_HOME/hooks.json`` and the
MCP server in ``$CODEX_HOME/config.toml`` (``[mcp_servers.scriptorium]``). Codex reads no project scope."""

from __future__ import annotations

import os
from pathlib import Path

from scriptorium.errors import InvalidArgument
from scriptorium.runtimes.base import HOOK_TIMEOUTS_S, Runtime, Scope, SettingsFiles


def home_dir(home: Path | None = None) -> Path:
    return Path(os.environ.get("CODEX_HOME") or (home or Path.home()) / ".codex")


def transcripts() -> Path:
    return home_dir() / "sessions"


def settings_files(scope: Scope, home: Path, project: Path) -> SettingsFiles:
    if scope != "user":
        raise InvalidArgument("Codex reads its hooks and MCP servers from $CODEX_HOME: use --scope user")
    codex_home = home_dir(home)
    return SettingsFiles(codex_home / "hooks.json", codex_home / "config.toml", "toml")


SESSION_END_TIMEOUT_S = 3
"""Codex gives a SessionEnd hook at most 3 s (a longer timeout is clamped, with a warning on every run);
the hook hands its pass to a detached process well within that."""

RUNTIME = Runtime(
    name="codex",
    transcripts=transcripts,
    settings_files=settings_files,
    writer_label="Codex (`codex exec`)",
    tool_permissions="server-approval",
    hook_timeouts_s={**HOOK_TIMEOUTS_S, "SessionEnd": SESSION_END_TIMEOUT_S},
)
