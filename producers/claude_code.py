"""Import Claude Code session files (JSONL) into a session store, preserving the graph.

Order comes from the ``parentUuid`` graph, never from timestamps. What each
entry becomes:

* ``user`` text → USER; ``assistant`` text → ASSISTANT (tool uses noted in metadata);
* an ``assistant`` entry with only ``tool_use`` → TOOL_CALL; a ``user`` entry with
  ``tool_result`` blocks → TOOL_RESULT;
* sidechain entries (subagents, inline or in ``agent-*.jsonl`` files) → SCHEDULED;
* ``isCompactSummary`` users → COMPACTION_SUMMARY; ``system`` entries, meta
  messages, slash-command echoes and interruption notices → SYSTEM;
* a ``compact_boundary`` (``parentUuid: null``) is re-attached to its
  ``logicalParentUuid``, so the conversation stays connected across compactions;
* entries that carry no message (progress, attachments, snapshots…) are left
  out and their children re-parented to the nearest kept ancestor;
* ``summary`` records give the session its title.

Only USER and ASSISTANT nodes are ever written into memory.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scriptorium.sessions import Node, NodeKind, SessionStore

PROVIDER = "claude-code"
_SKIPPED_TYPES = {"progress", "attachment", "file-history-snapshot", "queue-operation"}
_SYSTEM_PREFIXES = ("<command-", "<local-command-", "Caveat: The messages below", "[Request interrupted")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True)
class ImportedSession:
    """One session read from transcript files."""

    id: str
    title: str | None
    nodes: list[Node] = field(default_factory=list)
    head: str | None = None
    updated_at: datetime = EPOCH
    bad_lines: int = 0


def _time(value: Any, fallback: datetime) -> datetime:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return fallback
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return fallback


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def _classify(entry: Mapping[str, Any]) -> tuple[NodeKind, str, str, dict[str, Any]]:
    """(kind, role, text, metadata) of an entry that carries a message."""
    kind_name = entry.get("type")
    message = entry.get("message") if isinstance(entry.get("message"), Mapping) else {}
    assert isinstance(message, Mapping)
    blocks = _blocks(message)
    text = "\n\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()
    tools = [str(b.get("name", "")) for b in blocks if b.get("type") == "tool_use"]
    meta: dict[str, Any] = {"claude_code_type": kind_name}
    if tools:
        meta["tool_uses"] = tools
    if kind_name == "system":
        meta["subtype"] = entry.get("subtype")
        return NodeKind.SYSTEM, "system", str(entry.get("content") or ""), meta
    role = "assistant" if kind_name == "assistant" else "user"
    if entry.get("isSidechain"):
        meta["sidechain"] = True
        return NodeKind.SCHEDULED, role, text, meta
    if kind_name == "assistant":
        if tools and not text:
            return NodeKind.TOOL_CALL, role, "", meta
        return NodeKind.ASSISTANT, role, text, meta
    if entry.get("isCompactSummary"):
        return NodeKind.COMPACTION_SUMMARY, role, text, meta
    if any(b.get("type") == "tool_result" for b in blocks):
        return NodeKind.TOOL_RESULT, role, text, meta
    if entry.get("isMeta") or text.startswith(_SYSTEM_PREFIXES):
        return NodeKind.SYSTEM, role, text, meta
    return NodeKind.USER, role, text, meta


def read_entries(path: Path) -> tuple[list[dict[str, Any]], int]:
    """JSON objects of a JSONL file, and how many lines were not valid JSON objects."""
    entries: list[dict[str, Any]] = []
    bad = 0
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(value, dict):
                entries.append(value)
            else:
                bad += 1
    return entries, bad


def parse_sessions(paths: Iterable[Path]) -> list[ImportedSession]:
    """Read transcript files (agent files join the session they belong to)."""
    by_session: dict[str, ImportedSession] = {}
    for path in paths:
        entries, bad = read_entries(path)
        ids = Counter(str(e["sessionId"]) for e in entries if e.get("sessionId") and not e.get("isSidechain"))
        ids = ids or Counter(str(e["sessionId"]) for e in entries if e.get("sessionId"))
        if not ids:
            continue
        session_id = ids.most_common(1)[0][0]
        session = by_session.setdefault(session_id, ImportedSession(session_id, None))
        session.bad_lines += bad
        _add_entries(session, entries)
        # A summary record titles the session whose leaf it names; failing that, its own file's session.
        summaries = [e for e in entries if e.get("type") == "summary" and isinstance(e.get("summary"), str)]
        known = {node.id for node in session.nodes}
        for entry in summaries:
            if str(entry.get("leafUuid")) in known or session.title is None:
                session.title = entry["summary"]
    return sorted(by_session.values(), key=lambda s: s.id)


def _add_entries(session: ImportedSession, entries: list[dict[str, Any]]) -> None:
    parent_of: dict[str, str | None] = {}
    kept: dict[str, tuple[NodeKind, str, str, dict[str, Any], datetime]] = {}
    order: list[str] = []
    last = EPOCH
    known = {node.id for node in session.nodes}
    previous: str | None = None
    for entry in entries:
        uuid = entry.get("uuid")
        if not isinstance(uuid, str) or uuid in parent_of or uuid in known:
            continue
        # Entries written without a parentUuid field at all follow the previous entry of the file.
        parent = entry.get("parentUuid") if "parentUuid" in entry else previous
        previous = uuid
        if entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
            parent = entry.get("logicalParentUuid") or parent
        parent_of[uuid] = parent if isinstance(parent, str) else None
        if entry.get("type") in _SKIPPED_TYPES or entry.get("type") not in ("user", "assistant", "system"):
            continue
        last = _time(entry.get("timestamp"), last)
        kind, role, text, meta = _classify(entry)
        kept[uuid] = (kind, role, text, meta, last)
        order.append(uuid)
    for uuid in order:
        kind, role, text, meta, created = kept[uuid]
        parent = _kept_ancestor(parent_of[uuid], parent_of, kept, known)
        session.nodes.append(Node(uuid, session.id, parent, role, kind, text, created, meta))
        session.updated_at = max(session.updated_at, created)
        if not meta.get("sidechain"):
            session.head = uuid


def _kept_ancestor(
    parent: str | None, parent_of: Mapping[str, str | None], kept: Mapping[str, object], known: set[str]
) -> str | None:
    seen: set[str] = set()
    while parent is not None and parent not in kept and parent not in known:
        if parent in seen or parent not in parent_of:
            return None
        seen.add(parent)
        parent = parent_of[parent]
    return parent


def store_sessions(store: SessionStore, sessions: Iterable[ImportedSession]) -> int:
    """Write imported sessions into ``store`` (idempotent). Returns the number of new nodes."""
    added = 0
    for session in sessions:
        metadata: dict[str, Any] = {"provider": PROVIDER}
        if session.title:
            metadata["title"] = session.title
        first = min((node.created_at for node in session.nodes), default=EPOCH)
        store.create_session(session.id, metadata, created_at=first)
        added += store.add_nodes(session.nodes)
        if session.head is not None:
            current = store.get_session(session.id)
            if current is None or current.head != session.head:
                store.set_head(session.id, session.head, updated_at=session.updated_at)
    return added


def transcript_files(paths: Iterable[Path]) -> list[Path]:
    """Every ``*.jsonl`` file named or found below the named folders, main sessions first."""
    found: list[Path] = []
    for path in paths:
        found.extend(sorted(path.rglob("*.jsonl")) if path.is_dir() else [path])
    return sorted(dict.fromkeys(found), key=lambda p: (p.name.startswith("agent-"), str(p)))
