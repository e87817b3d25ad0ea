"""The entries ``scriptorium setup`` writes into a runtime's JSON settings: how the runtime starts this
installation's ``scriptorium``, the hook entry for each event (a command, the hook inbox's shell command, or
an ``mcp_tool`` call of our MCP server's ``hook`` tool), and the merges that add and remove ours among the
user's own hooks and servers."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import scriptorium
from scriptorium.defaults import HOOK_TOOL
from scriptorium.errors import InvalidArgument
from scriptorium.runtimes.base import HOOK_TIMEOUTS_S, SERVER_NAME, HookEntry, is_our_hook
from scriptorium.runtimes.hooks import inbox

LAUNCHER = (
    "import sys; sys.argv[0] = 'scriptorium'; sys.path.append({where!r}); "
    "from scriptorium.cli.entry import main; sys.exit(main())"
)
"""What the runtime runs (``python -S -c LAUNCHER hook …``): the ``scriptorium`` console script without the
site module. A hook runs as a new process on the turn's critical path, and reading site-packages' ``.pth``
files is half of its cost (about 17 ms of 36 here); the hook's fast path needs only the standard library and
this package, so the folder holding it is all the path gains. Whatever needs more loads site then
(:func:`scriptorium.launch.with_site`)."""


def scriptorium_command() -> list[str]:
    """How the runtime should start this installation's ``scriptorium``: its own interpreter, by absolute path."""
    where = str(Path(scriptorium.__file__).resolve().parent.parent)
    return [sys.executable, "-S", "-c", LAUNCHER.format(where=where)]


def hook_command(state: Path) -> str:
    return shlex.join([*scriptorium_command(), "hook", "--state", str(state.resolve())])


# -- JSON settings ------------------------------------------------------------------------


def command_hook(command: str) -> HookEntry:
    """Every event runs ``command`` (Claude Code's and Codex's shape)."""
    return lambda event, timeout: {"type": "command", "command": command, "timeout": timeout}


def inbox_hook(state: Path, otherwise: HookEntry) -> HookEntry:
    """The inbox's events (SessionEnd) leave their payload in the hook inbox with a shell command
    (:mod:`scriptorium.runtimes.hooks.inbox`); the others take ``otherwise``'s entry."""
    command = inbox.command(state)

    def entry(event: str, timeout: int) -> dict[str, Any]:
        if event not in inbox.EVENTS:
            return otherwise(event, timeout)
        return {"type": "command", "command": command, "timeout": timeout}

    return entry


def mcp_tool_hook(templates: Mapping[str, Mapping[str, str]], otherwise: HookEntry) -> HookEntry:
    """The events of ``templates`` call our MCP server's ``hook`` tool with those arguments; the others take
    ``otherwise``'s entry."""

    def entry(event: str, timeout: int) -> dict[str, Any]:
        if event not in templates:
            return otherwise(event, timeout)
        return {
            "type": "mcp_tool",
            "server": SERVER_NAME,
            "tool": HOOK_TOOL,
            "input": dict(templates[event]),
            "timeout": timeout,
        }

    return entry


def add_hooks(
    settings: dict[str, Any],
    entry: HookEntry,
    timeouts_s: Mapping[str, int] = HOOK_TIMEOUTS_S,
    matchers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """``settings`` with our one hook per event of ``timeouts_s``, as ``entry`` makes it, in a group of its
    own whose ``matcher`` is the event's in ``matchers`` (none: every occurrence of the event); ours
    replaced in place, ours of other events removed; others untouched."""
    matchers = matchers or {}
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidArgument("the settings file's 'hooks' is not an object; fix it by hand first")
    stale = [event for event, groups in hooks.items() if event not in timeouts_s and _our_hooks(groups)]
    settings = remove_hooks(settings, stale)  # (setup --server wires no SessionStart hook)
    hooks = settings.setdefault("hooks", {})
    for event, timeout in timeouts_s.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidArgument(f"the settings file's hooks.{event} is not a list; fix it by hand first")
        ours = [group for group in groups if _our_hooks([group])]
        for group in ours:
            for hook in _our_hooks([group]):
                hook.clear()
                hook.update(entry(event, timeout))
            if len(_our_hooks([group])) == len(group["hooks"]):  # a group of ours alone: its matcher too
                group.pop("matcher", None)
                if event in matchers:
                    group["matcher"] = matchers[event]
        if not ours:
            group = {"matcher": matchers[event]} if event in matchers else {}
            groups.append({**group, "hooks": [entry(event, timeout)]})
    return settings


def _our_hooks(groups: object) -> list[dict[str, Any]]:
    """Our hook entries among one event's ``groups``."""
    if not isinstance(groups, list):
        return []
    return [
        hook
        for group in groups
        if isinstance(group, dict) and isinstance(group.get("hooks"), list)
        for hook in group["hooks"]
        if is_our_hook(hook)
    ]


def remove_hooks(settings: dict[str, Any], events: Iterable[str] | None = None) -> dict[str, Any]:
    """``settings`` without our hooks (of ``events`` only, when given); others untouched."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings
    for event in list(hooks) if events is None else [e for e in events if e in hooks]:
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not is_our_hook(h)]
                if not inner and group["hooks"]:
                    continue  # the group held only our hook
                group["hooks"] = inner
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del settings["hooks"]
    return settings


def add_server(settings: dict[str, Any], server: dict[str, Any]) -> dict[str, Any]:
    servers = settings.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InvalidArgument("the settings file's 'mcpServers' is not an object; fix it by hand first")
    servers[SERVER_NAME] = server
    return settings


def remove_server(settings: dict[str, Any]) -> dict[str, Any]:
    servers = settings.get("mcpServers")
    if isinstance(servers, dict):
        servers.pop(SERVER_NAME, None)
        if not servers:
            del settings["mcpServers"]
    return settings
