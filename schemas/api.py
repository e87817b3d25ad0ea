"""The answers of the REST API (``scriptorium serve``): what ``/openapi.json`` says each route returns.

One model per JSON answer, the owner's memory API and the runtime routes alike, and :class:`ErrorBody`
for every refusal (:func:`scriptorium.errors.error_body` builds it). The models describe what the core
returns and change none of it: every answer keeps the keys it has and nothing else (``extra="allow"``,
served with ``response_model_exclude_unset``), so a field a model lists as optional is in the JSON only
when the core put it there, and an open-ended part (a hook's answer, a forget's derived state) stays
open. Types are the JSON's own: no date or number is parsed into something that serializes differently.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from scriptorium.errors import ReasonCode


class _Answer(BaseModel):
    """An answer: the keys listed are always there (those with a default, only in some answers); any other
    key the core adds is kept as it is."""

    model_config = ConfigDict(extra="allow")


class ErrorBody(_Answer):
    """A refusal, whatever refused it: a route's error, a request that fails its schema, a body refused
    before it was read, a missing or foreign token."""

    reason: ReasonCode = Field(description="Why, as a stable code.")
    retryable: bool = Field(description="Whether the same request may succeed later (then with Retry-After).")
    message: str
    guidance: str = Field(description="How to repair the request ('' when there is nothing to say).")
    rejected_text: str = Field(description="The text a validation refused ('' for none).")
    path: str = Field(description="The topic or source the refusal is about ('' for none).")
    detail: list[dict[str, Any]] | str | None = Field(
        default=None,
        description="A request that failed its schema: every error found (FastAPI's list). A token refused: "
        "the refusal's message, as FastAPI's own answers said it.",
    )


# -- changes ---------------------------------------------------------------------------------------


class TransactionResult(_Answer):
    """An applied (or, with ``dry_run``, validated) change: the revisions, what changed, the created IDs."""

    revision: str
    previous_revision: str
    changed_files: list[str]
    created_ids: list[str]
    created_evidence_ids: list[str]
    memory_committed: bool
    git_committed: bool
    commit: str | None
    core_omitted_ids: list[str]
    reason: str | None
    message: str
    dry_run: bool = Field(default=False, description="Only with a dry run: true.")
    diff: str = Field(default="", description="Only with a dry run: the unified diff the change would make.")


class Proposal(_Answer):
    """A proposal as the caller sees it: its requester sees these keys; the owner, the whole proposal."""

    id: str
    state: Literal["held", "approved", "rejected", "stale"]
    created: str
    decided: str | None
    baseline_revision: str
    request: dict[str, Any] = Field(description="The request body as sent.")
    dry_run: dict[str, Any] = Field(description="The dry run's result at the baseline revision.")
    refusal: dict[str, Any] | None = Field(description="Why the last approval was refused (a stale proposal).")
    requester: str | None = Field(default=None, description="The owner's view only.")
    token_id: str | None = Field(default=None, description="The owner's view only.")
    scope: str = Field(default="", description="The owner's view only.")
    review_diff: str = Field(default="", description="The owner's view only: the diff whole.")
    decided_by: str | None = Field(default=None, description="The owner's view only.")
    result: dict[str, Any] | None = Field(default=None, description="The owner's view only: the approval's result.")
    why: str = Field(default="", description="The owner's view only: the note with a rejection.")
    history: list[dict[str, str]] = Field(default_factory=list, description="The owner's view only.")
    token_revoked: bool = Field(default=False, description="The owner's listing only.")


class HeldProposal(Proposal):
    """A propose token's change: held, with its dry run, until the owner decides."""

    held: bool


class ProposalList(_Answer):
    proposals: list[Proposal]


class ForgetResult(_Answer):
    """What a forget removed (or, with ``dry_run``, would remove)."""

    dry_run: bool
    sources: list[str]
    paths: list[str]
    already_forgotten: list[str]
    deleted: list[str]
    deleted_shared: list[dict[str, Any]]
    unlinked: list[str]
    transaction: TransactionResult
    proposals_erased: Any = Field(default=None, description="Only with a dry run: the proposals it would erase.")
    derived: dict[str, Any] | None = Field(default=None, description="What else was erased (not with a dry run).")
    purge: dict[str, Any] | None = Field(default=None, description="Only with purge_history: the rewrite.")


# -- reads -----------------------------------------------------------------------------------------


class CitedSource(_Answer):
    source: str
    label: str


class Record(_Answer):
    """One record: its IDs, place, time, content and sources (and, with a session store, its branch)."""

    memory_id: str
    block_ids: list[str]
    topic_path: str
    headings: list[str]
    time: str | None
    content: str
    sources: list[CitedSource]
    branch: str | None
    origins: list[dict[str, str]]
    projects: list[str] = Field(default_factory=list, description="The projects its sessions ran in, by name.")
    git_branches: list[str] = Field(default_factory=list, description="The git branches its turns were said on.")
    revision: str
    audience: list[str] | None = Field(default=None, description="The requesters it belongs to; null: shared.")


class ArchivedSource(_Answer):
    source: str
    provider: str
    session: str
    message: str
    role: str
    time: str
    trust: str
    origin: dict[str, Any] | None
    path: str


class Commit(_Answer):
    commit: str
    at: str
    message: str


class ProvenanceTrail(_Answer):
    sources: list[ArchivedSource]
    introduced: Commit | None
    last_changed: Commit | None
    changes: int


class RecordProvenance(Record):
    """The record, each source it cites as archived, and the commits that introduced and last changed it."""

    provenance: ProvenanceTrail


class ConversationSource(_Answer):
    source: str
    message: str
    role: str
    time: str
    trust: str
    path: str
    cited_by: list[str]


class ConversationSources(_Answer):
    thread: str | None
    session: str | None
    revision: str
    sources: list[ConversationSource]


class TopicList(_Answer):
    revision: str
    topics: list[str]


class Topic(_Answer):
    path: str
    content: str
    revision: str


class CoreView(_Answer):
    """The authoritative source, the rendered block and the effective injection, as one snapshot."""

    revision: str
    content: str
    size: int
    mtime: float | None
    rendered: str
    inject: bool
    effective: str
    tokens: int
    budget: int
    omitted_ids: list[str]


# -- search and status -----------------------------------------------------------------------------


class SearchHit(_Answer):
    memory_id: str
    topic: str
    headings: list[str]
    date: str | None
    snippet: str
    score: float
    trust: str
    branch: str | None
    audience: list[str] | None
    superseded_by: str | None = None
    """The memory ID of the newer record that says it supersedes this one (:mod:`scriptorium.recall.current`)."""


class SearchResults(_Answer):
    query: str
    revision: str
    results: list[SearchHit]


class Status(_Answer):
    revision: str
    topics: int
    records: int
    recent_passes: list[dict[str, Any]]
    failures: list[dict[str, Any]]


# -- the runtime routes ----------------------------------------------------------------------------


class EventAccepted(_Answer):
    task_id: str
    event_id: str
    duplicate: bool
    mode: Literal["cluster", "embedded"]


class NodesAdded(_Answer):
    session_id: str
    added: int
    head: str | None
    branch_left: str | None


class RuntimeCore(_Answer):
    revision: str
    inject: bool
    effective: str


class HookAnswer(_Answer):
    """What the runtime's hook reads back (as ``scriptorium hook`` prints it): its fields are the runtime's
    hook protocol's ({} when the hook has nothing to say)."""
