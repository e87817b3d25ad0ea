"""Reason codes and the exception tree shared by the whole project.

Every failure a caller can see carries one :class:`ReasonCode`. The codes are a
closed, stable enum: deprecate, never rename. Each code says whether retrying
the same input can help (``retryable``).

Exception tree::

    ScriptoriumError                 (reason, message, guidance, rejected_text)
    ├── TransientError               retry may help
    │   ├── LockHeld                 LOCK_HELD
    │   ├── GitCommitFailed          GIT_COMMIT_FAILED
    │   ├── RevisionConflict         REVISION_CONFLICT
    │   ├── PreInstallFailed         PRE_INSTALL_FAILED
    │   ├── InstallFailed            INSTALL_FAILED
    │   ├── LockLost                 LOCK_LOST (fencing: a newer writer holds the workspace)
    │   ├── RedisUnavailable         REDIS_UNAVAILABLE
    │   ├── VectorBackendUnavailable VECTOR_BACKEND_UNAVAILABLE (embedding search not installed or failing)
    │   ├── RateLimited              RATE_LIMITED (this client, or the server, takes no more now: wait)
    │   ├── RequestTimeout           REQUEST_TIMEOUT (a request's head or body did not arrive in time)
    │   ├── WriterUnavailable        MODEL_UNREACHABLE, WRITER_START_FAILED, WRITER_TIMEOUT
    │   └── BudgetSpent              WRITER_BUDGET_SPENT (the costly writer's daily budget is spent: wait)
    └── PermanentError               the same input fails the same way
        ├── ValidationRejected       INVALID_TOPIC_FORMAT, BLOCK_ID_LOST, DANGLING_LINK,
        │                            INVALID_SOURCE, SOURCES_MODIFIED
        ├── InvalidPath              INVALID_PATH
        ├── InvalidArgument          INVALID_ARGUMENT
        ├── InvalidPatch             INVALID_PATCH
        ├── NotFound                 NOT_FOUND
        ├── Unauthorized             UNAUTHORIZED (no token, where one is required)
        ├── Forbidden                FORBIDDEN (outside the caller's scope or audience)
        ├── ProposalClosed           PROPOSAL_CLOSED, REQUESTER_REVOKED (a proposal that cannot be decided so)
        ├── QuotaExceeded            QUOTA_EXCEEDED, PAYLOAD_TOO_LARGE (a requester's open proposals, or one too big)
        ├── WriterFailed             WRITER_FAILED (the writer misbehaved; retrying will not help)
        ├── SchemaTooNew             SCHEMA_TOO_NEW (a store or file a newer release wrote: upgrade to read it)
        ├── RuntimeUnready           RUNTIME_MISSING, RUNTIME_TOO_OLD (setup's runtime: install or upgrade it)
        └── WorkspaceMissing         WORKSPACE_NOT_INITIALIZED
"""

from __future__ import annotations

from enum import StrEnum


