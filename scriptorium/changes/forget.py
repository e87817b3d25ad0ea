"""Forgetting for real: a conversation (or some of its messages) leaves the memory in one transaction.

``scriptorium memory forget (--thread P/T | --session S | --source ID…) [--purge-history] [--dry-run]``,
``POST /api/memory/forget`` and the page's Forget action all come here. One transaction:

* every record citing a forgotten source is deleted whole, whatever else it cites: its prose may carry
  what was forgotten, and without that citation it would be shown to whoever may see its other sources
  (its audience, the fold of every cited source's, would widen). Those that cited other sources too are
  listed (``deleted_shared``) with those sources, so the owner can write them again from what remains;
  a dry run quotes their text there, the forget itself never does;
* a record elsewhere that links to a deleted one loses the link (its label stays as plain text: the
  target named the forgotten conversation's topic) and is listed (``unlinked``), so no link, whoever made
  it, can keep a conversation from being forgotten; ``also`` carries changes the owner wants in the same
  transaction instead (the rewritten linking records);
* the forgotten sources are redacted: each file keeps its identity and a tombstone (who, when, why) and
  loses its text — the one change besides promotion a source may see.

Then what is derived from them follows: the recall index and its disk cache are rebuilt (its vocabulary
held the forgotten words), the forgotten records' vectors are dropped, the writer history loses any excerpt
of the text, and the session store's copy is erased (tombstoned nodes keep their IDs and write markers, so
importing the same transcript again writes nothing) and compacted so the bytes leave its files.
``purge_history`` then rewrites git history (:mod:`scriptorium.workspace.purge`).

Nothing here quotes the forgotten text: not the tombstone, not the commit message, not the result.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scriptorium.changes.proposals import ProposalStore, erase_forgotten
from scriptorium.changes.provenance import conversation_paths
from scriptorium.changes.structured import (
    Change,
    Citation,
    DeleteRecord,
    Destination,
    MoveRecords,
    UpdateRecord,
    update_records,
)
from scriptorium.errors import InvalidArgument, NotFound
from scriptorium.logs import get_logger
from scriptorium.recall.index import RecallIndex
from scriptorium.sessions import TITLE_FROM_KEY, SessionStore
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.blocks import BLOCK_ID
from scriptorium.workspace.paths import (
    SOURCES,
    legacy_source_path,
    source_identity_from_path,
    source_path,
)
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.sources import forgotten_forms, tombstone
from scriptorium.workspace.topics import ParsedTopic, Record, without_footnote_refs
from scriptorium.workspace.transaction import SourceRewrites
from scriptorium.workspace.writer_history import WriterHistory

log = get_logger(__name__)
REDACTED = "[forgotten]"


@dataclass(frozen=True, slots=True)
class Selection:
    """What to forget: a conversation (``thread`` provider/thread, or ``session``) or some sources."""

    thread: str | None = None
    session: str | None = None
    sources: tuple[str, ...] = ()

    def paths(self, ws: MemoryWorkspace) -> list[str]:
        given = [name for name in ("thread", "session", "sources") if getattr(self, name)]
        if len(given) != 1:
            raise InvalidArgument("name what to forget: a thread (provider/thread), a session, or sources")
        if self.sources:
            paths = []
            for identity in self.sources:
                path = identity if identity.startswith(f"{SOURCES}/") else _path_of(identity)
                if not ws.archive.exists(path):
                    raise NotFound(f"no archived source {identity}", path=path)
                paths.append(path)
            return sorted(set(paths))
        return conversation_paths(ws, thread=self.thread, session=self.session)


def _path_of(identity: str) -> str:
    parts = identity.split("/")
    if len(parts) != 3 or not all(parts):
        raise InvalidArgument(f"a source is provider/thread/message or its sources/… path, not {identity!r}")
    return source_path(*parts)


def forget(
    ws: MemoryWorkspace,
    selection: Selection,
    *,
    why: str = "",
    by: str = "owner",
    also: Sequence[Change] = (),
    dry_run: bool = False,
    store: SessionStore | None = None,
) -> dict[str, Any]:
    """Forget the selected sources (see the module). ``also``: changes applied in the same transaction (the
    links to deleted records). ``store``: the session store whose copy is erased too. With ``dry_run``
    nothing changes: the result lists what would go and the topics' diff."""
    if len(why) > 500:
        raise InvalidArgument("the reason is at most 500 characters (and should not quote what is forgotten)")
    paths = selection.paths(ws)
    forgotten = set(paths)
    snap = ws.snapshot()
    deleted: list[Record] = []
    deleted_shared: list[dict[str, Any]] = []
    for path in snap.topics_citing({p.rsplit("/", 1)[0] for p in forgotten}):  # the snapshot knows which
        topic = snap.topics[path]
        if not any(note.source_path in forgotten for note in topic.footnotes.values()):
            continue  # it cites other messages of the conversation: its records are not looked at one by one
        for record in topic.records:
            cited = dict.fromkeys(topic.cited_paths(record))
            if not forgotten.intersection(cited):
                continue
            deleted.append(record)
            others = [source_identity(p) for p in cited if p not in forgotten]
            if others:
                entry = {"memory_id": record.memory_id, "topic_path": record.topic, "other_sources": others}
                if dry_run:  # what the owner may write again from the other sources; the forget never quotes it
                    entry["content"] = without_footnote_refs(record.text)
                deleted_shared.append(entry)
    doomed = {bid for record in deleted for bid in record.block_ids}
    asked = {m for c in also for m in _targets(c)}
    clash = sorted(asked.intersection(r.memory_id for r in deleted))
    if clash:
        raise InvalidArgument(f"the forget changes these records itself: {', '.join('^' + m for m in clash)}")
    changes: list[Change] = [DeleteRecord(record.memory_id) for record in deleted]
    changes += _retitled(snap, store, paths, {r.memory_id for r in deleted}) if store is not None else []
    unlinked: list[str] = []
    settled = {r.memory_id for r in deleted} | asked
    for record in snap.incoming_links(doomed):
        if record.memory_id not in settled:
            changes.append(rewritten_record(snap.topics[record.topic], record, forgotten, doomed))
            unlinked.append(record.memory_id)
    at = datetime.now(UTC).isoformat(timespec="seconds")
    stone = {"at": at, "by": by, "why": why}
    texts = [ws.archive.read(p) for p in paths]
    already = [m.identity for m in texts if m.forgotten is not None]
    message = f"Forget {len(paths)} source(s)" + (f": {why}" if why else "")
    rewrites = SourceRewrites.forget({m.path: tombstone(m, at, by, why) for m in texts if m.forgotten is None})
    all_changes = [*changes, *also]
    if all_changes:
        result = update_records(ws, all_changes, message=message, dry_run=dry_run, rewrites=rewrites)
    else:
        result = ws.rewrite_sources(rewrites, message=message, dry_run=dry_run)
    payload: dict[str, Any] = {
        "dry_run": dry_run,
        "sources": [source_identity(p) for p in paths],
        "paths": paths,
        "already_forgotten": already,
        "deleted": [r.memory_id for r in deleted],
        "deleted_shared": deleted_shared,
        "unlinked": unlinked,
        "transaction": result.to_dict(),
    }
    needles = forgotten_forms(m.text for m in texts)
    identities = [source_identity(p) for p in paths]  # delimited: message 1 is no prefix of message 10
    markers = [
        *(f"{left}{identity}{right}" for identity in identities for left, right in (('"', '"'), ("(", ")"))),
        *(p.removeprefix(f"{SOURCES}/") for p in paths),
        *(legacy_source_path(*i).removeprefix(f"{SOURCES}/") for p in paths if (i := source_identity_from_path(p))),
        *(  # a citation of layouts 3 and 4: the part of the conversation file holding it, and its anchor
            f"{ws.archive.stored_path(p).removeprefix(f'{SOURCES}/')}#source-{i[2]}"
            for p in paths
            if (i := source_identity_from_path(p))
        ),
        *needles,
    ]
    erased = erase_forgotten(ProposalStore(ws.root), markers, dry_run=dry_run)
    if dry_run:
        payload["proposals_erased"] = erased
        return payload
    payload["derived"] = {
        "proposals_erased": erased,
        "recall": refresh_recall(ws),
        "history_entries_redacted": WriterHistory(ws.root / ".scriptorium").redact(dict.fromkeys(needles, REDACTED)),
        "store": _erase_store(store, selection, paths, stone) if store is not None else None,
    }
    log.info(
        "memory.forgotten",
        sources=len(paths),
        deleted=len(deleted),
        deleted_shared=len(deleted_shared),
        revision=result.revision,
    )
    return payload


