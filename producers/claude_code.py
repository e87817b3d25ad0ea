"""Import Claude Code session files (JSONL) into a session store, preserving the graph.

Order comes from the ``parentUuid`` graph, never from timestamps. What each
entry becomes:

* ``user`` text → USER; ``assistant`` text → ASSISTANT (tool uses noted in metadata);
* an ``assistant`` entry with only ``tool_use`` → TOOL_CALL; a ``user`` entry with
  ``tool_result`` blocks → TOOL_RESULT;
* sidechain entries (subagents, inline or in ``agent-*.jsonl`` files) become a session of
  their own, ``<session>.agent-<agent ID or first entry>``, spawned by the main session
  (``parent_session``, ``spawn: subagent``, and ``task_call``: the parent's Task tool use whose
  prompt started it), classified as above — a subagent's prompt and answers enter memory,
  linked to the conversation that asked for them;
* ``isCompactSummary`` users → COMPACTION_SUMMARY; ``system`` entries, meta
  messages, slash-command echoes and interruption notices → SYSTEM;
* a ``compact_boundary`` (``parentUuid: null``) is re-attached to its
  ``logicalParentUuid``, so the conversation stays connected across compactions;
* entries that carry no message (progress, attachments, snapshots…) are left
  out and their children re-parented to the nearest kept ancestor;
* ``summary`` records give the session its title.

Only USER and ASSISTANT nodes are ever written into memory.

Files are read incrementally (:mod:`scriptorium.producers.importing`): the cursor's state
keeps the session, the last entry seen and the recent skipped entries (so a
new entry whose parent was a skipped one is re-parented across imports).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from scriptorium.producers.importing import (
    EPOCH,
    ImportedSession,
    Increment,
    json_objects,
    parse_time,
    read_increment,
    resolve_parents,
    store_sessions,
    transcript_files,
)
from scriptorium.producers.opening import open_transcript
from scriptorium.recall.places import BRANCH_KEY
from scriptorium.sessions import PARENT_KEY, SPAWN_KEY, Node, NodeKind, SessionStore

__all__ = [
    "FORMAT",
    "PROVIDER",
    "parse_increment",
    "parse_sessions",
    "read",
    "read_entries",
    "recognizes",
    "store_sessions",
    "transcript_files",
]

PROVIDER = "claude-code"
_SKIPPED_TYPES = {"progress", "attachment", "file-history-snapshot", "queue-operation"}
_SYSTEM_PREFIXES = ("<command-", "<local-command-", "Caveat: The messages below", "[Request interrupted")
_KNOWN_TYPES = {"user", "assistant", "system", "summary", *_SKIPPED_TYPES}


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
    if isinstance(entry.get("gitBranch"), str) and entry["gitBranch"]:
        meta[BRANCH_KEY] = entry["gitBranch"]  # the work tree's branch when the turn was said
    if tools:
        meta["tool_uses"] = tools
    if kind_name == "system":
        meta["subtype"] = entry.get("subtype")
        return NodeKind.SYSTEM, "system", str(entry.get("content") or ""), meta
    role = "assistant" if kind_name == "assistant" else "user"
    if entry.get("isSidechain"):
        meta["sidechain"] = True
        if isinstance(entry.get("agentId"), str):
            meta["agent"] = entry["agentId"]
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
    with open_transcript(path) as handle:
        objects, bad = json_objects(enumerate(handle, 1))
    return [entry for _, entry in objects], bad


def _session_id(entries: list[dict[str, Any]]) -> str | None:
    ids = Counter(str(e["sessionId"]) for e in entries if e.get("sessionId") and not e.get("isSidechain"))
    ids = ids or Counter(str(e["sessionId"]) for e in entries if e.get("sessionId"))
    return ids.most_common(1)[0][0] if ids else None


FORMAT = "claude-code"


def recognizes(number: int, entry: Mapping[str, Any]) -> bool:
    """A Claude Code transcript line: it names its session, or links to its parent, or is a summary."""
    return "sessionId" in entry or ("uuid" in entry and "parentUuid" in entry) or entry.get("type") == "summary"


def read(increment: Increment, store: SessionStore | None) -> tuple[list[ImportedSession], dict[str, Any]]:
    """:func:`parse_increment` (subagents and continuations are linked by ID: nothing is looked up in ``store``)."""
    return parse_increment(increment)


def parse_increment(increment: Increment) -> tuple[list[ImportedSession], dict[str, Any]]:
    """The session nodes in the lines a file gained (the main session first, then its subagents), and the
    state to continue from."""
    objects, bad = json_objects(increment.lines, increment.redactor)
    entries = [entry for _, entry in objects]
    state = increment.start_state
    session_id = state.get("session") or _session_id(entries)
    if session_id is None:
        return [], state
    session = ImportedSession(session_id, None, PROVIDER, bad_lines=bad)
    aliases: dict[str, str | None] = dict(state.get("aliases") or {})
    previous = _add_entries(session, entries, aliases, state.get("previous"))
    for entry in entries:
        if entry.get("type") not in _KNOWN_TYPES:
            session.skipped[str(entry.get("type"))] += 1
    cwd = next((e["cwd"] for e in entries if isinstance(e.get("cwd"), str) and not e.get("isSidechain")), None)
    if cwd is not None:
        session.metadata["cwd"] = cwd  # where it ran: the project whose later sessions it may inform
    # A summary record titles the session whose leaf it names; failing that, its own file's session.
    known = {node.id for node in session.nodes}
    for entry in entries:
        is_title = entry.get("type") == "summary" and isinstance(entry.get("summary"), str)
        if is_title and (str(entry.get("leafUuid")) in known or session.title is None):
            session.title = entry["summary"]
    agents: dict[str, str] = dict(state.get("agents") or {})
    subagents = _split_subagents(session, entries, agents)
    return [session, *subagents], {"session": session_id, "previous": previous, "aliases": aliases, "agents": agents}


AGENTS_KEPT = 4096
"""Sidechain entries whose subagent is remembered across imports (a later entry continues one of them)."""


def _split_subagents(
    session: ImportedSession, entries: list[dict[str, Any]], agents: dict[str, str]
) -> list[ImportedSession]:
    """Move the sidechain nodes of ``session`` into one session per subagent (``agents``: entry → subagent
    session, across imports; updated in place)."""
    sidechain = {node.id: node for node in session.nodes if node.metadata.get("sidechain")}
    if not sidechain:
        return []
    parents = {node.id: node.parent_id for node in session.nodes}

    def agent_of(uuid: str) -> str:
        if uuid in agents:
            return agents[uuid]
        node = sidechain[uuid]
        parent = parents.get(uuid)
        if isinstance(node.metadata.get("agent"), str):
            found = f"{session.id}.agent-{node.metadata['agent']}"
        elif parent in sidechain or parent in agents:
            found = agent_of(parent)
        else:  # the subagent's first entry (its parent is the main conversation, or nothing)
            found = f"{session.id}.agent-{uuid}"
        agents[uuid] = found
        return found

    tasks = _task_prompts(entries)
    by_agent: dict[str, ImportedSession] = {}
    for uuid in sorted(sidechain, key=lambda u: sidechain[u].created_at):
        agent_id = agent_of(uuid)
        node = sidechain[uuid]
        sub = by_agent.get(agent_id)
        if sub is None:
            sub = by_agent[agent_id] = ImportedSession(agent_id, session.title, PROVIDER)
            sub.metadata.update({PARENT_KEY: session.id, SPAWN_KEY: "subagent"})
        parent = node.parent_id if node.parent_id in sidechain or agents.get(node.parent_id or "") == agent_id else None
        if parent is None and node.is_content and node.content in tasks:
            sub.metadata["task_call"] = tasks[node.content]
        sub.nodes.append(replace(node, session_id=agent_id, parent_id=parent))
        sub.head, sub.updated_at = node.id, max(sub.updated_at, node.created_at)
    session.nodes = [node for node in session.nodes if node.id not in sidechain]
    while len(agents) > AGENTS_KEPT:
        agents.pop(next(iter(agents)))
    return list(by_agent.values())


def _task_prompts(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Prompt → ID of each Task (subagent) tool use in ``entries``."""
    out: dict[str, str] = {}
    for entry in entries:
        message = entry.get("message")
        if entry.get("isSidechain") or not isinstance(message, Mapping):
            continue
        for block in _blocks(message):
            tool_input = block.get("input")
            prompt = tool_input.get("prompt") if isinstance(tool_input, Mapping) else None
            is_task = block.get("type") == "tool_use" and block.get("name") in ("Task", "Agent")
            if is_task and isinstance(prompt, str) and isinstance(block.get("id"), str):
                out[prompt.strip()] = block["id"]
    return out


