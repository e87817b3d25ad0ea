"""Import pi coding-agent sessions (``~/.pi/agent/sessions/--<cwd>--/*.jsonl``) into a session store.

The first line is the header ``{"type": "session", "id", "cwd", "version"?}``.
Version 1 files are linear (entries have no IDs: node IDs are line numbers,
``l<n>``, each entry following the previous one); version 2 and 3 files are a
tree (entries carry ``id`` and ``parentId``): every branch is a real fork of
the one session, the shared prefix is stored once, and the entry appended last
is the head. What each entry becomes:

* ``message`` with role ``user`` → USER; ``assistant`` → ASSISTANT from its text
  blocks (an assistant message with only ``thinking`` / ``toolCall`` blocks is a
  TOOL_CALL, with the tools' names and never their arguments); ``toolResult`` →
  TOOL_RESULT; ``bashExecution``, ``custom`` (and v2's ``hookMessage``) → SYSTEM;
* ``compaction`` and ``branch_summary`` → COMPACTION_SUMMARY (summaries repeat what
  memory already holds: never written);
* ``custom``, ``custom_message``, ``label``, ``model_change``,
  ``thinking_level_change`` and ``session_info`` (its ``name`` titles the session)
  are not nodes: entries below them are re-parented to the nearest node.
  Entry types this importer does not know are counted in ``skipped``, never fatal.

Only USER and ASSISTANT nodes are ever written into memory.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from scriptorium.errors import Forbidden
from scriptorium.producers.importing import EPOCH, ImportedSession, Increment, json_objects, parse_time, resolve_parents
from scriptorium.producers.opening import open_transcript
from scriptorium.sessions import PARENT_KEY, SPAWN_KEY, Node, NodeKind, SessionStore

PROVIDER = "pi"
NOT_NODES = {"custom", "custom_message", "label", "model_change", "thinking_level_change", "session_info"}
SUMMARIES = {"compaction", "branch_summary"}
SYSTEM_ROLES = {"bashExecution", "custom", "hookMessage"}


def _blocks(content: object) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def _text(content: object) -> str:
    return "\n\n".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text").strip()


def _classify(entry: Mapping[str, Any]) -> tuple[NodeKind, str, str, dict[str, Any]] | None:
    """(kind, role, text, metadata) of an entry that becomes a node, else None."""
    kind = entry.get("type")
    if kind in SUMMARIES:
        return NodeKind.COMPACTION_SUMMARY, "assistant", str(entry.get("summary") or ""), {"pi_type": kind}
    if kind != "message" or not isinstance(entry.get("message"), Mapping):
        return None
    message = entry["message"]
    role = str(message.get("role"))
    meta: dict[str, Any] = {"pi_type": "message", "pi_role": role}
    if role == "user":
        return NodeKind.USER, "user", _text(message.get("content")), meta
    if role == "assistant":
        blocks = _blocks(message.get("content"))
        text = _text(blocks)
        tools = [str(b.get("name", "")) for b in blocks if b.get("type") == "toolCall"]
        if tools:
            meta["tool_uses"] = tools
        return (NodeKind.ASSISTANT if text else NodeKind.TOOL_CALL), "assistant", text, meta
    if role == "toolResult":
        return NodeKind.TOOL_RESULT, "user", "", meta
    if role in SYSTEM_ROLES:
        return NodeKind.SYSTEM, "user", _text(message.get("content")), meta
    return None


FORMAT = "pi"


def recognizes(number: int, entry: Mapping[str, Any]) -> bool:
    """A pi session file: its first line is the ``session`` header (with an ``id``, not Claude's ``sessionId``)."""
    return (
        number == 1 and entry.get("type") == "session" and isinstance(entry.get("id"), str) and "sessionId" not in entry
    )


def read(increment: Increment, store: SessionStore | None) -> tuple[list[ImportedSession], dict[str, Any]]:
    """:func:`parse_increment`, with a fork's parent resolved and its replayed prefix marked as copies.

    ``/fork`` writes a new file whose header names its parent by *file path* and whose first entries repeat
    the parent's, with the same IDs: the parent becomes the parent's session ID, and each repeated entry that
    ``store`` already holds for the parent is kept as a copy (never written twice); what follows is the fork's
    own, a branch continued from the parent.
    """
    sessions, state = parse_increment(increment)
    for session in sessions:
        parent = session.metadata.get(PARENT_KEY)
        if isinstance(parent, str) and parent:
            parent = session.metadata[PARENT_KEY] = _session_of(parent)
            if store is not None:
                _mark_copies(session, parent, store)
    return sessions, state


def _session_of(parent: str) -> str:
    """The session ID a fork's ``parentSession`` names: the ID in that file's header (pi writes the parent's
    absolute path), or the value itself when it is an ID already (or names no readable file)."""
    path = Path(parent).expanduser()
    if not parent.endswith(".jsonl") or not path.is_file():
        return parent
    try:
        with open_transcript(path) as handle:
            header = json.loads(handle.readline())
    except (OSError, ValueError, Forbidden):  # Forbidden: outside the folders an HTTP hook's caller may read
        return parent
    found = header.get("id") if isinstance(header, dict) and header.get("type") == "session" else None
    return found if isinstance(found, str) and found else parent


def _mark_copies(session: ImportedSession, parent: str, store: SessionStore) -> None:
    for n, node in enumerate(session.nodes):
        if not node.is_content:
            continue
        original = store.get_node(parent, node.id)
        if original is not None and original.role == node.role and original.content == node.content:
            meta = {**node.metadata, "copy_of": node.id}
            session.nodes[n] = replace(node, kind=NodeKind.SYSTEM, metadata=meta)


def parse_increment(
    increment: Increment, provider: str = PROVIDER, not_nodes: frozenset[str] = frozenset()
) -> tuple[list[ImportedSession], dict[str, Any]]:
    """The session nodes in the lines a pi session file gained, and the state to continue from; ``provider``
    names the runtime that wrote them (OpenClaw writes pi's entries too), ``not_nodes`` its own entry types
    that carry no conversation."""
    objects, bad = json_objects(increment.lines, increment.redactor)
    state = dict(increment.start_state)
    session_id: str | None = state.get("session")
    version = int(state.get("version") or 1)
    previous: str | None = state.get("previous")
    title: str | None = None
    metadata: dict[str, Any] = {}
    skipped: dict[str, int] = {}
    graph: list[tuple[str, str | None, bool]] = []
    kept: dict[str, tuple[NodeKind, str, str, dict[str, Any], datetime]] = {}
    last = parse_time(state.get("time"), EPOCH)
    for number, entry in objects:
        kind = entry.get("type")
        if kind == "session":
            if session_id is None and isinstance(entry.get("id"), str):
                session_id = entry["id"]
                version = int(entry.get("version") or 1)
                for key in ("cwd", "provider", "modelId"):
                    if isinstance(entry.get(key), str):
                        metadata[key] = entry[key]
                if isinstance(entry.get("parentSession"), str):
                    metadata.update({PARENT_KEY: entry["parentSession"], SPAWN_KEY: "fork"})  # a branched session
            continue
        if session_id is None:
            skipped["before_header"] = skipped.get("before_header", 0) + 1
            continue
        if version >= 2 and isinstance(entry.get("id"), str):
            entry_id, parent = entry["id"], entry.get("parentId")
        else:
            entry_id, parent = f"l{number}", previous
        previous = entry_id
        last = parse_time(entry.get("timestamp"), last)
        if kind == "session_info" and isinstance(entry.get("name"), str):
            title = entry["name"]
        shaped = _classify(entry)
        if shaped is None and kind not in NOT_NODES and kind not in not_nodes and kind != "message":
            skipped[str(kind)] = skipped.get(str(kind), 0) + 1
        graph.append((entry_id, parent if isinstance(parent, str) else None, shaped is not None))
        if shaped is not None:
            kept[entry_id] = (*shaped, last)
    if session_id is None:
        return [], increment.start_state
    aliases: dict[str, str | None] = dict(state.get("aliases") or {})
    parents = resolve_parents(graph, aliases)
    session = ImportedSession(session_id, title, provider, bad_lines=bad, metadata=metadata)
    session.skipped.update(skipped)
    for entry_id, (kind, role, text, meta, created) in kept.items():
        session.nodes.append(Node(entry_id, session_id, parents[entry_id], role, kind, text, created, meta))
        session.updated_at = max(session.updated_at, created)
    if graph:  # the entry appended last is the leaf; its nearest node is the head
        leaf, _parent, is_node = graph[-1]
        session.head = leaf if is_node else aliases.get(leaf)
    new_state = {
        "session": session_id,
        "version": version,
        "previous": previous,
        "aliases": aliases,
        "time": last.isoformat(),
    }
    return [session], new_state
