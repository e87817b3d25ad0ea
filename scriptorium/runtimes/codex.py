"""Codex: transcripts (rollouts) under ``$CODEX_HOME/sessions``; hooks in ``$CODEX_HOME/hooks.json`` and the
MCP server in ``$CODEX_HOME/config.toml`` (``[mcp_servers.scriptorium]``). Codex reads no project scope."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from scriptorium.errors import InvalidArgument
from scriptorium.runtimes.base import (
    HOOK_TIMEOUTS_S,
    MCP_HOOK_ARGUMENTS,
    SERVER_NAME,
    Requirement,
    Runtime,
    Scope,
    SettingsFiles,
    is_our_hook,
)


def home_dir(home: Path | None = None) -> Path:
    return Path(os.environ.get("CODEX_HOME") or (home or Path.home()) / ".codex")


def transcripts() -> Path:
    return home_dir() / "sessions"


def settings_files(scope: Scope, home: Path, project: Path) -> SettingsFiles:
    if scope != "user":
        raise InvalidArgument("Codex reads its hooks and MCP servers from $CODEX_HOME: use --scope user")
    codex_home = home_dir(home)
    return SettingsFiles(codex_home / "hooks.json", codex_home / "config.toml", "toml")


# -- config.toml: the MCP server, and the trust Codex records for hooks --------------------


def add_server(text: str, server: dict[str, Any]) -> str:
    """``config.toml`` with our ``[mcp_servers.scriptorium]``, the user's servers kept in whichever layout
    they wrote them: ``[mcp_servers.x]`` tables, a ``[mcp_servers]`` table or top-level dotted keys
    (``mcp_servers.x.command = …``), or an inline table."""
    import tomlkit
    import tomlkit.items

    doc = tomlkit.parse(remove_server(text))
    servers = doc.get("mcp_servers")
    if isinstance(servers, tomlkit.items.InlineTable):  # fully defined where it stands: ours goes inside
        servers[SERVER_NAME] = _inline(server)
        return _checked(text, tomlkit.dumps(doc), server)
    if servers is None or (isinstance(servers, tomlkit.items.Table) and servers.is_super_table()):
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc["mcp_servers"] = servers
        table = tomlkit.table()
        for key, value in server.items():
            table[key] = value
        servers[SERVER_NAME] = table
        return _checked(text, tomlkit.dumps(doc), server)
    # Dotted keys, or a [mcp_servers] table of its own: a sub-table header after everything else is valid
    # TOML there, and tomlkit would otherwise interleave it with the user's dotted lines.
    ours = tomlkit.document()
    ours["mcp_servers"] = tomlkit.table(is_super_table=True)
    ours["mcp_servers"][SERVER_NAME] = server
    body = tomlkit.dumps(doc).rstrip("\n")
    return _checked(text, f"{body}\n\n{tomlkit.dumps(ours).strip()}\n" if body else tomlkit.dumps(ours), server)


def _inline(value: dict[str, Any]) -> Any:
    import tomlkit

    table = tomlkit.inline_table()
    for key, item in value.items():
        table[key] = _inline(item) if isinstance(item, dict) else item
    return table


def _checked(before: str, after: str, server: dict[str, Any] | None) -> str:
    """``after``, once it parses to ``before``'s settings with our server added (or removed: None) and
    nothing else changed; never a config.toml Codex would read differently."""
    import tomllib

    try:
        old, new = tomllib.loads(before), tomllib.loads(after)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"config.toml is not valid TOML ({exc}); fix it by hand first") from exc
    for config in (old, new):
        config.get("mcp_servers", {}).pop(SERVER_NAME, None)
        if "mcp_servers" in config and not config["mcp_servers"]:
            del config["mcp_servers"]
    added = tomllib.loads(after).get("mcp_servers", {}).get(SERVER_NAME)
    if old != new or added != server:
        raise InvalidArgument("config.toml's layout defeats a safe merge; add [mcp_servers.scriptorium] by hand")
    return after


def remove_server(text: str) -> str:
    import tomlkit

    doc = tomlkit.parse(text)
    servers = doc.get("mcp_servers")
    if servers is not None and SERVER_NAME in servers:
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcp_servers"]
    return _checked(text, _comments_kept(text, tomlkit.dumps(doc)), None)


_OUR_HEADER = re.compile(rf'^\s*\[\s*mcp_servers\s*\.\s*"?{SERVER_NAME}"?\s*(\.[^\]]*)?\]\s*(#.*)?$')
"""Our table's header, or one of its sub-tables' (``[mcp_servers.scriptorium.tools.memory_get]``)."""


def _comments_kept(before: str, after: str, ours: Callable[[str], object] = _OUR_HEADER.match) -> str:
    """``after`` (``before`` without our tables, those whose header line ``ours`` matches) with the comment
    lines tomlkit took away with them: a user's comment written below ``[mcp_servers.scriptorium]``, its
    sub-tables or our trust records belongs to their body for tomlkit, though the user meant it for what
    follows (setup writes no comment there). Put back where the tables stood (else at the end)."""
    lines = before.splitlines(keepends=True)
    for start in [i for i, line in enumerate(lines) if ours(line) and (i == 0 or not _in_ours(lines, i - 1, ours))]:
        end = next(
            (j for j in range(start + 1, len(lines)) if lines[j].lstrip().startswith("[") and not ours(lines[j])),
            len(lines),
        )
        lost = [line for line in lines[start + 1 : end] if line.lstrip().startswith("#") and line not in after]
        if not lost:
            continue
        comments = "".join(line if line.endswith("\n") else line + "\n" for line in lost)
        rest = "".join(lines[end:])
        if rest and after.endswith(rest):
            after = after[: len(after) - len(rest)] + comments + rest
        else:
            after = after.rstrip("\n") + ("\n\n" if after.strip() else "") + comments
    return after


def _in_ours(lines: list[str], index: int, ours: Callable[[str], object]) -> bool:
    """Whether line ``index`` lies in one of our tables (below its header, before the next other header)."""
    for line in reversed(lines[: index + 1]):
        if line.lstrip().startswith("["):
            return bool(ours(line))
    return False


def trust_keys(hooks_file: Path) -> list[str]:
    """The keys under which Codex records its trust in our hooks (``[hooks.state."<hooks.json>:<event>:<group>:
    <hook>"]`` in config.toml, the event in snake case, positions from 0), for the hooks ``hooks_file`` holds now."""
    try:
        hooks = json.loads(hooks_file.read_text()).get("hooks", {})
    except (OSError, ValueError, AttributeError):
        return []
    keys = []
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        snake = re.sub(r"(?<!^)([A-Z])", r"_\1", event).lower()
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            inner = group.get("hooks", []) if isinstance(group, dict) else []
            keys += [f"{hooks_file.resolve()}:{snake}:{g}:{h}" for h, hook in enumerate(inner) if is_our_hook(hook)]
    return keys


def remove_trust(text: str, keys: Sequence[str]) -> str:
    """``config.toml`` without Codex's trust records for ``keys`` (so that a later setup is asked again)."""
    import tomlkit

    doc = tomlkit.parse(text)
    hooks = doc.get("hooks")
    state = hooks.get("state") if hooks is not None else None
    if hooks is None or state is None or not any(key in state for key in keys):
        return text
    for key in keys:
        if key in state:
            del state[key]
    if not state:
        del hooks["state"]
    if not hooks:
        del doc["hooks"]
    headers = {f'[hooks.state."{key}"]' for key in keys}
    return _comments_kept(text, tomlkit.dumps(doc), lambda line: any(line.strip().startswith(h) for h in headers))


APP_SERVER_ATTEMPT_S = 50.0
"""How long one ``codex app-server`` has to answer the handshake and list the hooks (it answers in a second or
two; one that has not by then is stuck, and a fresh one is asked)."""
APP_SERVER_ATTEMPTS = 2
"""App-servers asked in turn before setup gives up (so at most 100 s, within any caller's two minutes)."""


def hook_hashes(codex: str, cwd: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Codex's own hash of each of our hooks, by the key it records trust under: what ``codex app-server``
    answers to ``hooks/list`` (the hash is Codex's to compute; a guess would trust nothing)."""
    for attempt in range(1, APP_SERVER_ATTEMPTS + 1):
        listed = _list_hooks(codex, cwd, env)
        if listed is not None:
            hooks = [h for entry in listed.get("data", []) for h in entry.get("hooks", [])]
            return {str(h["key"]): str(h["currentHash"]) for h in hooks if _listed_ours(h) and h.get("currentHash")}
        from scriptorium.logs import get_logger

        get_logger(__name__).warning("setup.codex_app_server_silent", attempt=attempt)
    raise InvalidArgument(
        f"codex app-server did not list the hooks ({APP_SERVER_ATTEMPTS} tries of {APP_SERVER_ATTEMPT_S:.0f} s); "
        "trust them in `codex` (the TUI) instead"
    )


def _list_hooks(codex: str, cwd: Path, env: Mapping[str, str] | None) -> dict[str, Any] | None:
    """One app-server's answer to ``hooks/list``, asked once it has answered ``initialize`` (as the protocol
    has it); None when it answered neither within :data:`APP_SERVER_ATTEMPT_S`."""
    import subprocess
    import time

    try:
        proc = subprocess.Popen(
            [codex, "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
        )
    except OSError as exc:
        raise InvalidArgument(f"cannot run {codex!r} to read its hook hashes: {exc}") from exc
    assert proc.stdin is not None and proc.stdout is not None
    deadline = time.monotonic() + APP_SERVER_ATTEMPT_S
    lines = _Lines(proc.stdout.fileno())
    hello = {"clientInfo": {"name": "scriptorium-setup", "version": "1"}}
    try:
        _send(proc.stdin, {"id": 1, "method": "initialize", "params": hello})
        if _answer(lines, 1, "initialize", deadline) is None:
            return None
        _send(proc.stdin, {"method": "initialized"})
        _send(proc.stdin, {"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}})
        return _answer(lines, 2, "hooks/list", deadline)
    finally:
        proc.kill()
        proc.wait(10)


def _send(stream: Any, message: dict[str, Any]) -> None:
    stream.write(json.dumps(message).encode("utf-8") + b"\n")
    stream.flush()


class _Lines:
    """Lines read from a descriptor with a deadline: its own buffer, so that a line read ahead (a notification
    and an answer in one read) is never left waiting in a file object's buffer while ``select`` sleeps."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def next(self, deadline: float) -> bytes | None:
        """The next line; b"" at the end of the stream, None when none came before ``deadline``."""
        import select
        import time

        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return b""
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line + b"\n"


def _listed_ours(hook: dict[str, Any]) -> bool:
    """One of our hooks, as ``hooks/list`` shows it (an ``mcp_tool`` hook as ``handlerType: mcpTool``)."""
    return is_our_hook({"type": "mcp_tool", **hook} if hook.get("handlerType") == "mcpTool" else hook)


def _answer(lines: _Lines, request_id: int, method: str, deadline: float) -> dict[str, Any] | None:
    """The result of request ``request_id`` (``method``), read before ``deadline`` (None: not by then)."""
    while (line := lines.next(deadline)) is not None:
        if not line:
            raise InvalidArgument("codex app-server ended before it listed the hooks; trust them in `codex` (the TUI)")
        try:
            message = json.loads(line)
        except ValueError:
            continue  # not a protocol line
        if isinstance(message, dict) and message.get("id") == request_id:
            if "error" in message:
                raise InvalidArgument(f"codex app-server refused {method}: {message['error']}")
            return dict(message.get("result") or {})
    return None


def add_trust(text: str, hashes: Mapping[str, str]) -> str:
    """``config.toml`` recording our hooks as trusted at ``hashes`` (Codex's ``[hooks.state."<key>"]``
    ``trusted_hash``), the user's other trust records and keys kept."""
    import tomlkit

    if not hashes:
        return text
    doc = tomlkit.parse(text)
    hooks = doc.setdefault("hooks", tomlkit.table(is_super_table=True))
    state = hooks.setdefault("state", tomlkit.table(is_super_table=True))
    for key, digest in hashes.items():
        entry = state.get(key)
        if entry is None:
            entry = tomlkit.table()
            state[key] = entry
        entry["trusted_hash"] = digest
    return tomlkit.dumps(doc)


SESSION_END_TIMEOUT_S = 3
"""Codex gives a SessionEnd hook at most 3 s (a longer timeout is clamped, with a warning on every run);
the hook hands its pass to a detached process well within that."""

MCP_HOOKS = {event: MCP_HOOK_ARGUMENTS[event] for event in ("SessionStart", "UserPromptSubmit", "Stop")}
"""The hooks of every turn, answered by our MCP server (``mcp_tool`` hooks, Codex 0.155 and later) instead of
a process each. The rarer events (``SubagentStop``, ``PreCompact``, ``SessionEnd``, by which the server may
have stopped) keep the command."""


def server_environment() -> list[str]:
    """What Codex passes on to our MCP server besides its short default list (``env_vars``): every
    ``SCRIPTORIUM_*`` setting and the XDG folders, so that the server, and the hooks it answers, see the
    settings the hook commands see (and reach the same hook daemon)."""
    from scriptorium.settings import Settings

    xdg = ["XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"]
    return [*xdg, *(f"SCRIPTORIUM_{name.upper()}" for name in Settings.model_fields)]


class _ServerOptions(Mapping[str, object]):
    """Codex's ``server_options``, ``env_vars`` listed when setup reads it: the list comes from the settings'
    fields, and loading the settings (pydantic) to import the runtime catalogue would slow every
    ``scriptorium … --help`` (issue 56)."""

    def __getitem__(self, key: str) -> object:
        if key != "env_vars":
            raise KeyError(key)
        return server_environment()

    def __iter__(self) -> Iterator[str]:
        return iter(("env_vars",))

    def __len__(self) -> int:
        return 1


REQUIREMENT = Requirement(
    product="Codex",
    command="codex",
    minimum=(0, 155, 0),
    needs="the first to run the `mcp_tool` hooks setup writes",
    package="@openai/codex",
)
"""Codex 0.155 is the first to call an MCP tool from a hook (:data:`MCP_HOOKS`); 0.149 parsed the hook type
and never made the call."""


RUNTIME = Runtime(
    name="codex",
    transcripts=transcripts,
    settings_files=settings_files,
    writer_label="Codex (`codex exec`)",
    tool_permissions="server-approval",
    hook_timeouts_s={**HOOK_TIMEOUTS_S, "SessionEnd": SESSION_END_TIMEOUT_S},
    server_options=_ServerOptions(),
    mcp_hooks=MCP_HOOKS,
    requirement=REQUIREMENT,
)