def parse_sessions(paths: Iterable[Path]) -> list[ImportedSession]:
    """Read whole transcript files (agent files join the session they belong to)."""
    by_session: dict[str, ImportedSession] = {}
    for path in paths:
        for part in parse_increment(read_increment(path, None))[0]:
            session = by_session.setdefault(part.id, ImportedSession(part.id, None, PROVIDER))
            session.metadata.update(part.metadata)
            known = {node.id for node in session.nodes}
            session.nodes += [node for node in part.nodes if node.id not in known]
            session.head = part.head or session.head
            session.updated_at = max(session.updated_at, part.updated_at)
            session.bad_lines += part.bad_lines
            session.skipped += part.skipped
            session.title = session.title if session.title and not part.title else part.title or session.title
    return sorted(by_session.values(), key=lambda s: s.id)


def _add_entries(
    session: ImportedSession, entries: list[dict[str, Any]], aliases: dict[str, str | None], previous: str | None
) -> str | None:
    """Turn entries into nodes; ``aliases`` maps left-out entries to their kept ancestor (updated in place).

    Returns the last entry's ID (the parent of a following entry written without ``parentUuid``).
    """
    graph: list[tuple[str, str | None, bool]] = []
    seen: set[str] = set()
    kept: dict[str, tuple[NodeKind, str, str, dict[str, Any], datetime]] = {}
    last = EPOCH
    for entry in entries:
        uuid = entry.get("uuid")
        if not isinstance(uuid, str) or uuid in seen:
            continue
        seen.add(uuid)
        # Entries written without a parentUuid field at all follow the previous entry of the file.
        parent = entry.get("parentUuid") if "parentUuid" in entry else previous
        previous = uuid
        if entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
            parent = entry.get("logicalParentUuid") or parent
        keep = entry.get("type") in ("user", "assistant", "system")
        graph.append((uuid, parent if isinstance(parent, str) else None, keep))
        if keep:
            last = parse_time(entry.get("timestamp"), last)
            kind, role, text, meta = _classify(entry)
            kept[uuid] = (kind, role, text, meta, last)
    parents = resolve_parents(graph, aliases)
    for uuid, (kind, role, text, meta, created) in kept.items():
        session.nodes.append(Node(uuid, session.id, parents[uuid], role, kind, text, created, meta))
        if not meta.get("sidechain"):
            session.updated_at = max(session.updated_at, created)
            session.head = uuid
    return previous
