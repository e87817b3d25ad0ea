"""The owner's decisions on the hold queue: a ``propose`` requester's change checked and held, then
approved through the normal transaction or rejected (:mod:`scriptorium.changes.proposals` keeps the files).

Access's half of the queue: holding and approving check the change within the requester's scope
(:mod:`scriptorium.access.scope`) and guard what it may see (:mod:`scriptorium.access.guard`), so this
lives beside them and the store below in ``changes`` imports nothing of access.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from scriptorium.access.guard import guarded, quoted_message
from scriptorium.access.scope import check_within
from scriptorium.audience import Principal
from scriptorium.changes.proposals import Arguments, Proposal, ProposalState, ProposalStore, now
from scriptorium.changes.structured import Change
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import InvalidArgument, ProposalClosed, QuotaExceeded, ReasonCode, ScriptoriumError
from scriptorium.workspace import MemoryWorkspace

OPEN_PER_REQUESTER = 100
"""Open (held or stale) proposals one requester may have waiting for the owner."""
MAX_PROPOSAL_BYTES = 1024 * 1024
"""The largest proposal kept (its file: the request, the previews and the owner's diff)."""


def sent_by(proposal: Proposal, principal: Principal) -> bool:
    """Whether ``principal`` sent ``proposal`` (its requester, or for a token without one, that token)."""
    if principal.requester is not None:
        return proposal.requester == principal.requester
    return proposal.token_id is not None and proposal.token_id == principal.token_id


def _check_quota(store: ProposalStore, principal: Principal, open_limit: int) -> None:
    mine = [
        p
        for p in store.list()
        if p.state in ("held", "stale")
        and (
            p.requester == principal.requester if principal.requester is not None else p.token_id == principal.token_id
        )
    ]
    if len(mine) >= open_limit:
        raise QuotaExceeded(
            f"{principal.name} already has {len(mine)} open proposals, the most it may have waiting",
            guidance="Wait until the owner approves or rejects some of them.",
        )


def hold(
    ws: MemoryWorkspace,
    store: ProposalStore,
    principal: Principal,
    request: dict[str, Any],
    arguments: Arguments,
    *,
    open_limit: int = OPEN_PER_REQUESTER,
    max_bytes: int = MAX_PROPOSAL_BYTES,
) -> Proposal:
    """Check a ``propose`` requester's change as a dry run and hold it; nothing in the memory changes.

    A requester has at most ``open_limit`` proposals open (``QUOTA_EXCEEDED``, 429) and each is kept in at
    most ``max_bytes`` (``PAYLOAD_TOO_LARGE``, 413): the hold queue is the owner's to read, not a store.

    A change that could never apply is refused now, with its reason code (nothing is held).
    """
    changes: list[Change] | None = arguments.get("memory_changes")
    if changes is None:
        raise InvalidArgument("a proposal carries memory_changes")
    _check_quota(store, principal, open_limit)
    check_within(ws, changes, principal)
    checked, guard = guarded(ws, principal, dict(arguments))
    preview = update_memory(
        ws, **{**checked, "dry_run": True}, origin="model", audience=principal.requester, guard=guard
    )
    proposal = Proposal(
        id=f"p-{secrets.token_hex(6)}",
        requester=principal.requester,
        token_id=principal.token_id,
        scope=principal.scope,
        created=now(),
        baseline_revision=preview.revision,
        request=request,
        dry_run=preview.to_dict(),
        review_diff=guard.full_diff,
        history=[{"at": now(), "by": principal.name, "action": "held"}],
    )
    size = len(store.encode(proposal))
    if size > max_bytes:
        raise QuotaExceeded(
            f"the proposal would take {size} bytes to keep, over the {max_bytes} a proposal may",
            reason=ReasonCode.PAYLOAD_TOO_LARGE,
            guidance="Split the change into smaller proposals.",
        )
    with store.deciding().hold(timeout=30):
        _check_quota(store, principal, open_limit)  # again: two requests may have raced past the first check
        store.save(proposal)
    return proposal


def _trailers(proposal: Proposal, approver: Principal, state: ProposalState) -> str:
    verb = "Approved" if state == "approved" else "Rejected"
    return f"{verb}-proposal: {proposal.id}\nRequested-by: {proposal.principal.name}\n{verb}-by: {approver.name}"


def _open_for_decision(ws: MemoryWorkspace, store: ProposalStore, proposal_id: str, approver: Principal) -> Proposal:
    """The proposal, if it is still to be decided: one whose decision reached git but not its file is
    completed from the commit first (and then refused as decided)."""
    proposal = store.get(proposal_id)
    if proposal.state in ("held", "stale"):
        for state in ("approved", "rejected"):
            done = ws.git.commits_saying(f"{'Approved' if state == 'approved' else 'Rejected'}-proposal: {proposal.id}")
            if done:
                proposal = _decided(proposal, approver, state, result={"commit": done[0], "recovered": True})
                store.save(proposal)
                break
    if proposal.state in ("approved", "rejected"):
        raise ProposalClosed(f"proposal {proposal.id} is {proposal.state} already")
    return proposal


def approve(
    ws: MemoryWorkspace,
    store: ProposalStore,
    proposal_id: str,
    approver: Principal,
    arguments_of: Callable[[dict[str, Any]], Arguments],
    revoked: Callable[[str], bool] = lambda _token: False,
) -> Proposal:
    """Apply a held (or stale) proposal through the normal transaction on the current revision.

    Refused with its reason code when it no longer applies; the proposal then stays, marked ``stale``.
    A proposal whose token was revoked is not applied (REQUESTER_REVOKED): reject it, or send the change
    as the owner.
    """
    with store.deciding().hold(timeout=30):
        proposal = _open_for_decision(ws, store, proposal_id, approver)
        if proposal.token_id is not None and revoked(proposal.token_id):
            raise ProposalClosed(
                f"the token that sent proposal {proposal.id} was revoked",
                reason=ReasonCode.REQUESTER_REVOKED,
                guidance="Reject it, or make the change yourself.",
            )
        arguments = dict(arguments_of(proposal.request))
        arguments.pop("expected_revision", None)  # applied on the current revision
        arguments.pop("dry_run", None)
        subject = quoted_message(arguments.pop("message", "") or "Proposed change")
        message = f"{subject}\n\n{_trailers(proposal, approver, 'approved')}"
        try:
            check_within(ws, arguments["memory_changes"], proposal.principal)
            arguments, guard = guarded(ws, proposal.principal, arguments)
            result = update_memory(
                ws, **arguments, message=message, origin="model", audience=proposal.requester, guard=guard
            )
        except ScriptoriumError as exc:
            if exc.retryable:  # a held lock or a moved revision: try again, nothing is stale
                raise
            stale = replace(
                proposal,
                state="stale",
                refusal={"reason": str(exc.reason), "message": exc.message},
                history=[*proposal.history, {"at": now(), "by": approver.name, "action": f"refused: {exc.reason}"}],
            )
            store.save(stale)
            raise
        decided = _decided(proposal, approver, "approved", result=result.to_dict())
        store.save(decided)
        return decided


def reject(ws: MemoryWorkspace, store: ProposalStore, proposal_id: str, approver: Principal, why: str = "") -> Proposal:
    """Discard a held (or stale) proposal; the memory does not change, the history records the decision."""
    with store.deciding().hold(timeout=30):
        proposal = _open_for_decision(ws, store, proposal_id, approver)
        commit = ws.commit_note(f"Reject proposal {proposal.id}\n\n{_trailers(proposal, approver, 'rejected')}")
        decided = _decided(proposal, approver, "rejected", result={"commit": commit}, why=why)
        store.save(decided)
        return decided


def _decided(
    proposal: Proposal, approver: Principal, state: ProposalState, *, result: dict[str, Any], why: str = ""
) -> Proposal:
    at = now()
    return replace(
        proposal,
        state=state,
        decided=at,
        decided_by=approver.name,
        result=result,
        why=why,
        history=[*proposal.history, {"at": at, "by": approver.name, "action": state}],
    )