class ReasonCode(StrEnum):
    """Why an operation did not (fully) succeed; stable across releases."""

    INVALID_TOPIC_FORMAT = "INVALID_TOPIC_FORMAT"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    INVALID_PATH = "INVALID_PATH"
    COMMIT_REJECTED = "COMMIT_REJECTED"
    INVALID_SOURCE = "INVALID_SOURCE"
    SOURCES_MODIFIED = "SOURCES_MODIFIED"
    BLOCK_ID_LOST = "BLOCK_ID_LOST"
    DANGLING_LINK = "DANGLING_LINK"
    INVALID_PATCH = "INVALID_PATCH"
    NOT_FOUND = "NOT_FOUND"
    WORKSPACE_NOT_INITIALIZED = "WORKSPACE_NOT_INITIALIZED"
    LOCK_HELD = "LOCK_HELD"
    REVISION_CONFLICT = "REVISION_CONFLICT"
    PRE_INSTALL_FAILED = "PRE_INSTALL_FAILED"
    INSTALL_FAILED = "INSTALL_FAILED"
    GIT_COMMIT_FAILED = "GIT_COMMIT_FAILED"
    MODEL_UNREACHABLE = "MODEL_UNREACHABLE"
    WRITER_START_FAILED = "WRITER_START_FAILED"
    WRITER_TIMEOUT = "WRITER_TIMEOUT"
    WRITER_FAILED = "WRITER_FAILED"
    NO_SESSION_ID = "NO_SESSION_ID"
    UNCLASSIFIED_ERROR = "UNCLASSIFIED_ERROR"
    LOCK_LOST = "LOCK_LOST"
    REDIS_UNAVAILABLE = "REDIS_UNAVAILABLE"
    WORKER_LOST = "WORKER_LOST"
    VECTOR_BACKEND_UNAVAILABLE = "VECTOR_BACKEND_UNAVAILABLE"
    BRANCHES_MERGED = "BRANCHES_MERGED"
    FORBIDDEN = "FORBIDDEN"
    PROPOSAL_CLOSED = "PROPOSAL_CLOSED"
    REQUESTER_REVOKED = "REQUESTER_REVOKED"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    MOVE_FAILED = "MOVE_FAILED"
    RATE_LIMITED = "RATE_LIMITED"
    REQUEST_TIMEOUT = "REQUEST_TIMEOUT"
    SCHEMA_TOO_NEW = "SCHEMA_TOO_NEW"
    RUNTIME_MISSING = "RUNTIME_MISSING"
    RUNTIME_TOO_OLD = "RUNTIME_TOO_OLD"
    UNAUTHORIZED = "UNAUTHORIZED"
    WRITER_BUDGET_SPENT = "WRITER_BUDGET_SPENT"

    @property
    def retryable(self) -> bool:
        """True when the same input may succeed on a later attempt."""
        return self in _RETRYABLE


_RETRYABLE = frozenset(
    {
        ReasonCode.LOCK_HELD,
        ReasonCode.REVISION_CONFLICT,
        ReasonCode.PRE_INSTALL_FAILED,
        ReasonCode.INSTALL_FAILED,
        ReasonCode.GIT_COMMIT_FAILED,
        ReasonCode.MODEL_UNREACHABLE,
        ReasonCode.WRITER_START_FAILED,
        ReasonCode.WRITER_TIMEOUT,
        ReasonCode.LOCK_LOST,
        ReasonCode.REDIS_UNAVAILABLE,
        ReasonCode.VECTOR_BACKEND_UNAVAILABLE,
        ReasonCode.MOVE_FAILED,
        ReasonCode.RATE_LIMITED,
        ReasonCode.REQUEST_TIMEOUT,
        ReasonCode.WRITER_BUDGET_SPENT,
    }
)


