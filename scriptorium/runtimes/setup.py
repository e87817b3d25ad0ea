"""``scriptorium setup claude-code|codex|pi|openclaw``: wire memory into a runtime's own settings.

Which files it touches is the runtime's own module's answer (:attr:`Runtime.settings_files
<scriptorium.runtimes.base.Runtime>`):

* Claude Code: the hooks in ``~/.claude/settings.json`` (``--scope user``) or
  ``<project>/.claude/settings.json`` (``--scope project``), and the MCP server
  in ``~/.claude.json`` or ``<project>/.mcp.json``;
* Codex: the hooks in ``$CODEX_HOME/hooks.json`` and the MCP server in
  ``$CODEX_HOME/config.toml`` (``[mcp_servers.scriptorium]``; ``CODEX_HOME``
  defaults to ``~/.codex``);
* pi and OpenClaw: their extension into their own extensions folder
  (:mod:`scriptorium.runtimes.extensions`), and for OpenClaw the memory slot in
  its config (:mod:`scriptorium.runtimes.openclaw`).

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
import shlex
import stat
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import scriptorium
from scriptorium.errors import InvalidArgument
from scriptorium.fsutil import atomic_write
from scriptorium.runtimes import claude_code, codex, extensions, inbox, openclaw
from scriptorium.runtimes.base import (
    HOOK_TIMEOUTS_S,
    READ_TOOLS,
    SERVER_NAME,
    UPDATE_TOOLS,
    HookEntry,
    Runtime,
    Scope,
    SettingsFiles,
    is_our_hook,
)
from scriptorium.runtimes.catalog import runtime as runtime_named
from scriptorium.runtimes.mcp_front import HOOK_TOOL
from scriptorium.runtimes.plugin import PLUGIN_ID, plugin_enabled
from scriptorium.runtimes.resident import Resident

BACKUP_SUFFIX = ".scriptorium-backup"
NOTE_SUFFIX = ".scriptorium-setup.json"


@dataclass(frozen=True, slots=True)
class Change:
    """What setup did to one file."""

    path: Path
    action: Literal["created", "updated", "unchanged", "restored", "removed", "cleaned"]


LAUNCHER = (
    "import sys; sys.argv[0] = 'scriptorium'; sys.path.append({where!r}); "
    "from scriptorium.cli.entry import main; sys.exit(main())"
)
"""What the runtime runs (``python -S -c LAUNCHER hook …``): the ``scriptorium`` console script without the
site module. A hook runs as a new process on the turn's critical path, and reading site-packages' ``.pth``
files is half of its cost (about 17 ms of 36 here); the hook's fast path needs only the standard library and
this package, so the folder holding it is all the path gains. Whatever needs more loads site then
(:func:`scriptorium.cli.entry.with_site`)."""


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
    (:mod:`scriptorium.runtimes.inbox`); the others take ``otherwise``'s entry."""
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
    settings: dict[str, Any], entry: HookEntry, timeouts_s: Mapping[str, int] = HOOK_TIMEOUTS_S
) -> dict[str, Any]:
    """``settings`` with our one hook per event of ``timeouts_s``, as ``entry`` makes it (ours replaced; ours
    of other events removed); others untouched."""
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
        existing = _our_hooks(groups)
        if existing:
            for hook in existing:
                hook.clear()
                hook.update(entry(event, timeout))
            continue
        groups.append({"hooks": [entry(event, timeout)]})
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


# -- one file, with its backup ------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _edit(path: Path, change: Callable[[bytes], bytes], private: bool = False) -> Change:
    """Install: apply ``change`` to the file's bytes, keeping its original bytes beside it the first time.
    ``private``: the result holds a token, so the file loses any group or other access (the only time setup
    changes a file's mode; the backup keeps the original one)."""
    before = path.read_bytes() if path.exists() else None
    after = change(before or b"")
    if before == after and not (private and _mode(path) & 0o077):
        return Change(path, "unchanged")
    original = _mode(path)
    mode = original & (0o700 if private else 0o7777)
    backup, note = path.with_name(path.name + BACKUP_SUFFIX), path.with_name(path.name + NOTE_SUFFIX)
    if not note.exists():  # the first change: keep what the user had, as they had it
        if before is not None:
            atomic_write(backup, before, mode=original)
        atomic_write(note, json.dumps({"existed": before is not None}).encode())
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, after, mode=mode)
    recorded = json.loads(note.read_text())
    atomic_write(note, json.dumps({**recorded, "written_sha256": _sha(after)}).encode())
    return Change(path, "created" if before is None else "updated")


def _mode(path: Path) -> int:
    """The permission bits to write ``path`` with: its own (setup never widens a runtime's file, and narrows
    one only when it will hold a token), or the user's alone for a file setup creates."""
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


def check_resident(runtime: str, scope: Scope) -> None:
    """INVALID_ARGUMENT unless ``runtime`` at ``scope`` can be wired to a resident server (``--server``)."""
    if not _wired(runtime).http_hooks:
        raise InvalidArgument(f"{runtime} runs command hooks only: set it up without --server")
    if scope != "user":
        raise InvalidArgument("--server puts tokens in the settings: user scope only (a project's files are shared)")


def check_extension(runtime: str, home: Path) -> None:
    """INVALID_ARGUMENT before anything is made when ``runtime``'s extension folder holds another package."""
    extensions.check(extensions.EXTENSIONS[runtime], home)


