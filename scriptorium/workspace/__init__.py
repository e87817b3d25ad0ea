"""The memory workspace: cited topics, the source archive, derived views, git."""

from scriptorium.workspace.results import PreInstall, TopicChange, TxnResult, WorkspaceConfig
from scriptorium.workspace.sources import SourceMessage
from scriptorium.workspace.workspace import MemoryWorkspace

__all__ = ["MemoryWorkspace", "PreInstall", "SourceMessage", "TopicChange", "TxnResult", "WorkspaceConfig"]
