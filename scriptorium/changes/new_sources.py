"""Request-level evidence: ``new-source-*`` entries become archived sources first, so records cite them.

A request may cite evidence that is not archived yet. The runtime gives each
entry a source ID of its own (``scriptorium/<origin>/<id>``), archives it —
trusted when the owner sent it, pending when a model did; callers never set
provenance or trust — rewrites the citations, and takes the files back if the
transaction is refused.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

from scriptorium.changes.structured import Change, Citation, CreateRecord, UpdateRecord
from scriptorium.errors import InvalidArgument
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.sources import SourceMessage

_NEW_SOURCE_KEY = re.compile(r"^new-source-[A-Za-z0-9_-]{1,64}$")
NEW_SOURCE_PROVIDER = "scriptorium"
NEW_SOURCE_ROLES = ("note", "user", "assistant")
MAX_NEW_SOURCE_BYTES = 64 * 1024
Origin = Literal["owner", "model"]


@dataclass(frozen=True, slots=True)
class NewSource:
    """Evidence supplied with a request, cited as ``key`` until the runtime gives it a source ID."""

    key: str
    text: str
    role: str = "note"


def resolve_new_sources(
    changes: Sequence[Change], new_sources: Sequence[NewSource], origin: Origin, audience: str | None = None
) -> tuple[list[Change], list[SourceMessage]]:
    """Give each declared ``new-source-*`` a runtime source ID (belonging to ``audience``) and rewrite the
    citations to it."""
    declared: dict[str, SourceMessage] = {}
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    for entry in new_sources:
        if not _NEW_SOURCE_KEY.match(entry.key):
            raise InvalidArgument(f"new source key {entry.key!r} must look like new-source-<letters, digits, - or _>")
        if entry.key in declared:
            raise InvalidArgument(f"new source {entry.key} is declared twice")
        if not entry.text.strip() or len(entry.text.encode()) > MAX_NEW_SOURCE_BYTES:
            raise InvalidArgument(f"new source {entry.key} needs text of 1 to {MAX_NEW_SOURCE_BYTES} bytes")
        if entry.role not in NEW_SOURCE_ROLES:
            raise InvalidArgument(f"new source {entry.key}: role must be one of {', '.join(NEW_SOURCE_ROLES)}")
        # Provenance and trust come from the entry point, never from the caller.
        declared[entry.key] = SourceMessage(
            NEW_SOURCE_PROVIDER,
            origin,
            uuid.uuid4().hex[:20],
            entry.role,
            now,
            entry.text,
            trust="trusted" if origin == "owner" else "pending",
            audience=audience,
        )
    used: set[str] = set()

    def swap(sources: tuple[Citation, ...]) -> tuple[Citation, ...]:
        out = []
        for cite in sources:
            if cite.source in declared:
                used.add(cite.source)
                cite = Citation(declared[cite.source].identity, cite.label)
            out.append(cite)
        return tuple(out)

    resolved: list[Change] = [
        replace(c, sources=swap(c.sources)) if isinstance(c, CreateRecord | UpdateRecord) else c for c in changes
    ]
    unused = sorted(set(declared) - used)
    if unused:
        raise InvalidArgument(f"new sources declared but never cited: {', '.join(unused)}")
    return resolved, [declared[key] for key in declared]


@contextmanager
def archived_for_request(
    workspace: MemoryWorkspace, messages: Sequence[SourceMessage], keep: bool = True
) -> Iterator[list[str]]:
    """Archive ``messages``; if the body raises (or ``keep`` is false: a dry run), remove them again (fresh
    IDs: nothing else cites them)."""
    if not messages:
        yield []
        return
    with workspace.lock():
        paths = workspace.archive.archive(messages)
    try:
        yield paths
    except BaseException:
        _take_back(workspace, paths)
        raise
    if not keep:
        _take_back(workspace, paths)


def _take_back(workspace: MemoryWorkspace, paths: Sequence[str]) -> None:
    with workspace.lock():
        workspace.archive.take_back(paths)