_WIKILINK = re.compile(rf"(?<!\\)\[\[[^\[\]|#\n]*#\^({BLOCK_ID})(?:\|([^\[\]\n]*))?\]\]")
_MDLINK = re.compile(rf"(?<![!\\])\[([^\[\]\n]*)\]\([^()\s#]*#\^({BLOCK_ID})\)")


def rewritten_record(topic: ParsedTopic, record: Record, forgotten: set[str], doomed: set[str]) -> UpdateRecord:
    """``record`` without its forgotten citations and its links to the records the forget deletes (a link
    keeps its label as plain text; its target named the forgotten conversation's topic)."""
    remaining = tuple(
        Citation(note.source.identity, note.link_label or note.source.identity)
        for ref in record.refs
        if (note := topic.footnotes.get(ref)) is not None
        and note.source is not None
        and note.source_path not in forgotten
    )
    content = without_footnote_refs(record.text)
    if record.links and doomed.intersection(record.links):
        content = _WIKILINK.sub(lambda m: (m.group(2) or "") if m.group(1) in doomed else m.group(0), content)
        content = _MDLINK.sub(lambda m: m.group(1) if m.group(2) in doomed else m.group(0), content)
        content = re.sub(r"[ \t]{2,}", " ", content).strip()
    return UpdateRecord(record.memory_id, content, record.date, remaining)


