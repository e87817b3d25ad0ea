"""A change request from anyone, decided by who sent it: one entry for REST, the model tools and MCP.

* the owner's is applied (or, with ``dry_run``, only validated);
* a ``write`` requester's is applied directly, within its audience (:mod:`scriptorium.access.scope`) and its
  storage quota (:mod:`scriptorium.access.quota`; refunded when the change fails after the charge);
* a ``propose`` requester's is validated as a dry run and held (:mod:`scriptorium.access.decisions`):
  nothing in the memory changes until the owner approves it.

Requesters send structured ``memory_changes`` only. The history names every requester: a direct write's
commit carries ``Requested-by``, an approval's ``Requested-by`` and ``Approved-by``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scriptorium.access.decisions import approve, hold, reject, sent_by
from scriptorium.access.guard import guarded, quoted_message
from scriptorium.access.scope import check_within
from scriptorium.access.tokens import TokenStore
from scriptorium.audience import Principal
from scriptorium.changes.new_sources import Origin
from scriptorium.changes.proposals import Proposal, ProposalStore
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import Forbidden, NotFound
from scriptorium.schemas.changes import ForgetRequest, UpdateRequest, parse_update
from scriptorium.workspace import MemoryWorkspace

CHANGE_SCOPES = ("owner", "propose", "write")


def submit(
    ws: MemoryWorkspace, body: UpdateRequest, principal: Principal, *, origin: Origin = "owner"
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, result): 200 with the transaction's result, or 202 with a held proposal.

    ``origin`` is the owner's entry point (``owner`` for REST and the CLI, ``model`` for the tools): what
    trust the request's new sources get. A requester's new sources are always pending, and its own.
    """
    if principal.scope == "owner":
        return 200, update_memory(ws, **body.arguments(), origin=origin).to_dict()
    if principal.scope not in CHANGE_SCOPES:
        raise Forbidden(f"a {principal.scope} token sends no changes")
    if body.memory_changes is None:
        raise Forbidden(
            "requesters send memory_changes: whole-topic changes and patches are the owner's",
            guidance="Express the change as create_record, update_record, delete_record and move_records.",
        )
    arguments = body.arguments()
    if principal.scope == "propose":
        proposal = hold(ws, ProposalStore(ws.root, ws.config.redactor), principal, request_json(body), arguments)
        return 202, {"held": True, **proposal_view(proposal, owner=False)}
    check_within(ws, arguments["memory_changes"], principal)
    arguments, guard = guarded(ws, principal, arguments)
    arguments["message"] = f"{quoted_message(arguments['message'])}\n\nRequested-by: {principal.name}"
    try:
        result = update_memory(ws, **arguments, origin="model", audience=principal.requester, guard=guard)
    except BaseException:
        guard.refund()  # refused or failed after the quota was charged: nothing was stored
        raise
    return 200, result.to_dict()


def request_json(body: UpdateRequest) -> dict[str, Any]:
    """The request as stored JSON values (what an approval parses again)."""
    return body.model_dump(mode="json", exclude_defaults=True)


def proposal_view(proposal: Proposal, *, owner: bool) -> dict[str, Any]:
    """A proposal as its requester sees it (its state and its own request), or, for the owner, whole."""
    whole = proposal.to_dict()
    if owner:
        return whole
    keep = ("id", "state", "created", "decided", "baseline_revision", "request", "dry_run", "refusal")
    return {key: whole[key] for key in keep}


class Proposals:
    """The hold queue of one served workspace, for the owner (everything) and requesters (their own)."""

    def __init__(self, ws: MemoryWorkspace, state: Path) -> None:
        self.ws = ws
        self.store = ProposalStore(ws.root, ws.config.redactor)
        self.tokens = TokenStore(state)

    def listed(self, principal: Principal, state: str | None = None) -> list[dict[str, Any]]:
        owner = principal.scope == "owner"
        found = self.store.list(principal.requester, everyone=owner)
        if not owner and principal.requester is None:  # a token without a requester: its own token's
            found = [p for p in self.store.list() if p.token_id == principal.token_id]
        live = {record.id for record in self.tokens.list()} if owner else set()
        out = []
        for proposal in found:
            if state is not None and proposal.state != state:
                continue
            view = proposal_view(proposal, owner=owner)
            if owner:
                view["token_revoked"] = proposal.token_id is not None and proposal.token_id not in live
            out.append(view)
        return out

    def one(self, principal: Principal, proposal_id: str) -> dict[str, Any]:
        """One proposal; a requester asking for another's gets NOT_FOUND."""
        proposal = self.store.get(proposal_id)
        owner = principal.scope == "owner"
        if not owner and not sent_by(proposal, principal):
            raise NotFound(f"no proposal {proposal_id!r}")
        return proposal_view(proposal, owner=owner)

    def approve(self, proposal_id: str, approver: Principal) -> dict[str, Any]:
        def revoked(token_id: str) -> bool:
            return token_id not in {record.id for record in self.tokens.list()}

        decided = approve(self.ws, self.store, proposal_id, approver, _arguments_of, revoked)
        return proposal_view(decided, owner=True)

    def reject(self, proposal_id: str, approver: Principal, why: str = "") -> dict[str, Any]:
        return proposal_view(reject(self.ws, self.store, proposal_id, approver, why), owner=True)


def _arguments_of(request: dict[str, Any]) -> dict[str, Any]:
    return parse_update(request).arguments()


def forget_request(ws: MemoryWorkspace, body: ForgetRequest, store_url: str) -> dict[str, Any]:
    """The owner's forget (REST, the page): the transaction, the store's erasure, and a purge when asked."""
    from scriptorium.changes.forget import Selection, forget
    from scriptorium.sessions import open_store
    from scriptorium.workspace.purge import purge_history

    selection = Selection(body.thread, body.session, tuple(body.sources))
    also = [c.core() for c in body.memory_changes]
    store = None if body.dry_run else open_store(store_url)
    try:
        payload = forget(ws, selection, why=body.why, also=also, dry_run=body.dry_run, store=store)
    finally:
        if store is not None:
            store.close()
    if body.purge_history:
        payload["purge"] = purge_history(ws, payload["paths"], dry_run=body.dry_run)
    return payload
