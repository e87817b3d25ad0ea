"""Bus payloads: what runtimes publish and what workers answer (pydantic v2, JSON only).

Events carry IDs, never message bodies: workers reread session storage.
Every model has ``schema_version``; unknown fields are refused, so a payload
that does not validate never reaches a write pass.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from scriptorium.errors import InvalidArgument

SCHEMA_VERSION: Literal[1] = 1
MAX_PAYLOAD_BYTES = 16 * 1024
"""An event is a few IDs; anything larger is malformed or hostile."""

Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$")]

TASK_FOR_EVENT = {
    "turn.ended": "scriptorium.write",
    "session.idle": "scriptorium.write",
    "session.head_moved": "scriptorium.write",
    "memory.reorganize": "scriptorium.reorganize",
    "memory.backfill": "scriptorium.backfill",
}
"""The Celery task that consumes each event type: part of the bus contract, shared by the publishers
(:mod:`scriptorium.producers.publisher`) and the workers (:mod:`scriptorium.workers.tasks`)."""


def _now() -> datetime:
    return datetime.now(UTC)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str = Field(default_factory=lambda: uuid.uuid4().hex, min_length=1, max_length=100)
    workspace: Name
    occurred_at: datetime = Field(default_factory=_now)


class TurnEnded(_Model):
    """A turn ended: write if enough content is pending (``force=False``)."""

    type: Literal["turn.ended"] = "turn.ended"
    session_id: Name


class SessionIdle(_Model):
    """A session went idle: write everything that remains (``force=True``)."""

    type: Literal["session.idle"] = "session.idle"
    session_id: Name


class HeadMoved(_Model):
    """The head moved to another branch (a rewind, a re-ask, a jump in the tree): write the branch it left
    now, completely (``force=True``), instead of waiting for the session to go idle.

    ``left`` is the tip the head was at; without it, every branch tip off the new head's path is written.
    """

    type: Literal["session.head_moved"] = "session.head_moved"
    session_id: Name
    left: Name | None = None
    head: Name | None = None


class ReorganizeRequested(_Model):
    """Organize a workspace's topics (the nightly job, or on demand)."""

    type: Literal["memory.reorganize"] = "memory.reorganize"


class BackfillRequested(_Model):
    """Write archived sources no topic cites yet."""

    type: Literal["memory.backfill"] = "memory.backfill"


AnyEvent = TurnEnded | SessionIdle | HeadMoved | ReorganizeRequested | BackfillRequested
Event = Annotated[AnyEvent, Field(discriminator="type")]
_EVENT = TypeAdapter(Event)


class IngestEnded(BaseModel):
    """``memory.ingest_ended``: the outcome of one write task, on the result stream."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["memory.ingest_ended"] = "memory.ingest_ended"
    result_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    event_id: str | None = None
    event_type: str | None = None
    workspace: str
    session_id: str | None = None
    ok: bool
    outcome: Literal["written", "nothing_due", "pending", "failed"]
    reason: str | None = None
    retryable: bool = False
    message: str = ""
    revision: str | None = None
    changed_files: list[str] = Field(default_factory=list)
    pending_count: int = 0
    nodes_written: int = 0
    attempts: int = 1
    timings_ms: dict[str, float] = Field(default_factory=dict)
    finished_at: datetime = Field(default_factory=_now)


def parse_event(payload: Any) -> AnyEvent:
    """Validate a bus payload (a JSON string, bytes or a decoded object).

    Raises InvalidArgument with the validation errors; nothing else is accepted.
    """
    if isinstance(payload, bytes | str):
        if len(payload) > MAX_PAYLOAD_BYTES:
            raise InvalidArgument(f"event payload is {len(payload)} bytes; the limit is {MAX_PAYLOAD_BYTES}")
        try:
            payload = json.loads(payload)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"event payload is not JSON: {exc}") from exc
    elif len(json.dumps(payload, default=str)) > MAX_PAYLOAD_BYTES:
        raise InvalidArgument(f"event payload exceeds {MAX_PAYLOAD_BYTES} bytes")
    try:
        return _EVENT.validate_python(payload)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors())
        raise InvalidArgument(f"invalid event: {details}") from exc


def json_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema of every bus payload, for non-Python runtimes."""
    return {
        "event.schema.json": _EVENT.json_schema(),
        "ingest_ended.schema.json": IngestEnded.model_json_schema(),
    }
