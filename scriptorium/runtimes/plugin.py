"""The Claude Code plugin (``integrations/claude-code``, listed by this repository's own marketplace,
``.claude-plugin/marketplace.json``): the same hooks and MCP server as ``setup claude-code``, run as
``scriptorium hook --plugin`` and ``scriptorium mcp --plugin`` on the per-user memory.

The plugin and the settings-file setup never both fire:

* a plugin hook does nothing (exit 0, no output) when Claude Code's settings files — the user's, or the
  session's project's — hold our hooks already, and the plugin's MCP server lists no tools when those
  files name our server (:func:`wired_by_settings`);
* ``setup claude-code`` refuses while the plugin is enabled (:func:`plugin_enabled`).

Standard library only: this runs on the hook command's fast path.
"""

from __future__ import annotations

import json
import os

PLUGIN_ID = "scriptorium@scriptorium"
"""The plugin as Claude Code names it: ``<plugin>@<marketplace>``."""
PLUGIN_FLAG = "--plugin"


def _config_dir(home: str | None = None) -> str:
    if home is None and os.environ.get("CLAUDE_CONFIG_DIR"):
        return os.environ["CLAUDE_CONFIG_DIR"]
    return os.path.join(home or os.path.expanduser("~"), ".claude")


def _json(path: str) -> object:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _our_command_hook(settings: object) -> bool:
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    for groups in hooks.values() if isinstance(hooks, dict) else ():
        for group in groups if isinstance(groups, list) else ():
            for hook in group.get("hooks", []) if isinstance(group, dict) else ():
                command = str(hook.get("command", "")) if isinstance(hook, dict) else ""
                if "scriptorium" in command and " hook --state " in command:
                    return True
                if isinstance(hook, dict) and hook.get("type") == "http" and "X-Scriptorium-Hook" in str(hook):
                    return True
                if isinstance(hook, dict) and (hook.get("type"), hook.get("server")) == ("mcp_tool", "scriptorium"):
                    return True
    return False


def _our_server(config: object) -> bool:
    servers = config.get("mcpServers") if isinstance(config, dict) else None
    return isinstance(servers, dict) and "scriptorium" in servers


def wired_by_settings(kind: str, cwd: str | None) -> bool:
    """Whether Claude Code's settings files already wire memory in: ``kind`` ``hooks`` (the user's
    ``settings.json``, the project's ``.claude/settings.json`` and ``settings.local.json``) or ``mcp`` (the
    user's ``~/.claude.json``, the project's ``.mcp.json``); ``cwd`` is the session's folder."""
    if kind == "hooks":
        files = [os.path.join(_config_dir(), "settings.json")]
        if cwd:
            files += [
                os.path.join(cwd, ".claude", "settings.json"),
                os.path.join(cwd, ".claude", "settings.local.json"),
            ]
        return any(_our_command_hook(_json(path)) for path in files)
    files = [os.path.join(os.path.expanduser("~"), ".claude.json")]
    if cwd:
        files.append(os.path.join(cwd, ".mcp.json"))
    return any(_our_server(_json(path)) for path in files)


def plugin_enabled(home: str | None = None) -> bool:
    """Whether the user's Claude Code settings enable the Scriptorium plugin."""
    settings = _json(os.path.join(_config_dir(home), "settings.json"))
    enabled = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    return isinstance(enabled, dict) and enabled.get(PLUGIN_ID) is True
