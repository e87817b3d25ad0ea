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
  (:mod:`scriptorium.runtimes.setup.extensions`), and for OpenClaw the memory slot in
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

from collections.abc import Callable
from pathlib import Path
from typing import Any

from scriptorium.errors import InvalidArgument
from scriptorium.fsutil import atomic_write
from scriptorium.runtimes import claude_code, codex, openclaw
from scriptorium.runtimes.base import READ_TOOLS, UPDATE_TOOLS, Runtime, Scope, SettingsFiles
from scriptorium.runtimes.catalog import runtime as runtime_named
from scriptorium.runtimes.hooks import inbox
from scriptorium.runtimes.plugin import PLUGIN_ID, plugin_enabled
from scriptorium.runtimes.setup import extensions
from scriptorium.runtimes.setup.entries import (
    add_hooks,
    add_server,
    command_hook,
    hook_command,
    inbox_hook,
    mcp_tool_hook,
    remove_hooks,
    remove_server,
    scriptorium_command,
)
from scriptorium.runtimes.setup.installed import Found
from scriptorium.runtimes.setup.installed import check as check_installed
from scriptorium.runtimes.setup.resident import Resident
from scriptorium.runtimes.setup.reversible import Change, dump_json, edit, json_change, load_json, remove_made, undo

__all__ = ["Change", "install", "plan", "scriptorium_command", "uninstall"]

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


def check_runtime(runtime: str, command: str | None = None) -> Found | None:
    """The runtime setup is about to write for, found on PATH (``command``: its executable instead) at a
    version that reads what setup writes; RUNTIME_MISSING or RUNTIME_TOO_OLD before anything is made
    (:mod:`scriptorium.runtimes.setup.installed`). None for a runtime with nothing to check."""
    requirement = runtime_named(runtime).requirement
    return None if requirement is None else check_installed(requirement, command)


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
        changes.append(edit(config, json_change(openclaw.add_plugin, config)))
    return changes


def uninstall_extension(runtime: str, home: Path) -> list[Change]:
    """Undo :func:`install_extension`: the extension's folder goes, the config's entries with it, and then the
    folders setup made for them that are empty now (``~/.pi``, ``~/.openclaw``)."""
    extension = extensions.EXTENSIONS[runtime]
    made = extensions.made(extension, home)
    changes = [Change(path, action) for path, action in extensions.uninstall(extension, home)]
    if runtime == "openclaw":
        config = openclaw.config_file(home)
        changes.append(undo(config, json_change(openclaw.remove_plugin, config)))
    return changes + remove_made([*made, *(folder for change in changes for folder in change.made)])


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
        settings = add_hooks(settings, entry, timeouts, wired.hook_matchers if resident is None else None)
        if wired.tool_permissions != "settings-allow":
            return settings
        return claude_code.add_permissions(settings, tools, hidden)

    private = resident is not None
    if resident is None:
        inbox.prepare(state)
    changes = [edit(target.hooks_file, json_change(hooks_edit, target.hooks_file), private=private)]
    if target.mcp_format == "json":
        mcp_edit = json_change(lambda s: add_server(s, server), target.mcp_file)
        changes.append(edit(target.mcp_file, mcp_edit, private=private))
    else:
        changes.append(edit(target.mcp_file, lambda data: codex.add_server(data.decode(), server).encode()))
    if trust_hooks is not None:
        if wired.name != "codex":
            raise InvalidArgument("--trust-hooks is for Codex, which asks before it runs a new hook")
        hashes = codex.hook_hashes(trust_hooks, project or Path.cwd())
        trusted = edit(target.mcp_file, lambda data: codex.add_trust(data.decode(), hashes).encode())
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
        undo(
            target.hooks_file,
            json_change(lambda s: claude_code.remove_permissions(remove_hooks(s)), target.hooks_file),
        )
    ]
    if target.mcp_format == "json":
        changes.append(undo(target.mcp_file, json_change(remove_server, target.mcp_file)))
    else:
        changes.append(
            undo(target.mcp_file, lambda data: codex.remove_trust(codex.remove_server(data.decode()), trusted).encode())
        )
    return changes + remove_made(folder for change in changes for folder in change.made)


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


def _set_backend(path: Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> Change:
    before = path.read_bytes() if path.exists() else None
    values = load_json(path, before) if before and before.strip() else {}
    after = change(values)
    if after == values:
        return Change(path, "unchanged")
    if not after and before is not None:
        path.unlink()
        return Change(path, "removed")
    atomic_write(path, dump_json(after))
    return Change(path, "created" if before is None else "updated")