class ScriptoriumError(Exception):
    """Root of every error the project raises on purpose."""

    default_reason: ReasonCode = ReasonCode.INVALID_ARGUMENT

    def __init__(
        self,
        message: str,
        *,
        reason: ReasonCode | None = None,
        guidance: str = "",
        rejected_text: str = "",
        path: str = "",
        quotes: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or self.default_reason
        self.guidance = guidance
        self.rejected_text = rejected_text
        self.path = path
        self.quotes = quotes
        """The records (memory IDs) whose text or topic the error quotes, besides the change's own: a
        requester's refusal never quotes one it may not see (:mod:`scriptorium.access.guard`)."""

    @property
    def retryable(self) -> bool:
        return self.reason.retryable

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready description for CLIs, APIs and writer repair prompts (:func:`error_body`)."""
        return error_body(self)

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


def error_body(error: ScriptoriumError, **more: object) -> dict[str, object]:
    """The reason-code body, the one JSON shape of every refusal: the CLI's ``--json``, the API's error
    answers (a route's error, a request that fails its schema, a body refused before it is read, a missing
    token), the MCP route's refusals. ``more`` adds what one kind of refusal carries besides (a validation
    error's ``detail``); it never replaces the six fields every body has."""
    body: dict[str, object] = {
        "reason": str(error.reason),
        "retryable": error.retryable,
        "message": error.message,
        "guidance": error.guidance,
        "rejected_text": error.rejected_text,
        "path": error.path,
    }
    return {**body, **{key: value for key, value in more.items() if key not in body}}


class TransientError(ScriptoriumError):
    """A failure the same input may not meet next time."""


class PermanentError(ScriptoriumError):
    """A failure the same input will meet again."""


class LockHeld(TransientError):
    default_reason = ReasonCode.LOCK_HELD


class GitCommitFailed(TransientError):
    default_reason = ReasonCode.GIT_COMMIT_FAILED


class RevisionConflict(TransientError):
    default_reason = ReasonCode.REVISION_CONFLICT


class PreInstallFailed(TransientError):
    default_reason = ReasonCode.PRE_INSTALL_FAILED


class InstallFailed(TransientError):
    default_reason = ReasonCode.INSTALL_FAILED


class LockLost(TransientError):
    default_reason = ReasonCode.LOCK_LOST


class RedisUnavailable(TransientError):
    default_reason = ReasonCode.REDIS_UNAVAILABLE


class VectorBackendUnavailable(TransientError):
    default_reason = ReasonCode.VECTOR_BACKEND_UNAVAILABLE


class RateLimited(TransientError):
    """Too many attempts (sign-ins) or connections from one client, or the server's connections are all
    taken: the same request succeeds later (the answer's ``Retry-After`` says when)."""

    default_reason = ReasonCode.RATE_LIMITED


class RequestTimeout(TransientError):
    """A request's head or body was not received within the server's deadline (a slow or stalled sender)."""

    default_reason = ReasonCode.REQUEST_TIMEOUT


class WriterUnavailable(TransientError):
    default_reason = ReasonCode.MODEL_UNREACHABLE


class BudgetSpent(TransientError):
    """The day's budget of a writer that costs money (its runs, or the tokens its model reported) is spent:
    the pass waits, its turns stay pending, and it is retried; the next UTC day, or a raised budget, lets it
    run (:mod:`scriptorium.writing.budget`)."""

    default_reason = ReasonCode.WRITER_BUDGET_SPENT


class WriterFailed(PermanentError):
    default_reason = ReasonCode.WRITER_FAILED


class SchemaTooNew(PermanentError):
    """A store or file says a schema version newer than this code knows: a newer release wrote it, and
    reading it as an older layout could lose what the newer one keeps. Nothing is read or changed."""

    default_reason = ReasonCode.SCHEMA_TOO_NEW


class RuntimeUnready(PermanentError):
    """The runtime ``scriptorium setup`` would write settings for is not there (no command on ``PATH``, or
    one that does not answer ``--version``: RUNTIME_MISSING) or is older than what those settings need
    (RUNTIME_TOO_OLD). Nothing is written; the guidance names the install or upgrade command."""

    default_reason = ReasonCode.RUNTIME_MISSING


class ValidationRejected(PermanentError):
    default_reason = ReasonCode.INVALID_TOPIC_FORMAT


class InvalidPath(PermanentError):
    default_reason = ReasonCode.INVALID_PATH


class InvalidArgument(PermanentError):
    default_reason = ReasonCode.INVALID_ARGUMENT


class InvalidPatch(PermanentError):
    default_reason = ReasonCode.INVALID_PATCH


class NotFound(PermanentError):
    default_reason = ReasonCode.NOT_FOUND


class Unauthorized(PermanentError):
    """A request that names nobody: no token (or no usable one) where a route requires one."""

    default_reason = ReasonCode.UNAUTHORIZED


class Forbidden(PermanentError):
    """The caller may see the thing but not do this to it (a record shared with others, a format only the
    owner sends, an audience that is not its own)."""

    default_reason = ReasonCode.FORBIDDEN


class QuotaExceeded(PermanentError):
    """A requester holds as many open proposals as it may (or sends one too big to hold): the owner decides
    some first."""

    default_reason = ReasonCode.QUOTA_EXCEEDED


class ProposalClosed(PermanentError):
    """A proposal already decided, or whose requester's token was revoked, cannot be approved."""

    default_reason = ReasonCode.PROPOSAL_CLOSED


class WorkspaceMissing(PermanentError):
    default_reason = ReasonCode.WORKSPACE_NOT_INITIALIZED
