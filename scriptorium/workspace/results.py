"""The values the workspace takes and returns: settings, whole-topic changes, transaction results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from scriptorium.defaults import (
    DEFAULT_CORE_TOKEN_BUDGET,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_RECENT_LIMIT,
    DEFAULT_REPACK_LOOSE_OBJECTS,
    DEFAULT_WRITE_QUOTA_BYTES,
)
from scriptorium.errors import ReasonCode
from scriptorium.workspace.snapshot import Snapshot


class TextRedactor(Protocol):
    """What takes secrets out of text and names (:class:`scriptorium.redaction.Redactor`)."""

    def text(self, text: str) -> str: ...

    def name(self, value: str) -> str: ...


@dataclass(frozen=True, slots=True)
class WorkspaceConfig:
    """Settings a composition root passes to the workspace."""

    recent_limit: int = DEFAULT_RECENT_LIMIT
    core_budget: int = DEFAULT_CORE_TOKEN_BUDGET
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S
    write_quota_bytes: int = DEFAULT_WRITE_QUOTA_BYTES
    """Bytes a ``write`` token's requester may commit per day; 0: no quota (:mod:`scriptorium.access.quota`)."""
    repack_loose_objects: int = DEFAULT_REPACK_LOOSE_OBJECTS
    """Loose git objects past which an install starts a background repack; 0: never (:mod:`.packing`)."""
    redactor: TextRedactor | None = None
    """What every installed byte passes first — staged topics and their paths, archived sources, commit
    messages — whichever route brought them (None: stored verbatim)."""


@dataclass(frozen=True, slots=True)
class TopicChange:
    """A whole-topic change: create or replace a topic's content, or delete it."""

    path: str
    action: Literal["create", "update", "delete"]
    content: str | None = None


@dataclass(frozen=True, slots=True)
class PreInstall:
    """What the trusted pre-install callback is told about a validated transaction."""

    previous_revision: str
    revision: str
    changed_files: tuple[str, ...]
    baseline: Snapshot


@dataclass(frozen=True, slots=True)
class TxnResult:
    """The outcome of a transaction that passed validation."""

    revision: str
    previous_revision: str
    changed_files: tuple[str, ...]
    created_ids: tuple[str, ...] = ()
    created_evidence_ids: tuple[str, ...] = ()
    memory_committed: bool = False
    git_committed: bool = False
    commit: str | None = None
    core_omitted_ids: tuple[str, ...] = ()
    reason: ReasonCode | None = None
    message: str = ""
    dry_run: bool = False
    """Validated only: nothing was installed, and ``revision`` is the baseline's."""
    diff: str = ""
    """For a dry run: the unified diff the change would make to the topic files."""
    sources_added: int = 0
    """Sources the commit holds that its parent did not (a conversation file, in ``changed_files``, holds many)."""

    @property
    def changed(self) -> bool:
        return bool(self.changed_files)

    def to_dict(self) -> dict[str, object]:
        return {
            "revision": self.revision,
            "previous_revision": self.previous_revision,
            "changed_files": list(self.changed_files),
            "created_ids": list(self.created_ids),
            "created_evidence_ids": list(self.created_evidence_ids),
            "memory_committed": self.memory_committed,
            "git_committed": self.git_committed,
            "commit": self.commit,
            "core_omitted_ids": list(self.core_omitted_ids),
            "reason": str(self.reason) if self.reason else None,
            "message": self.message,
            **({"dry_run": True, "diff": self.diff} if self.dry_run else {}),
        }
