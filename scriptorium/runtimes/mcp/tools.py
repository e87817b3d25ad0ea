"""Model tools: JSON-schema definitions any function-calling model can use, and their dispatcher.

An edge module. The model-facing schema of ``memory_update`` exposes only the
four official operations (``create_record``, ``update_record``,
``delete_record``, ``move_records``), with ``sources[{source, label}]``.
Every call returns a JSON-ready dict; failures come back as
``{"ok": false, "reason", "retryable", "message", "guidance"}`` a model can act on.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from scriptorium.access.requests import submit
from scriptorium.access.scope import visible_record
from scriptorium.audience import OWNER_PRINCIPAL, Principal, Viewer
from scriptorium.errors import Forbidden, InvalidArgument, ScriptoriumError
from scriptorium.recall.branches import BranchView
from scriptorium.recall.index import DEFAULT_LIMIT, RecallIndex, SearchMode
from scriptorium.recall.records import BranchLookup
from scriptorium.schemas.changes import ChangeIn, NewSourceIn, parse_update
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.writer_history import WriterHistory

_CHANGES = TypeAdapter(list[ChangeIn])
_NEW_SOURCE = TypeAdapter(NewSourceIn)
MAX_SEARCH_LIMIT = 20


def _strip_legacy(schema: dict[str, Any]) -> dict[str, Any]:
    """Hide the deprecated ``source_refs`` from models: they see ``sources`` only."""
    for definition in schema.get("$defs", {}).values():
        definition.get("properties", {}).pop("source_refs", None)
    return schema


def tool_definitions() -> list[dict[str, Any]]:
    """OpenAI-style function definitions of memory_status, memory_get, memory_search, memory_update and
    memory_remember."""
    changes_schema = _strip_legacy(_CHANGES.json_schema())
    return [
        {
            "type": "function",
            "function": {
                "name": "memory_status",
                "description": "The memory's revision, size and recent writer passes.",
                "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "memory_get",
                "description": "Read one record by memory_id, or one topic by its path (topics/...).",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "memory_id": {"type": "string", "description": "e.g. m-0mx3otj1u005"},
                        "topic_path": {"type": "string", "description": "e.g. topics/people/alice.md"},
                    },
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "memory_search",
                "description": (
                    "Search long-term memory (BM25 over organized topic records). Returns the best records "
                    "with memory_id, topic, headings, date and a snippet; read one whole with memory_get."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "description": "words to look for"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "default": 5},
                    },
                    "required": ["query"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "memory_update",
                "description": (
                    "Change memory with create_record, update_record, delete_record and move_records. "
                    "Cite sources as {source: provider/thread/message, label: a short keyword}. "
                    "All changes apply together or not at all."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "memory_changes": changes_schema,
                        "new_sources": {
                            "type": "array",
                            "description": (
                                "Evidence not yet in memory: cite it by id (new-source-1, …) in sources; "
                                "it is archived as a pending source."
                            ),
                            "items": _NEW_SOURCE.json_schema(),
                        },
                        "message": {"type": "string", "description": "why (the commit message)"},
                    },
                    "required": ["memory_changes"],
                    "additionalProperties": False,
                    "$defs": changes_schema.pop("$defs", {}),
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "memory_remember",
                "description": (
                    'Keep a standing instruction or preference the user stated ("always run the linter before '
                    'committing"), in their words, in the resident block every new session starts with. '
                    "project: true keeps it for this project only. A model's note is held as a pending source "
                    "until the user promotes it (scriptorium memory promote)."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "minLength": 1, "description": "the instruction, as said"},
                        "project": {"type": "boolean", "default": False, "description": "this project only"},
                    },
                    "required": ["text"],
                    "additionalProperties": False,
                },
            },
        },
    ]


def call_tool(
    workspace: MemoryWorkspace,
    name: str,
    arguments: dict[str, Any],
    *,
    search_mode: SearchMode = "bm25",
    branches: BranchLookup | None = None,
    principal: Principal = OWNER_PRINCIPAL,
) -> dict[str, Any]:
    """Run one tool call; errors are returned, never raised. ``search_mode`` is the runtime's setting;
    ``branches`` gives search results their ``branch``; ``principal`` is who the model speaks for (the
    local owner, or a requester's token): reads show what it may see, changes are applied, applied within
    its audience or held (:func:`scriptorium.access.requests.submit`)."""
    try:
        if name == "memory_status":
            if principal.scope != "owner":  # a requester learns no counts of what it may not see
                return {"ok": True, "revision": workspace.revision, "scope": principal.scope}
            snap = workspace.snapshot()
            return {
                "ok": True,
                "revision": snap.tree,
                "topics": len(snap.topics),
                "records": len(snap.id_to_topic),
                "recent_passes": WriterHistory(workspace.root / ".scriptorium").recent(5),
            }
        if name == "memory_get":
            return {"ok": True, **_get(workspace, arguments, branches, principal)}
        if name == "memory_search":
            return {"ok": True, **_search(workspace, arguments, search_mode, branches, principal.viewer)}
        if name == "memory_update":
            request = parse_update(
                {
                    "memory_changes": arguments.get("memory_changes"),
                    "new_sources": arguments.get("new_sources") or [],
                    "message": arguments.get("message") or "Model edit",
                }
            )
            # A model's own evidence is archived pending: it never enters automatic recall unpromoted.
            _status, result = submit(workspace, request, principal, origin="model")
            return {"ok": True, **result}
        if name == "memory_remember":
            return {"ok": True, **_remember(workspace, arguments, branches, principal)}
        raise InvalidArgument(f"unknown tool {name!r}")
    except ScriptoriumError as exc:
        return {"ok": False, **exc.to_dict()}


def _remember(
    workspace: MemoryWorkspace, arguments: dict[str, Any], branches: BranchLookup | None, principal: Principal
) -> dict[str, Any]:
    """The model's ``remember``: the owner's runtime only (a requester proposes with memory_update); its note
    is archived pending (:func:`scriptorium.changes.remember.remember`), a project's placed at the server's
    folder (the runtime starts it in the session's project)."""
    from pathlib import Path

    from scriptorium.changes.remember import remember

    if principal.scope != "owner":
        raise Forbidden("the resident block is the owner's: a requester proposes changes with memory_update")
    text, project = arguments.get("text"), arguments.get("project", False)
    if not isinstance(text, str) or not isinstance(project, bool):
        raise InvalidArgument("text must be a string and project true or false")
    store = branches.store if isinstance(branches, BranchView) else None
    result = remember(workspace, text, project=Path.cwd() if project else None, store=store, origin="model")
    return result.to_dict()


def _search(
    workspace: MemoryWorkspace,
    arguments: dict[str, Any],
    mode: SearchMode,
    branches: BranchLookup | None,
    viewer: Viewer,
) -> dict[str, Any]:
    """Model-facing search: records backed by pending sources never reach the model."""
    query, limit = arguments.get("query"), arguments.get("limit", DEFAULT_LIMIT)
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("query must be a non-empty string")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise InvalidArgument(f"limit must be an integer from 1 to {MAX_SEARCH_LIMIT}")
    hits = RecallIndex.open(workspace.root).search(query, limit, mode=mode, branches=branches, viewer=viewer)
    return {"query": query, "results": [hit.to_dict() for hit in hits]}


def _get(
    workspace: MemoryWorkspace, arguments: dict[str, Any], branches: BranchLookup | None, principal: Principal
) -> dict[str, Any]:
    view = branches if isinstance(branches, BranchView) else None
    if arguments.get("topic_path"):
        if principal.scope != "owner":  # a topic may hold records of others: requesters read records
            raise Forbidden("requesters read records by memory_id; whole topics are the owner's")
        path = str(arguments["topic_path"])
        return {"topic_path": path, "content": workspace.read_topic(path)}
    memory_id = str(arguments.get("memory_id") or "")
    if not memory_id:
        raise InvalidArgument("give memory_id or topic_path")
    return visible_record(workspace, memory_id, principal.viewer, view)
