"""Routes for agent runtimes that cannot speak Celery's protocol, behind a runtime token.

* ``POST /api/events`` — the bus events of ``schemas/json/``: enqueued (cluster)
  or run as a background pass (embedded; the served workspace answers to the
  name ``default``); 202 with the task ID, idempotent by ``event_id``.
* ``POST /api/sessions/{id}/nodes`` — append conversation nodes (parents,
  kinds, head) to the session store.
* ``GET /api/runtime/core`` and ``GET /api/runtime/search`` — the effective core
  and trusted search, nothing else of the memory; a token made for a requester
  sees the shared records and that requester's own, one without sees the shared.
* ``POST /api/hooks`` — a Claude Code / Codex hook payload, answered as
  ``scriptorium hook`` would (Claude Code's ``http`` hook type posts it here);
  served from this warm process, so a prompt pays no start-up.

Every route needs a runtime token (``scriptorium token create --scope
runtime``): 401 without a token, 403 with any other, the owner's included.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool

from scriptorium.access.quota import nodes_size, runtime_quota
from scriptorium.cache import BoundedCache
from scriptorium.errors import Forbidden, InvalidArgument
from scriptorium.runtimes.hooks.daemon import WRITING_EVENTS
from scriptorium.runtimes.hooks.writes import WriteQueue
from scriptorium.runtimes.openings import FIRST_PROMPT, Openings
from scriptorium.schemas.api import EventAccepted, HookAnswer, NodesAdded, RuntimeCore, SearchResults
from scriptorium.schemas.events import MAX_PAYLOAD_BYTES, Event, HeadMoved, parse_event
from scriptorium.schemas.sessions import NodesIn, parse_nodes
from scriptorium.settings import Settings
from scriptorium.web.auth import Caller, Guard
from scriptorium.web.errors import READ_ERRORS, WRITE_ERRORS, error_responses
from scriptorium.workspace import MemoryWorkspace

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$")
SEEN_EVENTS = 100_000
"""Event IDs remembered for idempotency (embedded; the cluster keeps them in Redis for a day)."""
SEEN_TTL_S = 24 * 3600


def _event_body() -> dict[str, Any]:
    from scriptorium.schemas.events import json_schemas

    return {"required": True, "content": {"application/json": {"schema": json_schemas()["event.schema.json"]}}}


def _nodes_body() -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": NodesIn.model_json_schema()}}}


def _json_object(raw: bytes) -> dict[str, Any]:
    """A hook payload's fields, read for routing ({} when it is not a JSON object: answered as a bad one)."""
    try:
        payload = json.loads(raw)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


