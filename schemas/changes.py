"""Request bodies of the modification interface (model tools, REST, ``scriptorium memory update``).

Pydantic validates at the edge and converts to the core's dataclasses. A body
carries exactly one of ``memory_changes``, ``changes`` or ``patch``. Callers
can never submit provenance, trust state or owner identity: unknown fields
are refused.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from scriptorium.changes.new_sources import MAX_NEW_SOURCE_BYTES, NewSource
from scriptorium.changes.structured import (
    Change,
    Citation,
    CreateRecord,
    DeleteRecord,
    Destination,
    MoveRecords,
    UpdateRecord,
)
from scriptorium.errors import InvalidArgument
from scriptorium.workspace import TopicChange


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceIn(_Strict):
    source: str = Field(min_length=1, description="An archived source, provider/thread/message.")
    label: str = Field(min_length=1, description="A short, context-relevant keyword shown as the citation.")


class DestinationIn(_Strict):
    topic_path: str
    headings: list[str] = Field(default_factory=list)
    position: Literal["start", "end", "before", "after"] = "end"
    anchor_memory_id: str | None = None

    def core(self) -> Destination:
        return Destination(self.topic_path, tuple(self.headings), self.position, self.anchor_memory_id)


class _WithSources(_Strict):
    sources: list[SourceIn] = Field(default_factory=list)
    source_refs: list[str] | None = Field(
        default=None, description="Deprecated: plain source IDs; each string is also its label."
    )

    def citations(self) -> tuple[Citation, ...]:
        cites = [Citation(s.source, s.label) for s in self.sources]
        cites += [Citation(ref, ref) for ref in self.source_refs or []]
        return tuple(cites)


class CreateRecordIn(_WithSources):
    op: Literal["create_record"]
    content: str
    time: str | None = Field(description="YYYY, YYYY-MM, YYYY-MM-DD, 'undated' or null")
    destination: DestinationIn

    def core(self) -> Change:
        return CreateRecord(self.content, self.time, self.citations(), self.destination.core())


class UpdateRecordIn(_WithSources):
    op: Literal["update_record"]
    memory_id: str
    content: str
    time: str | None

    def core(self) -> Change:
        return UpdateRecord(self.memory_id, self.content, self.time, self.citations())


class DeleteRecordIn(_Strict):
    op: Literal["delete_record"]
    memory_id: str

    def core(self) -> Change:
        return DeleteRecord(self.memory_id)


class MoveRecordsIn(_Strict):
    op: Literal["move_records"]
    memory_ids: list[str] = Field(min_length=1)
    destination: DestinationIn

    def core(self) -> Change:
        return MoveRecords(tuple(self.memory_ids), self.destination.core())


ChangeIn = Annotated[CreateRecordIn | UpdateRecordIn | DeleteRecordIn | MoveRecordsIn, Field(discriminator="op")]


class TopicChangeIn(_Strict):
    path: str
    action: Literal["create", "update", "delete"]
    content: str | None = None

    def core(self) -> TopicChange:
        return TopicChange(self.path, self.action, self.content)


class NewSourceIn(_Strict):
    """Evidence sent with the request; cited as its ``id`` until the runtime archives it.

    Where it came from and whether it is trusted are decided by the runtime from the entry point.
    """

    id: str = Field(pattern=r"^new-source-[A-Za-z0-9_-]{1,64}$", description="e.g. new-source-1")
    text: str = Field(min_length=1, max_length=MAX_NEW_SOURCE_BYTES)
    role: Literal["note", "user", "assistant"] = "note"

    def core(self) -> NewSource:
        return NewSource(self.id, self.text, self.role)


MAX_OPERATIONS = 1000
"""Record operations in one request (a preview of 20,000 cost 13 s of CPU)."""


class UpdateRequest(_Strict):
    """``POST /api/memory/changes`` and ``memory_update``: exactly one format."""

    memory_changes: list[ChangeIn] | None = Field(default=None, max_length=MAX_OPERATIONS)
    new_sources: list[NewSourceIn] = Field(default_factory=list, max_length=100)
    changes: list[TopicChangeIn] | None = None
    patch: str | None = None
    message: str = "Update memory"
    expected_revision: str | None = None
    dry_run: bool = Field(default=False, description="Validate only: return what would change, install nothing.")

    @model_validator(mode="after")
    def _one_format(self) -> UpdateRequest:
        given = [n for n in ("memory_changes", "changes", "patch") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of memory_changes, changes, patch (got {', '.join(given) or 'none'})")
        return self

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``MemoryWorkspace.update``."""
        return {
            "message": self.message,
            "expected_revision": self.expected_revision,
            "memory_changes": [c.core() for c in self.memory_changes] if self.memory_changes is not None else None,
            "changes": [c.core() for c in self.changes] if self.changes is not None else None,
            "patch": self.patch,
            "new_sources": [n.core() for n in self.new_sources],
            "dry_run": self.dry_run,
        }


def parse_update(payload: Any) -> UpdateRequest:
    """Validate a request body; raises InvalidArgument listing what is wrong."""
    try:
        if isinstance(payload, str | bytes):
            return UpdateRequest.model_validate_json(payload)
        return UpdateRequest.model_validate(payload)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(body)'}: {e['msg']}" for e in exc.errors())
        raise InvalidArgument(f"invalid update request: {details}") from exc


class ForgetRequest(_Strict):
    """``POST /api/memory/forget``: one conversation (``thread`` or ``session``) or some ``sources``."""

    thread: str | None = Field(default=None, description="provider/thread")
    session: str | None = None
    sources: list[str] = Field(default_factory=list, max_length=10_000, description="provider/thread/message")
    why: str = Field(
        default="", max_length=500, description="Kept in the tombstone and the commit; never quote the text."
    )
    dry_run: bool = False
    purge_history: bool = False
    memory_changes: list[ChangeIn] = Field(
        default_factory=list, description="Changes applied in the same transaction (the links to deleted records)."
    )

    @model_validator(mode="after")
    def _one_selection(self) -> ForgetRequest:
        given = [n for n in ("thread", "session", "sources") if getattr(self, n)]
        if len(given) != 1:
            raise ValueError(f"name one of thread, session, sources (got {', '.join(given) or 'none'})")
        return self


class Rejection(_Strict):
    """``POST /api/memory/proposals/{id}/reject``: the owner's note."""

    why: str = Field(default="", max_length=2000, description="The owner's note (kept with the proposal).")


class CoreSave(_Strict):
    """``PUT /api/memory/core``: a compare-and-set save of ``topics/core.md``."""

    content: str
    expected_revision: str
