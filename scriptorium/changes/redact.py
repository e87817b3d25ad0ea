"""Secrets out of a memory stored before redaction: ``scriptorium memory redact [--dry-run] [--purge-history]``.

Conversations are redacted where they come in (:mod:`scriptorium.redaction`); this is for what came in
before (or what a pattern added since finds). One transaction, as a forget is:

* each archived source holding a secret is rewritten with the secret replaced by its placeholder — it keeps
  its identity, role, time, trust, origin and audience (besides promotion and a forget's tombstone, the one
  change a source file may see);
* each record holding one is updated to its redacted text (same citations, same date), and records under a
  heading holding one move under the redacted heading in the same topic;
* the views are rebuilt by the transaction itself.

Then what is derived follows, as after a forget: the recall index and its disk cache are rebuilt (its
vocabulary held the secrets) and the changed records' vectors dropped, the writer history's excerpts and
the proposals holding a secret are scrubbed (a proposal is erased: its body is a change someone sent), and
the session store's copy — every node's text and metadata and each session's own (its title) — is
rewritten and compacted, so the bytes leave its files. ``purge_history`` then rewrites git history
(:func:`scriptorium.workspace.purge.purge_secrets`). Nothing here prints a secret: the result names where
they were and how many, and the placeholders.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scriptorium.changes.forget import refresh_recall, rewritten_record
from scriptorium.changes.proposals import ProposalStore, erase_forgotten
from scriptorium.changes.structured import Change, Destination, MoveRecords, update_records
from scriptorium.logs import get_logger
from scriptorium.redaction import Redactor
from scriptorium.sessions import SessionStore
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.sources import SourceMessage
from scriptorium.workspace.topics import Record
from scriptorium.workspace.transaction import SourceRewrites
from scriptorium.workspace.writer_history import WriterHistory

log = get_logger(__name__)


def redact_memory(
    ws: MemoryWorkspace,
    redactor: Redactor,
    *,
    store: SessionStore | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Redact what ``ws`` (and ``store``) hold (see the module); with ``dry_run`` nothing changes and the
    result says what would."""
    snap = ws.snapshot()
    secrets: dict[str, str] = {}

    def clean(text: str) -> str:
        redacted, found = redactor.redact(text)
        secrets.update(found)
        return redacted

    redactions: dict[str, SourceMessage] = {}
    for path in sorted(ws.archive.keys(ws.git, snap.tree)):
        source = ws.archive.read(path)
        if source.forgotten is None and (text := clean(source.text)) != source.text:
            redactions[path] = replace(source, text=text)

    changes: list[Change] = []
    updated: list[Record] = []
    moves: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for path, topic in sorted(snap.topics.items()):
        for record in topic.records:
            current = rewritten_record(topic, record, set(), set())
            content = clean(current.content)
            if content != current.content:
                changes.append(replace(current, content=content))
                updated.append(record)
            headings = tuple(clean(heading) for heading in record.headings)
            if headings != record.headings:
                moves.setdefault((path, headings), []).extend(record.block_ids)
    changes += [MoveRecords(tuple(ids), Destination(path, headings)) for (path, headings), ids in moves.items()]
    named = sorted(path for path in snap.topics if clean(path) != path)

    payload: dict[str, Any] = {
        "dry_run": dry_run,
        "secrets": len(secrets),
        "placeholders": sorted(set(secrets.values())),
        "sources": sorted(redactions),
        "records": [record.memory_id for record in updated],
        "headings_moved": sum(len(ids) for ids in moves.values()),
        "topic_paths_with_secrets": named,
    }
    message = f"Redact secrets: {len(redactions)} source(s), {len(updated)} record(s)"
    if changes or redactions:
        rewrites = SourceRewrites.redact(redactions)
        if changes:
            result = update_records(ws, changes, message=message, dry_run=dry_run, rewrites=rewrites)
        else:
            result = ws.rewrite_sources(rewrites, message=message, dry_run=dry_run)
        payload["transaction"] = {k: v for k, v in result.to_dict().items() if k != "diff"}  # it quotes them
    sessions = _redact_store(store, redactor, secrets, dry_run) if store is not None else None
    erased = erase_forgotten(ProposalStore(ws.root), list(secrets), dry_run=dry_run) if secrets else 0
    payload["replacements"] = secrets  # for a purge of history; the caller drops it before printing
    if dry_run:
        payload["derived"] = {"proposals_erased": erased, "store": sessions}
        return payload
    payload["derived"] = {
        "proposals_erased": erased,
        "recall": refresh_recall(ws) if changes or redactions else None,
        "history_entries_redacted": WriterHistory(ws.root / ".scriptorium").redact(secrets),
        "store": sessions,
    }
    log.info("memory.redacted", sources=len(redactions), records=len(updated), secrets=len(secrets))
    return payload


def _redact_store(store: SessionStore, redactor: Redactor, secrets: dict[str, str], dry_run: bool) -> dict[str, Any]:
    """Every session's nodes and metadata redacted in place (then compacted: the old text leaves the files)."""

    def clean(text: str) -> str:
        redacted, found = redactor.redact(text)
        secrets.update(found)
        return redacted

    changed = {session.id: store.rewrite(session.id, clean, dry_run=dry_run) for session in store.list_sessions()}
    nodes = sum(changed.values())
    compacted = store.compact() if nodes and not dry_run else None
    return {"nodes_redacted": nodes, "sessions": sorted(s for s, n in changed.items() if n), "compacted": compacted}