def _retitled(snap: Snapshot, store: SessionStore, paths: Sequence[str], deleted: set[str]) -> list[Change]:
    """The records left under a heading a forgotten message titled (a session's title taken from its first
    user message: ``scriptorium.titles``), moved under the session's ID in the same topic; the emptied heading
    is pruned. Topic paths never carry such a title (``Session.topic_name``)."""
    messages: dict[str, set[str]] = {}
    for path in paths:
        if (identity := source_identity_from_path(path)) is not None:
            messages.setdefault(identity[1], set()).add(identity[2])
    renamed: dict[str, str] = {}
    for session_id, forgotten in messages.items():
        session = store.get_session(session_id)
        title = session.metadata.get("title") if session is not None else None
        if session is not None and title and session.metadata.get(TITLE_FROM_KEY) in forgotten:
            renamed[str(title)] = f"Session {session_id}"
    if not renamed:
        return []
    moves: list[Change] = []
    for path, topic in snap.topics.items():
        groups: dict[tuple[str, ...], list[str]] = {}
        for record in topic.records:
            heading = _renamed_heading(record.headings[0], renamed) if record.headings else None
            if heading is not None and record.memory_id not in deleted:
                ids = groups.setdefault((heading, *record.headings[1:]), [])
                ids += [bid for bid in record.block_ids if bid not in ids]
        moves += [MoveRecords(tuple(ids), Destination(path, headings)) for headings, ids in groups.items()]
    return moves


def _renamed_heading(heading: str, renamed: Mapping[str, str]) -> str | None:
    """``heading`` under its new title when it is a forgotten title (or a part of it: ``<title> (part N)``)."""
    for old, new in renamed.items():
        if heading == old:
            return new
        if heading.startswith(f"{old} (part ") and heading.endswith(")"):
            return new + heading.removeprefix(old)
    return None


def _targets(change: Change) -> list[str]:
    ids = getattr(change, "memory_ids", None)
    if ids is not None:
        return list(ids)
    one = getattr(change, "memory_id", None)
    return [one] if one else []


def source_identity(path: str) -> str:
    identity = source_identity_from_path(path)
    return "/".join(identity) if identity else path


def refresh_recall(ws: MemoryWorkspace) -> dict[str, int]:
    """The recall index is rebuilt from the installed topics (its vocabulary held the forgotten words) and
    only the installed records' vectors stay in the vector cache."""
    return RecallIndex.forget(ws.root)


def _erase_store(
    store: SessionStore, selection: Selection, paths: Sequence[str], stone: Mapping[str, str]
) -> dict[str, Any]:
    """Erase the store's copy: the whole session for a conversation, else the archived messages' nodes."""
    erased = 0
    if selection.session or selection.thread:
        sessions = {source_identity_from_path(p)[1] for p in paths if source_identity_from_path(p)}  # type: ignore[index]
        for session_id in sorted(sessions):
            if store.get_session(session_id) is not None:
                erased += store.forget(session_id, None, stone)
    else:
        by_session: dict[str, list[str]] = {}
        for path in paths:
            identity = source_identity_from_path(path)
            if identity is not None:
                by_session.setdefault(identity[1], []).append(identity[2])
        for session_id, nodes in sorted(by_session.items()):
            if store.get_session(session_id) is not None:
                erased += store.forget(session_id, nodes, stone)
    compacted = store.compact()
    return {"nodes_erased": erased, "compacted": compacted}
