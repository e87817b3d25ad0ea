"""``setup claude-code --server URL``: a runtime that reaches a running ``scriptorium serve`` instead of
starting processes.

With command hooks and a stdio MCP server, every ``claude -p`` starts a Python process per hook and one for
MCP (which Claude Code stops with SIGINT, polling its exit every 50 ms): measured, that machinery alone costs
about 1.3 × a bare run, whatever the commands do. Claude Code's ``http`` hooks and ``http`` MCP servers
start nothing: they post to a process that is already up. So with ``--server``:

* ``UserPromptSubmit``, ``Stop``, ``SubagentStop``, ``PreCompact`` and ``SessionEnd`` post to
  ``URL/api/hooks?core=first-prompt`` with a runtime token of their own (the writing ones are answered at
  once and run in turn by the server);
* ``SessionStart`` is left out: Claude Code runs no HTTP hook for it, and a command would start a process
  again. What it did moves to the server: the prompt that opens a session (the first the server sees of a
  session its store holds nothing of, or the first after a ``PreCompact``) carries the core and the
  project's context before its recall (:mod:`scriptorium.runtimes.openings`); the server notes the
  transcript for its session watcher, which writes a session that dies unended and sweeps every
  ``SCRIPTORIUM_SWEEP_INTERVAL_S``;
* the MCP server is ``URL/mcp``, with the owner's token (as the stdio server speaks for the owner).

While the server is down, Claude Code reports each HTTP hook as failed and goes on: the session's turns stay
in its transcript, and the server's first sweep after it is back imports every transcript that changed in
a folder memory already reads from (:func:`~scriptorium.runtimes.hooks.watcher.grown_transcripts`).

Both tokens live in the user's Claude Code files, which setup makes 0600. Only a loopback URL is taken:
the tokens travel in clear HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scriptorium.errors import InvalidArgument
from scriptorium.runtimes.base import HOOK_MARK_HEADER, is_our_hook
from scriptorium.runtimes.openings import FIRST_PROMPT

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
NO_HTTP_EVENTS = frozenset({"SessionStart"})
"""The events Claude Code runs no HTTP hook for: setup --server wires none (module docs)."""


def server_url(text: str) -> str:
    """``text`` as the base URL of a local server (``http://127.0.0.1:8765``), or INVALID_ARGUMENT."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidArgument(f"--server {text!r} is not a URL ({exc})") from exc
    if parts.scheme != "http" or parts.hostname not in LOOPBACK or port is None:
        raise InvalidArgument(
            f"--server takes http://127.0.0.1:PORT (the address `scriptorium serve --port PORT` listens on), "
            f"not {text!r}: the hooks' tokens travel in clear HTTP, so only this machine's loopback is taken"
        )
    if parts.path.strip("/") or parts.query or parts.fragment:
        raise InvalidArgument(f"--server is the server's address alone, without a path: not {text!r}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"http://{host}:{port}"


@dataclass(frozen=True, slots=True)
class Resident:
    """A running ``scriptorium serve`` at ``url``; ``hook_token`` is a runtime token, ``mcp_token`` the owner's."""

    url: str
    hook_token: str
    mcp_token: str

    def hook_timeouts(self, timeouts_s: Mapping[str, int]) -> dict[str, int]:
        """The events wired, with their timeouts: those the runtime runs an HTTP hook for."""
        return {event: timeout for event, timeout in timeouts_s.items() if event not in NO_HTTP_EVENTS}

    def hook_entry(self, event: str, timeout: int) -> dict[str, Any]:
        """The HTTP hook to the server for ``event``."""
        headers = {"Authorization": f"Bearer {self.hook_token}", HOOK_MARK_HEADER: "1"}
        url = f"{self.url}/api/hooks?core={FIRST_PROMPT}"
        return {"type": "http", "url": url, "headers": headers, "timeout": timeout}

    def server_entry(self, options: Mapping[str, object]) -> dict[str, Any]:
        return {
            "type": "http",
            "url": f"{self.url}/mcp",
            "headers": {"Authorization": f"Bearer {self.mcp_token}"},
            **options,
        }


def hook_token_in(hooks_file: Path) -> str | None:
    """The runtime token our HTTP hooks in ``hooks_file`` carry (None: none there, or an unreadable file)."""
    try:
        settings = json.loads(hooks_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    groups = settings.get("hooks", {}) if isinstance(settings, dict) else {}
    for event in groups.values() if isinstance(groups, dict) else ():
        for group in event if isinstance(event, list) else ():
            for hook in group.get("hooks", []) if isinstance(group, dict) else ():
                if is_our_hook(hook) and hook.get("type") == "http":
                    bearer = str(hook["headers"].get("Authorization", ""))
                    if bearer.startswith("Bearer "):
                        return bearer.removeprefix("Bearer ")
    return None
