"""The TypeScript extensions this package ships, and installing one into its runtime's own folder.

pi's extension and OpenClaw's memory plugin are npm-ready package folders in this package
(``pi_extension/``, ``openclaw_plugin/``). Their runtimes load TypeScript as it is, so installing one is
copying its files into the folder the runtime discovers extensions in, with ``scriptorium.json`` beside
them: this installation's command, the memory's state folder and the definitions of the tools the runtime
gives its model (:func:`scriptorium.runtimes.mcp.tools.tool_definitions`: one source for every runtime). Both
speak to Scriptorium through its commands only (``scriptorium hook``, ``scriptorium tool``).

A folder of that name that holds another package is refused (INVALID_ARGUMENT) and left as it is;
uninstalling removes the folder's files (only ours) and the folder. The folders installing made (``~/.pi``,
``~/.pi/agent``, ``extensions`` on a machine where the runtime never ran) are recorded in ``scriptorium.json``
(``made``), for uninstall to remove once empty (:func:`made`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from scriptorium.errors import InvalidArgument
from scriptorium.fsutil import atomic_write
from scriptorium.runtimes.base import READ_TOOLS, UPDATE_TOOLS
from scriptorium.runtimes.openclaw import state_dir as openclaw_state_dir
from scriptorium.runtimes.setup.reversible import missing_folders

HERE = Path(__file__).parent.parent
"""The runtime package's folder, where the extensions' folders are (``pi_extension/``, ``openclaw_plugin/``)."""
Action = Literal["created", "updated", "unchanged", "removed"]


@dataclass(frozen=True, slots=True)
class Extension:
    """One shipped extension: its package folder here, its files, and where its runtime finds it."""

    runtime: str
    source: Path
    files: tuple[str, ...]
    package: str
    """The ``name`` in its ``package.json``: how an installed folder is known to be ours."""
    folder: Callable[[Path], Path]
    """The runtime's folder for it, from the user's home."""
    tools: tuple[str, ...]
    """The tools it gives the runtime's model."""


PI = Extension(
    runtime="pi",
    source=HERE / "pi_extension",
    files=("index.ts", "package.json"),
    package="@scriptorium/pi-extension",
    folder=lambda home: home / ".pi" / "agent" / "extensions" / "scriptorium",
    tools=(*READ_TOOLS, *UPDATE_TOOLS),
)
"""pi finds a global extension of its own folder at ``~/.pi/agent/extensions/<name>/index.ts``."""

OPENCLAW = Extension(
    runtime="openclaw",
    source=HERE / "openclaw_plugin",
    files=("index.ts", "package.json", "openclaw.plugin.json"),
    package="@scriptorium/openclaw-memory",
    folder=lambda home: openclaw_state_dir(home) / "extensions" / "scriptorium",
    tools=("memory_search", "memory_get"),
)
"""OpenClaw discovers a global plugin at ``<state>/extensions/<id>/`` (its manifest, ``openclaw.plugin.json``);
its memory slot is two tools, memory_search and memory_get."""

EXTENSIONS = {extension.runtime: extension for extension in (PI, OPENCLAW)}


@dataclass(frozen=True, slots=True)
class Requester:
    """Whom an extension speaks for when it is not the owner: a propose or write token and its requester."""

    name: str
    token: str


def wiring(
    extension: Extension,
    state: Path,
    command: list[str],
    requester: Requester | None = None,
    made: Sequence[Path] = (),
) -> dict[str, object]:
    """What ``scriptorium.json`` tells the extension: the command that starts this installation's
    ``scriptorium``, the state folder, the tools and, for a requester, its token (the tools answer as
    that token: ``SCRIPTORIUM_TOKEN``) and name (the hooks' sessions are its own and their recall shows
    its records and the shared ones: ``SCRIPTORIUM_HOOK_AUDIENCE``); and the folders the first install made
    (``made``: for uninstall, the extension reads nothing of it). The file is 0600."""
    from scriptorium.runtimes.mcp.tools import tool_definitions

    tools = [d["function"] for d in tool_definitions() if d["function"]["name"] in extension.tools]
    wired: dict[str, object] = {"command": command, "state": str(state.resolve()), "tools": tools}
    if requester is not None:
        wired["requester"] = {"name": requester.name, "token": requester.token}
    if made:
        wired["made"] = [str(folder) for folder in made]
    return wired


def _files(
    extension: Extension, state: Path, command: list[str], requester: Requester | None, made: Sequence[Path]
) -> dict[str, bytes]:
    files = {name: (extension.source / name).read_bytes() for name in extension.files}
    wired = wiring(extension, state, command, requester, made)
    files["scriptorium.json"] = (json.dumps(wired, indent=2) + "\n").encode()
    return files


def made(extension: Extension, home: Path) -> list[Path]:
    """The folders the extension's first install made, as its ``scriptorium.json`` records them (none: an
    install before they were recorded, or not ours)."""
    folder = extension.folder(home)
    try:
        recorded = json.loads((folder / "scriptorium.json").read_text()).get("made", [])
    except (OSError, ValueError, AttributeError):
        return []
    ours = _ours(extension, folder) and isinstance(recorded, list)
    return [Path(p) for p in recorded if isinstance(p, str)] if ours else []


def _ours(extension: Extension, folder: Path) -> bool:
    try:
        return bool(json.loads((folder / "package.json").read_text()).get("name") == extension.package)
    except (OSError, ValueError, AttributeError):
        return False


def check(extension: Extension, home: Path) -> Path:
    """The extension's folder, unless one of that name holds another package (INVALID_ARGUMENT)."""
    folder = extension.folder(home)
    if folder.exists() and any(folder.iterdir()) and not _ours(extension, folder):
        raise InvalidArgument(f"{folder} holds another extension, not Scriptorium's: move it away first")
    return folder


def install(
    extension: Extension, state: Path, home: Path, command: list[str], requester: Requester | None = None
) -> list[tuple[Path, Action]]:
    """The extension's files into its runtime's folder (each path with ``created``, ``updated`` or
    ``unchanged``); a folder of that name that is not ours is refused (INVALID_ARGUMENT)."""
    folder = check(extension, home)
    first = made(extension, home) if folder.exists() else missing_folders(folder)
    folder.mkdir(parents=True, exist_ok=True)
    done: list[tuple[Path, Action]] = []
    for name, data in _files(extension, state, command, requester, first).items():
        path = folder / name
        before = path.read_bytes() if path.exists() else None
        if before != data:
            atomic_write(path, data)
        done.append((path, "unchanged" if before == data else "updated" if before else "created"))
    return done


def uninstall(extension: Extension, home: Path) -> list[tuple[Path, Action]]:
    """The extension's folder goes (only ours; nothing else of the runtime's is touched; the folders above it
    that install made go with :func:`made`)."""
    folder = extension.folder(home)
    if not folder.exists():
        return []
    if not _ours(extension, folder):
        raise InvalidArgument(f"{folder} holds another extension, not Scriptorium's: left as it is")
    done: list[tuple[Path, Action]] = []
    for path in sorted(folder.iterdir()):
        if path.is_file():
            path.unlink()
            done.append((path, "removed"))
    folder.rmdir()
    return done
