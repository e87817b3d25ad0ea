"""``scriptorium setup claude-code|codex``: wire the hooks and the MCP server into a runtime's own settings.

Which files it touches is the runtime's own module's answer (:attr:`Runtime.settings_files
<scriptorium.runtimes.base.Runtime>`):

* Claude Code: the hooks in ``~/.claude/settings.json`` (``--scope user``) or
  ``<project>/.claude/settings.json`` (``--scope project``), and the MCP server
  in ``~/.claude.json`` or ``<project>/.mcp.json``;
* Codex: the hooks in ``$CODEX_HOME/hooks.json`` and the MCP server in
  ``$CODEX_HOME/config.toml`` (``[mcp_servers.scriptorium]``; ``CODEX_HOME``
  defaults to ``~/.codex``).

Setting up merges: the user's other hooks, servers and keys stay as they are
(TOML through tomlkit, which keeps comments and layout), and running it again
changes nothing. Before the first change to a file its bytes are kept beside
it (``<file>.scriptorium-backup``) with a note of what was written.
``--uninstall`` removes exactly the entries setup added: when the file is still
byte for byte what setup wrote, the original bytes come back (or the file goes,
if setup created it); when the user edited it since, only our entries are taken out.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import stat
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scriptorium.errors import InvalidArgument
from scriptorium.fsutil import atomic_write
from scriptorium.runtimes.base import HOOK_TIMEOUTS_S, READ_TOOLS, UPDATE_TOOLS, Runtime, Scope, SettingsFiles
from scriptorium.runtimes.catalog import runtime as runtime_named

SERVER_NAME = "scriptorium"
BACKUP_SUFFIX = ".scriptorium-backup"
NOTE_SUFFIX = ".scriptorium-setup.json"


@dataclass(frozen=True, slots=True)
class Change:
    """What setup did to one file."""

    path: Path
    action: Literal["created", "updated", "unchanged", "restored", "removed", "cleaned"]


def scriptorium_command() -> list[str]:
    """How the runtime should start this installation's ``scriptorium`` (an absolute path when there is one)."""
    found = shutil.which("scriptorium") or str(Path(sys.executable).with_name("scriptorium"))
    return [found] if Path(found).exists() else [sys.executable, "-m", "scriptorium"]


def hook_command(state: Path) -> str:
    return shlex.join([*scriptorium_command(), "hook", "--state", str(state.resolve())])


def _is_ours(hook: object) -> bool:
    """A hook entry setup wrote: a command running ``scriptorium … hook --state …``."""
    command = str(hook.get("command", "")) if isinstance(hook, dict) else ""
    return "scriptorium" in command and " hook --state " in command


# -- JSON settings ------------------------------------------------------------------------


