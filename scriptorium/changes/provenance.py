"""Provenance: where a record came from, and what a conversation left in the archive.

``scriptorium memory why MEMORY_ID`` and ``GET /api/memory/records/{id}/provenance`` answer with
:func:`provenance`; ``scriptorium memory sources`` and ``GET /api/memory/sources`` with
:func:`conversation_sources`. The history is git's: the commits on ``main`` that added or removed a line of
``topics/`` holding the record's ID (``git log -G``). A record's IDs close its last line, so its
writing, every rewrite of that line and every move between topics are found; an edit confined to an
earlier line of a multi-line record is not.
"""

from __future__ import annotations

import re
from typing import Any

from scriptorium.changes.read import record_payload
from scriptorium.errors import InvalidArgument, NotFound
from scriptorium.recall.branches import BranchView
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.blocks import BLOCK_ID
from scriptorium.workspace.paths import SOURCES, TOPICS, source_path

_BLOCK_ID = re.compile(BLOCK_ID)


def provenance(ws: MemoryWorkspace, memory_id: str, branches: BranchView | None = None) -> dict[str, Any]:
    """The record as ``memory get`` shows it, with ``provenance``: its sources (identity, session, message,
    role, time, trust, origin, archive path) and its history (the commit that introduced it, the one that
    last changed it, and how many changed it). NOT_FOUND for a record that is not installed."""
    snap = ws.snapshot()
    payload = record_payload(snap, memory_id, branches)
    record = snap.record(memory_id)
    if record is None:  # record_payload raised already; kept for the type checker
        raise NotFound(f"no record ^{memory_id}")
    sources = []
    for path in dict.fromkeys(snap.topics[record.topic].cited_paths(record)):
        archived = ws.archive.read(path)
        sources.append(
            {
                "source": archived.identity,
                "provider": archived.provider,
                "session": archived.thread,
                "message": archived.message,
                "role": archived.role,
                "time": archived.time,
                "trust": archived.trust,
                "origin": {archived.origin[0]: archived.origin[1]} if archived.origin else None,
                "path": path,
            }
        )
    assert _BLOCK_ID.fullmatch(memory_id), memory_id  # an installed record's ID: safe inside a pattern
    commits = [
        {"commit": commit, "at": at, "message": subject}
        for commit, at, subject in ws.git.commits_changing(rf"\^{memory_id}([^A-Za-z0-9_-]|$)", TOPICS)
    ]
    payload["provenance"] = {
        "sources": sources,
        "introduced": commits[-1] if commits else None,
        "last_changed": commits[0] if commits else None,
        "changes": len(commits),
    }
    return payload


def conversation_paths(ws: MemoryWorkspace, *, thread: str | None = None, session: str | None = None) -> list[str]:
    """The archive paths of one conversation's sources — ``thread`` as ``provider/thread``, or ``session``
    (its ID, under any provider). INVALID_ARGUMENT unless exactly one is given; NOT_FOUND when nothing was
    archived from it."""
    if (thread is None) == (session is None):
        raise InvalidArgument("name one conversation: a thread (provider/thread) or a session")
    if thread is not None:
        provider, slash, name = thread.partition("/")
        if not slash or not provider or not name:
            raise InvalidArgument(f"a thread is provider/thread, not {thread!r}")
        folders = [source_path(provider, name, "x").rsplit("/", 1)[0]]
    else:
        assert session is not None
        folder = "/".join(source_path("x", session, "x").split("/")[2:4])  # <shard>/<thread>
        archive = ws.root / SOURCES
        providers = sorted(p.name for p in archive.iterdir() if p.is_dir()) if archive.is_dir() else []
        folders = [f"{SOURCES}/{provider}/{folder}" for provider in providers]
    paths = sorted(
        [
            *(key for folder in folders for key in ws.archive.entries_of(f"{folder}.md")),  # layout 3
            *(  # layout 2: a file a message
                f"{folder}/{entry.name}"
                for folder in folders
                if (ws.root / folder).is_dir()
                for entry in (ws.root / folder).iterdir()
                if entry.name.endswith(".md") and not entry.name.startswith(".")
            ),
        ]
    )
    if not paths:
        raise NotFound(f"nothing archived from {thread or session!r}")
    return paths


def conversation_sources(
    ws: MemoryWorkspace, *, thread: str | None = None, session: str | None = None
) -> dict[str, Any]:
    """What was archived from one conversation — ``thread`` as ``provider/thread``, or ``session`` (its ID,
    under any provider) — each source with the records citing it, in the order the messages were said.
    INVALID_ARGUMENT unless exactly one is given; NOT_FOUND when nothing was archived from it."""
    paths = conversation_paths(ws, thread=thread, session=session)
    snap = ws.snapshot()
    citing: dict[str, list[str]] = {}
    # Only the topics citing the conversation (the snapshot's citation index), never every topic of the memory.
    for topic_path in snap.topics_citing({source.rsplit("/", 1)[0] for source in paths}):
        topic = snap.topics[topic_path]
        for record in topic.records:
            for cited in dict.fromkeys(topic.cited_paths(record)):
                citing.setdefault(cited, []).append(record.memory_id)
    listed = []
    for path in paths:
        archived = ws.archive.read(path)
        listed.append(
            {
                "source": archived.identity,
                "message": archived.message,
                "role": archived.role,
                "time": archived.time,
                "trust": archived.trust,
                "path": path,
                "cited_by": sorted(citing.get(path, [])),
            }
        )
    listed.sort(key=lambda item: (item["time"], item["message"]))
    return {"thread": thread, "session": session, "revision": snap.tree, "sources": listed}
