"""OpenClaw: sessions in each agent's database under ``$OPENCLAW_STATE_DIR/agents`` (default ``~/.openclaw``),
reached by the memory plugin ``scriptorium setup openclaw`` installs, or by importing them (``scriptorium
ingest``).

Setup copies the plugin into ``<state>/extensions/scriptorium`` (:mod:`scriptorium.runtimes.setup.extensions`) and
makes three entries in OpenClaw's config (``$OPENCLAW_CONFIG_PATH``, else ``<state>/openclaw.json``):
``plugins.slots.memory`` selects it for the exclusive memory slot; its entry is enabled with
``hooks.allowConversationAccess`` (OpenClaw runs a plugin it did not install itself on ``before_prompt_build``
and ``agent_end`` only with it); and the bundled ``memory-core``, which would otherwise register
``memory_search`` and ``memory_get`` first, is disabled.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from scriptorium.errors import InvalidArgument
from scriptorium.runtimes.base import Requirement, Runtime

PLUGIN_ID = "scriptorium"
BUNDLED_MEMORY = "memory-core"


def state_dir(home: Path | None = None) -> Path:
    """OpenClaw's state folder: ``$OPENCLAW_STATE_DIR``, else ``~/.openclaw``."""
    configured = os.environ.get("OPENCLAW_STATE_DIR")
    return Path(configured).expanduser() if configured else (home or Path.home()) / ".openclaw"


def config_file(home: Path | None = None) -> Path:
    """OpenClaw's config: ``$OPENCLAW_CONFIG_PATH``, else ``<state>/openclaw.json``."""
    configured = os.environ.get("OPENCLAW_CONFIG_PATH")
    return Path(configured).expanduser() if configured else state_dir(home) / "openclaw.json"


def transcripts() -> Path:
    return state_dir() / "agents"


def _object(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = parent.setdefault(key, {})
    if not isinstance(value, dict):
        raise InvalidArgument(f"OpenClaw's config has {where} that is not an object; fix it by hand first")
    return value


def add_plugin(config: dict[str, Any]) -> dict[str, Any]:
    """Select the plugin for the memory slot, enable it with conversation access, disable ``memory-core``."""
    plugins = _object(config, "plugins", "'plugins'")
    _object(plugins, "slots", "'plugins.slots'")["memory"] = PLUGIN_ID
    entries = _object(plugins, "entries", "'plugins.entries'")
    ours = _object(entries, PLUGIN_ID, f"'plugins.entries.{PLUGIN_ID}'")
    ours["enabled"] = True
    _object(ours, "hooks", f"'plugins.entries.{PLUGIN_ID}.hooks'")["allowConversationAccess"] = True
    _object(entries, BUNDLED_MEMORY, f"'plugins.entries.{BUNDLED_MEMORY}'")["enabled"] = False
    return config


def remove_plugin(config: dict[str, Any]) -> dict[str, Any]:
    """Undo :func:`add_plugin` in a config the user edited since (an unedited one gets its bytes back):
    the slot, our entry, and the ``enabled: false`` setup gave ``memory-core``."""
    plugins = config.get("plugins")
    if not isinstance(plugins, dict):
        return config
    slots = plugins.get("slots")
    if isinstance(slots, dict) and slots.get("memory") == PLUGIN_ID:
        del slots["memory"]
    entries = plugins.get("entries")
    if isinstance(entries, dict):
        entries.pop(PLUGIN_ID, None)
        bundled = entries.get(BUNDLED_MEMORY)
        if isinstance(bundled, dict) and bundled.get("enabled") is False:
            del bundled["enabled"]
    for parent, key in ((entries, BUNDLED_MEMORY), (plugins, "entries"), (plugins, "slots"), (config, "plugins")):
        if isinstance(parent, dict) and parent.get(key) == {}:
            del parent[key]
    return config


REQUIREMENT = Requirement(
    product="OpenClaw",
    command="openclaw",
    minimum=(2026, 9, 6),
    needs="the first whose plugin API the memory plugin setup installs is written for (its package.json's "
    "peerDependencies and compat.pluginApi)",
    package="openclaw",
)

RUNTIME = Runtime(name="openclaw", transcripts=transcripts, requirement=REQUIREMENT)