def add_hooks(
    settings: dict[str, Any], command: str, timeouts_s: Mapping[str, int] = HOOK_TIMEOUTS_S
) -> dict[str, Any]:
    """``settings`` with one command hook per event (Claude Code's and Codex's shape); others untouched."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidArgument("the settings file's 'hooks' is not an object; fix it by hand first")
    for event, timeout in timeouts_s.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidArgument(f"the settings file's hooks.{event} is not a list; fix it by hand first")
        existing = [h for g in groups if isinstance(g, dict) for h in g.get("hooks", []) if _is_ours(h)]
        if existing:
            for hook in existing:
                hook.update({"type": "command", "command": command, "timeout": timeout})
            continue
        groups.append({"hooks": [{"type": "command", "command": command, "timeout": timeout}]})
    return settings


def remove_hooks(settings: dict[str, Any]) -> dict[str, Any]:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return settings
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [h for h in group["hooks"] if not _is_ours(h)]
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


def _load_json(path: Path, data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"{path} is not valid JSON ({exc}); fix it by hand first") from exc
    if not isinstance(value, dict):
        raise InvalidArgument(f"{path} does not hold a JSON object")
    return value


def _dump_json(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# -- TOML (Codex's config.toml) -----------------------------------------------------------


def _toml_add_server(text: str, server: dict[str, Any]) -> str:
    """``config.toml`` with our ``[mcp_servers.scriptorium]``, the user's servers kept in whichever layout
    they wrote them: ``[mcp_servers.x]`` tables, a ``[mcp_servers]`` table or top-level dotted keys
    (``mcp_servers.x.command = …``), or an inline table."""
    import tomlkit
    import tomlkit.items

    doc = tomlkit.parse(_toml_remove_server(text))
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


def _toml_remove_server(text: str) -> str:
    import tomlkit

    doc = tomlkit.parse(text)
    servers = doc.get("mcp_servers")
    if servers is not None and SERVER_NAME in servers:
        del servers[SERVER_NAME]
        if not servers:
            del doc["mcp_servers"]
    return _checked(text, tomlkit.dumps(doc), None)


# -- one file, with its backup ------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _edit(path: Path, change: Callable[[bytes], bytes]) -> Change:
    """Install: apply ``change`` to the file's bytes, keeping its original bytes beside it the first time."""
    before = path.read_bytes() if path.exists() else None
    after = change(before or b"")
    if before == after:
        return Change(path, "unchanged")
    mode = _mode(path)
    backup, note = path.with_name(path.name + BACKUP_SUFFIX), path.with_name(path.name + NOTE_SUFFIX)
    if not note.exists():  # the first change: keep what the user had, as they had it
        if before is not None:
            atomic_write(backup, before, mode=mode)
        atomic_write(note, json.dumps({"existed": before is not None}).encode())
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, after, mode=mode)
    recorded = json.loads(note.read_text())
    atomic_write(note, json.dumps({**recorded, "written_sha256": _sha(after)}).encode())
    return Change(path, "created" if before is None else "updated")


