"""``remember``: a standing instruction or fact the user states, kept in the resident block in their own words.

``scriptorium remember TEXT`` and the MCP tool ``memory_remember`` add one record to ``topics/core.md``
under ``# Standing instructions``, citing the text archived as a trusted source, through the same
transaction as every other change. A user-wide one (the default) goes into every session's resident block.
One for a project (``--project [DIR]``, the tool's ``project``) goes under ``## Project <name>`` and cites
a message of that project's own remembered-instructions session (its folder is the project's), so it
comes into that project's sessions only (:func:`scriptorium.recall.places.foreign_records`) and its
recall ranks as the project's. Removing one is removing its record (the page, ``memory update``).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from pathlib import Path

from scriptorium.changes.new_sources import (
    MAX_NEW_SOURCE_BYTES,
    NEW_SOURCE_PROVIDER,
    NewSource,
    Origin,
    archived_for_request,
)
from scriptorium.changes.structured import Citation, CreateRecord, Destination, update_records
from scriptorium.changes.update import update
from scriptorium.errors import InvalidArgument
from scriptorium.recall.places import PROJECT_KEY, place_of
from scriptorium.sessions import SessionStore
from scriptorium.workspace import MemoryWorkspace, TxnResult
from scriptorium.workspace.paths import CORE_SOURCE
from scriptorium.workspace.sources import SourceMessage, Trust, plain_markdown

STANDING_HEADING = "Standing instructions"
LABEL = "said"


def remember(
    workspace: MemoryWorkspace,
    text: str,
    *,
    project: Path | None = None,
    store: SessionStore | None = None,
    origin: Origin = "owner",
    now: datetime | None = None,
) -> TxnResult:
    """Add ``text`` to the resident block as a standing instruction: user-wide, or ``project``'s (a folder in
    it; ``store`` then records the project's remembered-instructions session). INVALID_ARGUMENT for empty or
    oversized text, or a project folder that is not an absolute path; nothing is written then."""
    said = " ".join(text.split())
    if not said or len(said.encode()) > MAX_NEW_SOURCE_BYTES:
        raise InvalidArgument(f"what to remember must be 1 to {MAX_NEW_SOURCE_BYTES} bytes of text")
    content = plain_markdown(said)
    when = now or datetime.now(UTC)
    day = when.date().isoformat()
    if project is None:
        change = CreateRecord(
            content, day, (Citation("new-source-1", LABEL),), Destination(CORE_SOURCE, (STANDING_HEADING,))
        )
        return update(
            workspace,
            message="remember: a standing instruction",
            memory_changes=[change],
            new_sources=[NewSource("new-source-1", said, "user")],
            origin=origin,
        )
    if not project.is_absolute():
        raise InvalidArgument(f"the project folder must be an absolute path, not {str(project)!r}")
    if store is None:
        raise InvalidArgument("a project's instruction needs the session store to place it")
    place = place_of(str(project))
    session = "remembered-" + hashlib.sha256(place.project.encode()).hexdigest()[:16]
    store.create_session(
        session,
        {
            "provider": NEW_SOURCE_PROVIDER,
            "cwd": place.root,
            PROJECT_KEY: place.project,
            "title": f"Remembered for {place.name}",
        },
        created_at=when,
    )
    stamp = when.isoformat(timespec="seconds").replace("+00:00", "Z")
    trust: Trust = "trusted" if origin == "owner" else "pending"  # as for every request's own sources
    message = SourceMessage(NEW_SOURCE_PROVIDER, session, uuid.uuid4().hex[:20], "user", stamp, said, trust=trust)
    change = CreateRecord(
        content,
        day,
        (Citation(message.identity, LABEL),),
        Destination(CORE_SOURCE, (STANDING_HEADING, f"Project {place.name}")),
    )
    with archived_for_request(workspace, [message]) as paths:
        return update_records(
            workspace, [change], message=f"remember: a standing instruction for {place.name}", appended_sources=paths
        )
