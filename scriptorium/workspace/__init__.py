"""The memory workspace: cited topics, the source archive, derived views, git.

The names below load on first use (PEP 562), so that importing one light
submodule (``scriptorium.workspace.paths``, ``.topics``) does not load git:
a hook that only searches never pays for it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scriptorium.workspace.results import PreInstall, TopicChange, TxnResult, WorkspaceConfig
    from scriptorium.workspace.sources import SourceMessage
    from scriptorium.workspace.workspace import MemoryWorkspace

_HOME = {
    "MemoryWorkspace": "scriptorium.workspace.workspace",
    "PreInstall": "scriptorium.workspace.results",
    "SourceMessage": "scriptorium.workspace.sources",
    "TopicChange": "scriptorium.workspace.results",
    "TxnResult": "scriptorium.workspace.results",
    "WorkspaceConfig": "scriptorium.workspace.results",
}

__all__ = ["MemoryWorkspace", "PreInstall", "SourceMessage", "TopicChange", "TxnResult", "WorkspaceConfig"]


def __getattr__(name: str) -> Any:
    if name in _HOME:
        value = getattr(import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