def install_extension(
    runtime: str, state: Path, home: Path, requester: extensions.Requester | None = None
) -> list[Change]:
    """``setup pi`` / ``setup openclaw``: the runtime's extension into its own folder (and, for OpenClaw,
    its config's memory slot: :func:`scriptorium.runtimes.openclaw.add_plugin`), speaking for
    ``requester`` when given."""
    extension = extensions.EXTENSIONS[runtime]
    installed = extensions.install(extension, state, home, scriptorium_command(), requester)
    changes = [Change(path, action) for path, action in installed]
    if runtime == "openclaw":
        config = openclaw.config_file(home)
        changes.append(_edit(config, _json_change(openclaw.add_plugin, config)))
    return changes


def uninstall_extension(runtime: str, home: Path) -> list[Change]:
    """Undo :func:`install_extension`: the extension's folder goes, the config's entries with it."""
    extension = extensions.EXTENSIONS[runtime]
    changes = [Change(path, action) for path, action in extensions.uninstall(extension, home)]
    if runtime == "openclaw":
        config = openclaw.config_file(home)
        changes.append(_undo(config, _json_change(openclaw.remove_plugin, config)))
    return changes


def install(
    runtime: str,
    state: Path,
    scope: Scope = "user",
    home: Path | None = None,
    project: Path | None = None,
    allow_updates: bool = False,
    trust_hooks: str | None = None,
    resident: Resident | None = None,
    requester: extensions.Requester | None = None,
) -> list[Change]:
    """Wire the hooks and the MCP server in; the read tools run without asking in a headless run, and
    ``memory_update`` too with ``allow_updates``. ``trust_hooks`` (Codex: its executable) records the new
    hooks as trusted, at the hashes Codex itself gives them, as trusting them once in its TUI would.
    ``resident``: the hooks and the MCP server reach a running ``scriptorium serve`` over HTTP instead of
    starting processes (Claude Code at user scope; the files that then hold its tokens are made 0600)."""
    if runtime in extensions.EXTENSIONS:
        if scope != "user" or resident is not None or trust_hooks is not None:
            raise InvalidArgument(f"{runtime} takes its extension at user scope, without --server or --trust-hooks")
        return install_extension(runtime, state, home or Path.home(), requester)
    if requester is not None:
        raise InvalidArgument("--token is for the pi and OpenClaw extensions (Claude Code and Codex: tokens per hook)")
    wired = _wired(runtime)
    if wired.name == "claude-code" and plugin_enabled(str(home or Path.home())):
        raise InvalidArgument(
            f"the Scriptorium plugin ({PLUGIN_ID}) is enabled in Claude Code and wires memory in already",
            guidance=f"keep it, or `claude plugin uninstall {PLUGIN_ID}` first to use the settings files instead",
        )
    target = plan(runtime, scope, home or Path.home(), project or Path.cwd())
    entry = inbox_hook(state, command_hook(hook_command(state)))
    tools = [*READ_TOOLS, *(UPDATE_TOOLS if allow_updates else ())]
    program, *prefix = scriptorium_command()
    server: dict[str, Any] = {
        "command": program,
        "args": [*prefix, "mcp", "--state", str(state.resolve())],
        **wired.server_options,
    }
    hidden: tuple[str, ...] = ()
    if wired.mcp_hooks:
        entry = mcp_tool_hook(wired.mcp_hooks, entry)
        hidden = claude_code.HIDDEN_TOOLS
    timeouts = wired.hook_timeouts_s
    if resident is not None:
        check_resident(runtime, scope)
        entry, server = resident.hook_entry, resident.server_entry(wired.server_options)
        timeouts = resident.hook_timeouts(timeouts)
        hidden = ()
    if wired.tool_permissions == "server-approval":
        server["tools"] = {tool: {"approval_mode": "approve"} for tool in tools}

    def hooks_edit(settings: dict[str, Any]) -> dict[str, Any]:
        settings = add_hooks(settings, entry, timeouts)
        if wired.tool_permissions != "settings-allow":
            return settings
        return claude_code.add_permissions(settings, tools, hidden)

    private = resident is not None
    if resident is None:
        inbox.prepare(state)
    changes = [_edit(target.hooks_file, _json_change(hooks_edit, target.hooks_file), private=private)]
    if target.mcp_format == "json":
        mcp_edit = _json_change(lambda s: add_server(s, server), target.mcp_file)
        changes.append(_edit(target.mcp_file, mcp_edit, private=private))
    else:
        changes.append(_edit(target.mcp_file, lambda data: codex.add_server(data.decode(), server).encode()))
    if trust_hooks is not None:
        if wired.name != "codex":
            raise InvalidArgument("--trust-hooks is for Codex, which asks before it runs a new hook")
        hashes = codex.hook_hashes(trust_hooks, project or Path.cwd())
        trusted = _edit(target.mcp_file, lambda data: codex.add_trust(data.decode(), hashes).encode())
        changes[-1] = trusted if trusted.action != "unchanged" else changes[-1]
    return changes


def uninstall(
    runtime: str, scope: Scope = "user", home: Path | None = None, project: Path | None = None
) -> list[Change]:
    if runtime in extensions.EXTENSIONS:
        return uninstall_extension(runtime, home or Path.home())
    target = plan(runtime, scope, home or Path.home(), project or Path.cwd())
    trusted = codex.trust_keys(target.hooks_file)  # read before our hooks (and their positions) go
    changes = [
        _undo(
            target.hooks_file,
            _json_change(lambda s: claude_code.remove_permissions(remove_hooks(s)), target.hooks_file),
        )
    ]
    if target.mcp_format == "json":
        changes.append(_undo(target.mcp_file, _json_change(remove_server, target.mcp_file)))
    else:
        changes.append(
            _undo(
                target.mcp_file, lambda data: codex.remove_trust(codex.remove_server(data.decode()), trusted).encode()
            )
        )
    return changes


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
