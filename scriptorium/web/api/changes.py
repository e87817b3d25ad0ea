"""Changing the memory: changes (applied, applied within a requester's audience, or held), the core's
compare-and-set save, the hold queue (listed, read, approved, rejected) and forgetting."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from scriptorium.access.requests import Proposals, forget_request, submit
from scriptorium.changes.update import update as update_memory
from scriptorium.schemas.api import ForgetResult, HeldProposal, Proposal, ProposalList, TransactionResult
from scriptorium.schemas.changes import CoreSave, ForgetRequest, Rejection, UpdateRequest
from scriptorium.web.api.served import OWNER, PROPOSAL, RECORD, REQUESTERS, ServedSettings, Workspace, declared, link
from scriptorium.web.auth import Caller
from scriptorium.web.errors import WRITE_ERRORS
from scriptorium.workspace import TopicChange
from scriptorium.workspace.paths import CORE_SOURCE

router = APIRouter()


def _proposal_links(pointer: str, suffix: str = "") -> dict[str, Any]:
    """Links to the proposal whose ID is at ``pointer`` in the response: read it, approve it, reject it."""
    where = f"$response.body#{pointer}"
    return {
        f"Proposal{suffix}": link(PROPOSAL, "get", proposal_id=where),
        f"Approve{suffix}": link(f"{PROPOSAL}/approve", "post", proposal_id=where),
        f"Reject{suffix}": link(f"{PROPOSAL}/reject", "post", proposal_id=where),
    }


_CHANGED: dict[int | str, dict[str, Any]] = {
    200: {
        "model": TransactionResult,
        "description": "Applied (or, with dry_run, validated): the revision, the created IDs, the diff",
        "links": {
            "CreatedRecord": link(RECORD, "get", memory_id="$response.body#/created_ids/0"),
            "CreatedRecordProvenance": link(f"{RECORD}/provenance", "get", memory_id="$response.body#/created_ids/0"),
        },
    },
    202: {
        "model": HeldProposal,
        "description": "Held: the proposal (a propose token's change), with its dry run",
        "links": _proposal_links("/id"),
    },
}
_LISTED: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The proposals the caller may see, oldest first",
        "links": _proposal_links("/proposals/0/id", "First"),
    }
}


@router.post("/api/memory/changes", response_model=TransactionResult, **declared(REQUESTERS, WRITE_ERRORS, _CHANGED))
def post_changes(body: UpdateRequest, ws: Workspace, caller: Caller) -> JSONResponse:
    """Apply memory_changes, whole-topic changes or a unified diff (exactly one; requesters send
    memory_changes only). A write token's change applies within its audience; a propose token's is
    validated as a dry run and held (202 with the proposal)."""
    status, result = submit(ws, body, caller)
    answer = HeldProposal if status == 202 else TransactionResult
    answer.model_validate(result)  # as its model says (a JSONResponse is not checked against the route's)
    return JSONResponse(result, status_code=status)


@router.put("/api/memory/core", response_model=TransactionResult, **declared(OWNER, WRITE_ERRORS))
def put_core(body: CoreSave, ws: Workspace) -> dict[str, Any]:
    """Save ``topics/core.md`` only if the workspace is still at ``expected_revision``."""
    exists = CORE_SOURCE in ws.snapshot().topic_shas
    change = TopicChange(CORE_SOURCE, "update" if exists else "create", body.content)
    return dict(
        update_memory(ws, changes=[change], message="Edit core", expected_revision=body.expected_revision).to_dict()
    )


@router.get("/api/memory/proposals", response_model=ProposalList, **declared(REQUESTERS, answers=_LISTED))
def list_proposals(
    ws: Workspace,
    caller: Caller,
    settings: ServedSettings,
    state: Literal["held", "approved", "rejected", "stale"] | None = None,
) -> dict[str, Any]:
    """The hold queue: every proposal for the owner, a requester's own for a requester."""
    return {"proposals": Proposals(ws, settings.state).listed(caller, state)}


@router.get("/api/memory/proposals/{proposal_id}", response_model=Proposal, **declared(REQUESTERS))
def get_proposal(proposal_id: str, ws: Workspace, caller: Caller, settings: ServedSettings) -> dict[str, Any]:
    return Proposals(ws, settings.state).one(caller, proposal_id)


@router.post("/api/memory/proposals/{proposal_id}/approve", response_model=Proposal, **declared(OWNER, WRITE_ERRORS))
def approve_proposal(proposal_id: str, ws: Workspace, caller: Caller, settings: ServedSettings) -> dict[str, Any]:
    """Apply a held proposal on the current revision (refused with its reason code when it no longer
    applies: the proposal stays, marked stale)."""
    return Proposals(ws, settings.state).approve(proposal_id, caller)


@router.post("/api/memory/proposals/{proposal_id}/reject", response_model=Proposal, **declared(OWNER, WRITE_ERRORS))
def reject_proposal(
    proposal_id: str, ws: Workspace, caller: Caller, settings: ServedSettings, body: Rejection | None = None
) -> dict[str, Any]:
    """Discard a proposal: the memory does not change; the history records the decision."""
    return Proposals(ws, settings.state).reject(proposal_id, caller, body.why if body else "")


@router.post("/api/memory/forget", response_model=ForgetResult, **declared(OWNER, WRITE_ERRORS))
def post_forget(body: ForgetRequest, ws: Workspace, settings: ServedSettings) -> dict[str, Any]:
    """Forget a conversation or some sources for real: records citing only them deleted, others losing
    those citations, the sources redacted to tombstones, derived state and the session store's copy
    erased; ``purge_history`` also rewrites git history. ``dry_run`` lists what would go."""
    return forget_request(ws, body, settings.session_store_url)