class RuntimeRoutes:
    def __init__(self, settings: Settings, open_workspace: Callable[[], MemoryWorkspace], guard: Guard) -> None:
        self.settings = settings
        self.open_workspace = open_workspace
        self.seen: BoundedCache[str, str] = BoundedCache(SEEN_EVENTS)
        self._seen_lock = threading.Lock()
        self._passes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scriptorium-pass")
        self._runtime: Any = None
        self._publish_lock = threading.Lock()
        self._publisher: Any = None
        self._writes: WriteQueue | None = None
        self._writes_lock = threading.Lock()
        self._redis: Any = None
        self.openings = Openings(settings.state)
        # Each answer as its model has it (the keys the handler returned, no default added); each refusal the
        # reason-code body.
        answers: dict[str, Any] = {"response_model_exclude_unset": True, "responses": error_responses(READ_ERRORS)}
        posts: dict[str, Any] = {**answers, "responses": error_responses(WRITE_ERRORS)}
        runtime = guard.requires("runtime")
        self.router = APIRouter()
        self.router.add_api_route(
            "/api/events",
            self.post_event,
            methods=["POST"],
            status_code=202,
            response_model=EventAccepted,
            **posts,
            **guard.requires("runtime", openapi_extra={"requestBody": _event_body()}),
            summary="Enqueue one bus event (idempotent by event_id)",
        )
        self.router.add_api_route(
            "/api/sessions/{session_id}/nodes",
            self.post_nodes,
            methods=["POST"],
            response_model=NodesAdded,
            **posts,
            **guard.requires("runtime", openapi_extra={"requestBody": _nodes_body()}),
            summary="Append conversation nodes to the session store",
        )
        self.router.add_api_route(
            "/api/runtime/core", self.get_core, methods=["GET"], response_model=RuntimeCore, **answers, **runtime
        )
        self.router.add_api_route(
            "/api/runtime/search", self.search, methods=["GET"], response_model=SearchResults, **answers, **runtime
        )
        hook_body = {"requestBody": {"required": True, "content": {"application/json": {"schema": {}}}}}
        self.router.add_api_route(
            "/api/hooks",
            self.post_hook,
            methods=["POST"],
            response_model=HookAnswer,
            **posts,
            **guard.requires("runtime", openapi_extra=hook_body),
            summary="Answer one hook payload as `scriptorium hook` would",
        )

    def close(self) -> None:
        if self._writes is not None:
            self._writes.close()
        self._passes.shutdown(wait=True)
        if self._runtime is not None:
            self._runtime.store.close()
        if self._publisher is not None:
            self._publisher.close()
            self._redis.close()

    def _memory_on(self) -> None:
        if self.settings.backend == "none":
            raise HTTPException(404, "memory is disabled (memory.backend=none)")

    # -- events ------------------------------------------------------------------------

    async def post_event(self, request: Request) -> dict[str, Any]:
        self._memory_on()
        raw = await request.body()
        if len(raw) > MAX_PAYLOAD_BYTES:
            raise InvalidArgument(f"event payload is {len(raw)} bytes; the limit is {MAX_PAYLOAD_BYTES}")
        event = parse_event(raw)
        task_id, duplicate = await run_in_threadpool(self._accept, event)
        mode = "cluster" if self.settings.broker_url else "embedded"
        return {"task_id": task_id, "event_id": event.event_id, "duplicate": duplicate, "mode": mode}

    def _accept(self, event: Event) -> tuple[str, bool]:
        event = self._named(event)
        if self.settings.broker_url:
            return self._enqueue(event)
        if event.workspace != "default":
            raise InvalidArgument(f"this server serves the workspace 'default', not {event.workspace!r}")
        with self._seen_lock:
            if (known := self.seen.get(event.event_id)) is not None:
                return known, True
            self.seen.put(event.event_id, event.event_id)
        self._passes.submit(self._run_pass, event)
        return event.event_id, False

    def _named(self, event: Event) -> Event:
        """``event`` with the IDs it carries redacted as names, as the store keeps them (a spooled or queued
        event holds no secret either)."""
        redactor = self.settings.redactor()
        names = {k: getattr(event, k) for k in ("session_id", "left") if isinstance(getattr(event, k, None), str)}
        if redactor is None or not names:
            return event
        return event.model_copy(update={k: redactor.name(v) for k, v in names.items()})

    def _workspace_name(self) -> str:
        """The workspace events from this server name: the hooks' (cluster), or the served one (embedded)."""
        return self.settings.hook_workspace if self.settings.broker_url else "default"

    def _enqueue(self, event: Event) -> tuple[str, bool]:
        """Publish once per event ID (remembered in Redis for a day); one client and publisher per server."""
        with self._publish_lock:  # kombu's connections are not to be shared between threads unguarded
            if self._publisher is None:
                import redis

                from scriptorium.producers.publisher import Publisher

                assert self.settings.broker_url is not None
                self._redis = redis.Redis.from_url(self.settings.broker_url)
                self._publisher = Publisher(
                    self.settings.broker_url, spool=self.settings.state / "spool", prefix=self.settings.redis_prefix
                )
            key = f"{self.settings.redis_prefix}event:{event.event_id}"
            if not self._redis.set(key, event.event_id, nx=True, ex=SEEN_TTL_S):
                return event.event_id, True
            return self._publisher.publish(event), False

    def _service(self) -> Any:
        from scriptorium.composition import make_writer
        from scriptorium.writing.service import WriteService

        if self._runtime is None:
            writer, organizer = make_writer(self.settings)
            store = self.settings.session_store()
            self._runtime = WriteService(
                self.open_workspace(), store, writer, organizer, self.settings.write_settings()
            )
        return self._runtime

    def _run_pass(self, event: Event) -> None:
        from scriptorium.logs import get_logger

        log = get_logger(__name__)
        try:
            service = self._service()
            if event.type in ("turn.ended", "session.idle"):
                outcome = service.write(event.session_id, force=event.type == "session.idle")
            elif event.type == "session.head_moved":
                outcome = service.write(event.session_id, force=True, tips=[event.left] if event.left else None)
            elif event.type == "memory.reorganize":
                outcome = service.reorganize()
            else:
                outcome = service.backfill()
            log.info("event.done", event_id=event.event_id, ok=outcome.ok, reason=str(outcome.reason or ""))
        except Exception:
            log.exception("event.failed", event_id=event.event_id)

    # -- sessions ----------------------------------------------------------------------

    async def post_nodes(self, session_id: str, request: Request, caller: Caller) -> dict[str, Any]:
        self._memory_on()
        from scriptorium.sessions import (
            AUDIENCE_KEY,
            PARENT_KEY,
            SPAWN_KEY,
            WORKSPACE_KEY,
            audience_of,
            left_behind,
        )

        if len(session_id) > 200 or not _NAME.match(session_id):
            raise InvalidArgument("a session ID is 1-200 letters, digits, '.', '_', ':', '@' or '-'")
        body = parse_nodes(await request.body())
        if caller.requester is not None and body.audience not in (None, caller.requester):
            raise Forbidden(f"a token of {caller.requester} posts sessions of its own or shared ones")

        redactor = self.settings.redactor()
        if redactor is not None:  # the ID names the session's sources: what comes after sees only the redacted name
            session_id = redactor.name(session_id)

        def store_nodes() -> dict[str, Any]:
            # The requester's storage quota, before anything is stored (QUOTA_EXCEEDED: nothing is).
            runtime_quota(self.settings.state, self.settings.runtime_quota_bytes).charge(caller, _stored_size(body))
            store = self.settings.session_store()
            try:
                # Provider and title are set when the session is created, never changed after: the
                # provider is part of every archived source's path, so changing it would archive the
                # same turns again under another name.
                before = store.get_session(session_id)
                if before is None:
                    metadata: dict[str, Any] = {"provider": body.provider}
                    if body.title:
                        metadata["title"] = body.title
                    if body.parent_session_id:
                        metadata.update({PARENT_KEY: body.parent_session_id, SPAWN_KEY: body.spawn})
                    if body.audience:
                        metadata[AUDIENCE_KEY] = body.audience
                    metadata[WORKSPACE_KEY] = self._workspace_name()  # where the sweep writes it
                    store.create_session(session_id, metadata)
                else:
                    audience = audience_of(before)
                    if body.audience is not None and body.audience != audience:
                        raise InvalidArgument(
                            f"session {session_id} is {audience or 'shared'}: its audience is set by its first "
                            "batch and never changes"
                        )
                    if caller.requester is not None and audience not in (None, caller.requester):
                        raise Forbidden(f"session {session_id} belongs to another requester")
                added = store.add_nodes(body.to_nodes(session_id), head=body.head)
                session = store.get_session(session_id)
                left = None
                if before is not None and session is not None and session.head not in (None, before.head):
                    left = left_behind(store.node_parents(session_id), before.head, session.head)
            finally:
                store.close()
            if left is not None:  # the head jumped to another branch: write the one it left now, whole
                self._accept(HeadMoved(workspace=self._workspace_name(), session_id=session_id, left=left))
            head = session.head if session else None
            return {"session_id": session_id, "added": added, "head": head, "branch_left": left}

        return await run_in_threadpool(store_nodes)

    # -- reads -------------------------------------------------------------------------

    def get_core(self, caller: Caller) -> dict[str, Any]:
        from scriptorium.provider import effective_core
        from scriptorium.recall.branches import shared_view
        from scriptorium.recall.index import RecallIndex

        self._memory_on()
        ws = self.open_workspace()
        branches = shared_view(self.settings.session_store_url)
        index = RecallIndex.open(ws.root)
        text = effective_core(ws, index, branches, caller.viewer) if self.settings.core_inject else ""
        return {"revision": ws.revision, "inject": self.settings.core_inject, "effective": text}

    def search(
        self,
        caller: Caller,
        q: Annotated[str, Query(min_length=1, max_length=2000)],
        limit: Annotated[int, Query(ge=1, le=20)] = 5,
    ) -> dict[str, Any]:
        from scriptorium.recall.branches import shared_view
        from scriptorium.recall.index import RecallIndex

        self._memory_on()
        ws = self.open_workspace()
        branches = shared_view(self.settings.session_store_url)
        index = RecallIndex.open(ws.root)
        hits = index.search(q, limit, mode=self.settings.search_mode, branches=branches, viewer=caller.viewer)
        return {"query": q, "revision": ws.revision, "results": [hit.to_dict() for hit in hits]}

    # -- hooks -------------------------------------------------------------------------

    async def post_hook(
        self,
        request: Request,
        caller: Caller,
        core: Annotated[
            Literal["session-start", "first-prompt"],
            Query(
                description="Where the core goes: SessionStart's answer, or (no SessionStart hook: "
                "`setup --server`) the prompt that opens a session, after a compaction too"
            ),
        ] = "session-start",
    ) -> dict[str, Any]:
        from scriptorium.producers.opening import confined
        from scriptorium.runtimes.catalog import transcript_roots
        from scriptorium.runtimes.hooks.command import run_hook

        raw = await request.body()
        openings = self.openings if core == FIRST_PROMPT else None
        fields = _json_object(raw)
        event, session = fields.get("hook_event_name"), fields.get("session_id")
        if openings is not None and event == "PreCompact" and isinstance(session, str) and session:
            openings.compacted(session)  # now, not when the queued write runs: the next prompt may come first
        bound = caller.requester is not None
        # A requester's token reads only the transcript folders named when it was made (none: no transcript),
        # and appends only to that requester's sessions; other runtime tokens, the runtimes' own folders.
        if bound:
            roots = [Path(folder) for folder in caller.transcripts]
            named = [
                Path(p).expanduser()
                for key in ("transcript_path", "agent_transcript_path")
                if isinstance(p := fields.get(key), str) and p
            ]
            confined(named, roots)  # FORBIDDEN, with its reason, before anything is read
        else:
            roots = transcript_roots(self.settings.hook_transcript_roots)
        if event in WRITING_EVENTS:  # off the runtime's critical path: answered now, run in turn
            self._hook_writes().put(lambda: run_hook(raw, self.settings, roots, caller.requester, False, bound))
            return {}
        out = await run_in_threadpool(run_hook, raw, self.settings, roots, caller.requester, True, bound, openings)
        return json.loads(out) if out else {}

    def _hook_writes(self) -> WriteQueue:
        """The queue of writing hooks, started with the first (a serve no runtime posts to runs no thread)."""
        with self._writes_lock:
            if self._writes is None:
                from scriptorium.recall.index import RecallIndex

                settle_s, memory = self.settings.hook_write_settle_s, self.settings.memory_dir
                self._writes = WriteQueue(
                    self.settings.state,
                    name="serve-hook-writes",
                    settle_s=settle_s,
                    after=lambda: RecallIndex.refresh_after_writes(memory),
                )
            return self._writes


def _stored_size(body: NodesIn) -> int:
    """The bytes a batch of nodes asks the session store to keep: content, metadata, names, title."""
    strings = [body.title or "", body.provider, body.parent_session_id or ""]
    for node in body.nodes:
        strings += [node.content, node.id, node.parent_id or "", node.role or ""]
        if node.metadata:
            strings.append(json.dumps(node.metadata, ensure_ascii=False))
    return nodes_size(strings)
