"""The memory workspace: cited topics, the source archive, derived views, git."""

from scriptorium.workspace.sources import SourceMessage
from scriptorium.workspace.workspace import (
    MemoryWorkspace,
    PreInstall,
    TopicChange,
    TxnResult,
    WorkspaceConfig,
)

__all__ = ["MemoryWorkspace", "PreInstall", "SourceMessage", "TopicChange", "TxnResult", "WorkspaceConfig"]