def _mode(path: Path) -> int:
    """The permission bits to write ``path`` with: its own (setup never widens nor narrows a runtime's file),
    or the user's alone for a file setup creates."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return 0o600


def _undo(path: Path, remove: Callable[[bytes], bytes]) -> Change:
    """Uninstall: the original bytes when the file is still what setup wrote, else only our entries removed."""
    backup, note = path.with_name(path.name + BACKUP_SUFFIX), path.with_name(path.name + NOTE_SUFFIX)
    recorded = json.loads(note.read_text()) if note.exists() else None
    current = path.read_bytes() if path.exists() else None
    change: Change
    if recorded is not None and current is not None and _sha(current) == recorded.get("written_sha256"):
        if recorded.get("existed"):
            atomic_write(path, backup.read_bytes(), mode=_mode(backup))
            change = Change(path, "restored")
        else:
            path.unlink()
            change = Change(path, "removed")
    elif current is not None:
        cleaned = remove(current)
        if cleaned != current:
            atomic_write(path, cleaned, mode=_mode(path))
            change = Change(path, "cleaned")
        else:
            change = Change(path, "unchanged")
    else:
        change = Change(path, "unchanged")
    backup.unlink(missing_ok=True)
    note.unlink(missing_ok=True)
    return change


def _json_change(edit: Callable[[dict[str, Any]], dict[str, Any]], path: Path) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        original = _load_json(path, data) if data.strip() else {}
        updated = edit(json.loads(json.dumps(original)))
        return data if updated == original and data else _dump_json(updated)

    return change


# -- the runtimes -------------------------------------------------------------------------


def _wired(name: str) -> Runtime:
    found = runtime_named(name)
    if found.settings_files is None:
        raise InvalidArgument(f"{name} has no settings files setup can wire; import its transcripts with ingest")
    return found


def plan(runtime: str, scope: Scope, home: Path, project: Path) -> SettingsFiles:
    settings_files = _wired(runtime).settings_files
    assert settings_files is not None
    return settings_files(scope, home, project)


def install(
    runtime: str,
    state: Path,
    scope: Scope = "user",
    home: Path | None = None,
    project: Path | None = None,
    allow_updates: bool = False,
) -> list[Change]:
    """Wire the hooks and the MCP server in; the read tools run without asking in a headless run, and
    ``memory_update`` too with ``allow_updates``."""
    wired = _wired(runtime)
    target = plan(runtime, scope, home or Path.home(), project or Path.cwd())
    command = hook_command(state)
    tools = [*READ_TOOLS, *(UPDATE_TOOLS if allow_updates else ())]
    program, *prefix = scriptorium_command()
    server: dict[str, Any] = {"command": program, "args": [*prefix, "mcp", "--state", str(state.resolve())]}
    if wired.tool_permissions == "server-approval":
        server["tools"] = {tool: {"approval_mode": "approve"} for tool in tools}

    def hooks_edit(settings: dict[str, Any]) -> dict[str, Any]:
        settings = add_hooks(settings, command, wired.hook_timeouts_s)
        return add_permissions(settings, tools) if wired.tool_permissions == "settings-allow" else settings

    changes = [_edit(target.hooks_file, _json_change(hooks_edit, target.hooks_file))]
    if target.mcp_format == "json":
        changes.append(_edit(target.mcp_file, _json_change(lambda s: add_server(s, server), target.mcp_file)))
    else:
        changes.append(_edit(target.mcp_file, lambda data: _toml_add_server(data.decode(), server).encode()))
    return changes


def uninstall(
    runtime: str, scope: Scope = "user", home: Path | None = None, project: Path | None = None
) -> list[Change]:
    target = plan(runtime, scope, home or Path.home(), project or Path.cwd())
    trusted = trust_keys(target.hooks_file)  # read before our hooks (and their positions) go
    changes = [_undo(target.hooks_file, _json_change(lambda s: remove_permissions(remove_hooks(s)), target.hooks_file))]
    if target.mcp_format == "json":
        changes.append(_undo(target.mcp_file, _json_change(remove_server, target.mcp_file)))
    else:
        changes.append(
            _undo(
                target.mcp_file, lambda data: _toml_remove_trust(_toml_remove_server(data.decode()), trusted).encode()
            )
        )
    return changes


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
            keys += [f"{hooks_file.resolve()}:{snake}:{g}:{h}" for h, hook in enumerate(inner) if _is_ours(hook)]
    return keys


def _toml_remove_trust(text: str, keys: Sequence[str]) -> str:
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
    return tomlkit.dumps(doc)


# -- the writer ---------------------------------------------------------------------------


def writer_offer(runtime: str) -> str:
    """How setup names ``runtime``'s headless mode when it offers it as the writer."""
    return _wired(runtime).writer_label or runtime


def select_writer(state: Path, runtime: str) -> Change:
    """Make ``runtime``'s headless mode the writer: ``backend`` in ``<state>/writer.json`` (other keys kept).

    ``SCRIPTORIUM_WRITER``, when set, still takes precedence (see ``Settings.writer_backend``).
    """
    path = state / "writer.json"
    return _set_backend(path, lambda values: {**values, "backend": runtime})


def deselect_writer(state: Path, runtime: str) -> Change:
    """Undo :func:`select_writer` when ``runtime`` is still the chosen writer."""
    path = state / "writer.json"
    return _set_backend(path, lambda values: {k: v for k, v in values.items() if not (k == "backend" and v == runtime)})


def _set_backend(path: Path, edit: Callable[[dict[str, Any]], dict[str, Any]]) -> Change:
    before = path.read_bytes() if path.exists() else None
    values = _load_json(path, before) if before and before.strip() else {}
    after = edit(values)
    if after == values:
        return Change(path, "unchanged")
    if not after and before is not None:
        path.unlink()
        return Change(path, "removed")
    atomic_write(path, _dump_json(after))
    return Change(path, "created" if before is None else "updated")
