"""What a runtime module declares: its name, where it keeps transcripts, and where its settings live."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from scriptorium.defaults import HOOK_TOOL

Scope = Literal["user", "project"]

HOOK_TIMEOUTS_S: Mapping[str, int] = {
    "SessionStart": 10,
    "UserPromptSubmit": 5,
    "Stop": 60,
    "SubagentStop": 60,
    "PreCompact": 60,
    "SessionEnd": 5,
}
"""Seconds the runtime gives each hook before it stops waiting (what setup writes)."""


SERVER_NAME = "scriptorium"
"""The MCP server's name in every runtime's settings (and so in Claude Code's rules: ``mcp__scriptorium__…``)."""
READ_TOOLS = ("memory_status", "memory_get", "memory_search")
"""The model tools that only read: setup lets a headless run call them without asking."""
UPDATE_TOOLS = ("memory_update", "memory_remember")
"""The tools that change memory: allowed without asking only with ``setup --allow-updates`` (what a model
sends stays pending until the owner promotes it, either way)."""


@dataclass(frozen=True, slots=True)
class SettingsFiles:
    """Where setup wires memory in for one scope: the hooks file, and the MCP server's file and format."""

    hooks_file: Path
    mcp_file: Path
    mcp_format: Literal["json", "toml"]


@dataclass(frozen=True, slots=True)
class Requirement:
    """What setup asks of a runtime before it writes anything: its command on ``PATH``, answering
    ``<command> --version`` with a release at least :attr:`minimum` (the first x.y.z of its answer), the
    first to read what setup writes for it (:mod:`scriptorium.runtimes.setup.installed`)."""

    product: str
    """The runtime as its makers name it (``Claude Code``)."""
    command: str
    """Its executable, looked up on ``PATH``."""
    minimum: tuple[int, int, int]
    needs: str
    """What, in what setup writes, needs :attr:`minimum`: said when an older release is refused."""
    package: str
    """Its npm package: how to install or upgrade it (:attr:`install`)."""

    @property
    def install(self) -> str:
        """The command that installs, or upgrades, the runtime."""
        return f"npm install -g {self.package}@latest"


@dataclass(frozen=True, slots=True)
class Runtime:
    """One agent runtime Scriptorium reaches.

    ``settings_files(scope, home, project)`` is None for a runtime setup cannot wire (it is reached by
    importing its transcripts); it raises ``InvalidArgument`` for a scope the runtime does not read.
    """

    name: str
    transcripts: Callable[[], Path]
    """The folder the runtime writes its session transcripts under (its own environment honoured)."""
    settings_files: Callable[[Scope, Path, Path], SettingsFiles] | None = None
    writer_label: str | None = None
    """How setup offers the runtime's headless mode as the writer; None: it cannot write memory."""
    hook_timeouts_s: Mapping[str, int] = field(default_factory=lambda: dict(HOOK_TIMEOUTS_S))
    tool_permissions: Literal["settings-allow", "server-approval"] | None = None
    """How the runtime lets a headless run call a tool without asking: Claude Code's ``permissions.allow``
    rules (``mcp__<server>__<tool>``) in the hooks' settings file, or Codex's per-tool ``approval_mode`` in
    the server's own entry. None: the runtime asks nothing."""
    http_hooks: bool = False
    """The runtime posts hooks to a URL and reaches MCP servers over HTTP (``setup --server``)."""
    server_options: Mapping[str, object] = field(default_factory=dict)
    """More keys of the MCP server's entry: the runtime's own option to list the tools in its first model
    request (Claude Code's ``alwaysLoad``: otherwise they wait behind its tool search), the environment it
    passes on (Codex's ``env_vars``)."""
    hook_matchers: Mapping[str, str] = field(default_factory=dict)
    """The events whose hook runs only when the runtime's matcher matches (Claude Code's SessionStart
    ``compact``: the other sources' core comes with the opening prompt)."""
    mcp_hooks: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """The events whose hook calls our MCP server's ``hook`` tool (an ``mcp_tool`` hook) instead of running a
    command, with the tool's arguments as the runtime's templates make them from its payload (a field the
    payload lacks fails the hook: each event names only the fields it always has). A hook then costs the
    turn no process; the server is up for the whole session."""
    requirement: Requirement | None = None
    """What setup checks before it writes for the runtime (None: nothing to check)."""


_PAYLOAD = {name: f"${{{name}}}" for name in ("hook_event_name", "session_id", "transcript_path", "cwd")}
MCP_HOOK_ARGUMENTS: Mapping[str, Mapping[str, str]] = {
    "SessionStart": {**_PAYLOAD, "source": "${source}"},
    "UserPromptSubmit": {**_PAYLOAD, "prompt": "${prompt}"},
    "Stop": _PAYLOAD,
}
"""The ``hook`` tool's arguments for an ``mcp_tool`` hook of each event: the payload fields our hooks read, as
the ``${field}`` templates Claude Code and Codex both fill from the event's payload (only fields every
payload of that event has: a missing one fails the hook)."""


HookEntry = Callable[[str, int], dict[str, Any]]
"""The hook entry setup writes for one event and its timeout (seconds)."""

HOOK_MARK_HEADER = "X-Scriptorium-Hook"
"""The header every HTTP hook setup writes carries: how uninstall tells ours from the user's own."""


def is_our_hook(hook: object) -> bool:
    """A hook entry setup wrote: a command running ``scriptorium … hook --state …``, an HTTP hook posting to a
    resident server (``setup --server``) with our mark, or an ``mcp_tool`` hook calling our server's ``hook``."""
    if not isinstance(hook, dict):
        return False
    if hook.get("type") == "http":
        headers = hook.get("headers")
        return isinstance(headers, dict) and HOOK_MARK_HEADER in headers
    if hook.get("type") == "mcp_tool":
        return hook.get("server") == SERVER_NAME and hook.get("tool") == HOOK_TOOL
    command = str(hook.get("command", ""))
    return "scriptorium" in command and " hook --state " in command
