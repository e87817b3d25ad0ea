"""The hold queue: changes from ``propose`` requesters, kept until the owner approves or rejects them.

A proposal is the request as sent (the structured ``memory_changes`` as stored JSON values), who sent it
(requester, token, scope), the revision it was checked against and the dry run's result (the files and
the topics' diff it would make). It is one JSON file in the workspace's runtime folder
(``.scriptorium/proposals/<id>.json``), written atomically and fsynced: it survives restarts, and it is
never part of the memory's tree.

States: ``held`` → ``approved`` (applied through the normal transaction on the then-current revision),
``rejected`` (discarded), or ``stale`` (an approval was refused with a reason code — the change no longer
applies — and the proposal stays, to be rejected or approved again once it would apply).

Every decision is in the git history, naming the requester and the approver: an approval is the change's
own commit, a rejection an empty commit (the revision, a tree hash, does not move). They carry an
``Approved-proposal: <id>`` or ``Rejected-proposal: <id>`` trailer, so a decision whose process died
between its commit and its proposal file is found again, never applied twice.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from scriptorium.access.audience import Principal
from scriptorium.access.guard import guarded, quoted_message
from scriptorium.access.scope import check_within
from scriptorium.changes.structured import Change
from scriptorium.changes.update import update as update_memory
from scriptorium.errors import (
    InvalidArgument,
    NotFound,
    ProposalClosed,
    QuotaExceeded,
    ReasonCode,
    ScriptoriumError,
)
from scriptorium.formats import VERSION_KEY, read_versioned, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.sessions.model import map_strings
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.lock import FileLock
from scriptorium.workspace.paths import RUNTIME_DIR
from scriptorium.workspace.results import TextRedactor

ProposalState = Literal["held", "approved", "rejected", "stale"]
PROPOSALS_DIR = "proposals"
PROPOSAL_VERSION = 1
"""A proposal file's layout (:mod:`scriptorium.formats`): one a newer release wrote is refused."""
_ID = re.compile(r"^p-[0-9a-f]{12}$")
Arguments = Mapping[str, Any]
"""Keyword arguments of :func:`scriptorium.changes.update.update` (``memory_changes`` and the rest)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class Proposal:
    id: str
    requester: str | None
    token_id: str | None
    scope: str
    created: str
    baseline_revision: str
    request: dict[str, Any]
    """The request body as sent (JSON values: what approving applies)."""
    dry_run: dict[str, Any]
    """The dry run's result at ``baseline_revision``: changed files, created IDs, and the topics' ``diff`` as
    far as the requester may see it (:mod:`scriptorium.access.guard`)."""
    review_diff: str = ""
    """The same diff whole, for the owner's review (never shown to the requester)."""
    state: ProposalState = "held"
    decided: str | None = None
    decided_by: str | None = None
    result: dict[str, Any] | None = None
    """The approval's transaction result (revision, commit, created IDs)."""
    refusal: dict[str, Any] | None = None
    """Why the last approval was refused (``reason``, ``message``): the proposal is ``stale``."""
    why: str = ""
    """The owner's note with a rejection."""
    history: list[dict[str, str]] = field(default_factory=list)
    """Every decision, oldest first: ``{at, by, action}``."""

    @property
    def principal(self) -> Principal:
        return Principal("propose" if self.scope == "propose" else "write", self.requester, self.token_id)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ProposalStore:
    """The proposals of one workspace; with ``redactor``, a proposal is kept without the secrets its request
    or previews quote (approving it installs the redacted text, as the transaction would)."""

    def __init__(self, root: Path, redactor: TextRedactor | None = None) -> None:
        self.redactor = redactor
        self.folder = root / RUNTIME_DIR / PROPOSALS_DIR
        self._lock = FileLock(root / RUNTIME_DIR / "proposals.lock")

    def _path(self, proposal_id: str) -> Path:
        if not _ID.match(proposal_id):
            raise NotFound(f"no proposal {proposal_id!r}")
        return self.folder / f"{proposal_id}.json"

    @staticmethod
    def encode(proposal: Proposal) -> bytes:
        stored = versioned(proposal.to_dict(), PROPOSAL_VERSION)
        return (json.dumps(stored, ensure_ascii=False, indent=1, sort_keys=True) + "\n").encode("utf-8")

    def save(self, proposal: Proposal) -> None:
        if self.redactor is not None:
            text = self.redactor.text
            proposal = replace(
                proposal,
                request=map_strings(proposal.request, text),
                dry_run=map_strings(proposal.dry_run, text),
                review_diff=text(proposal.review_diff),
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write(self._path(proposal.id), self.encode(proposal), mode=0o600)

    def get(self, proposal_id: str) -> Proposal:
        try:
            path = self._path(proposal_id)
            raw = read_versioned(json.loads(path.read_text(encoding="utf-8")), PROPOSAL_VERSION, str(path))
        except FileNotFoundError:
            raise NotFound(f"no proposal {proposal_id!r}") from None
        return Proposal(**{k: v for k, v in raw.items() if k != VERSION_KEY})

    def raw(self, proposal_id: str) -> str:
        """The proposal's file as stored."""
        return self._path(proposal_id).read_text(encoding="utf-8")

    def list(self, requester: str | None = None, *, everyone: bool = True) -> list[Proposal]:
        """Every proposal (``everyone``), or only ``requester``'s; oldest first."""
        if not self.folder.is_dir():
            return []
        found = [self.get(p.stem) for p in self.folder.glob("p-*.json") if _ID.match(p.stem)]
        if not everyone:
            found = [p for p in found if p.requester == requester and requester is not None]
        return sorted(found, key=lambda p: (p.created, p.id))

    def deciding(self) -> FileLock:
        """Held while a proposal is decided: one decision at a time, across processes."""
        return self._lock


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
        created=_now(),
        baseline_revision=preview.revision,
        request=request,
        dry_run=preview.to_dict(),
        review_diff=guard.full_diff,
        history=[{"at": _now(), "by": principal.name, "action": "held"}],
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
                history=[*proposal.history, {"at": _now(), "by": approver.name, "action": f"refused: {exc.reason}"}],
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


ERASED_WHY = "withdrawn: it cited or quoted a forgotten conversation"


def erase_forgotten(store: ProposalStore, markers: Sequence[str], *, dry_run: bool = False) -> list[str]:
    """After a forget: every proposal whose file names a forgotten source or quotes a forgotten text
    (``markers``) loses its request, previews and results; one still open is closed (``rejected``, with
    :data:`ERASED_WHY`), so approving it can never bring the text back. Returns their IDs."""
    needles = {m for m in markers if m} | {json.dumps(m, ensure_ascii=False)[1:-1] for m in markers if m}
    affected: list[str] = []
    if not store.folder.is_dir():
        return affected
    with store.deciding().hold(timeout=30):
        for proposal in store.list():
            raw = store.raw(proposal.id)
            if not any(needle in raw for needle in needles):
                continue
            affected.append(proposal.id)
            if dry_run:
                continue
            still_open = proposal.state in ("held", "stale")
            store.save(
                replace(
                    proposal,
                    request={},
                    dry_run={},
                    review_diff="",
                    result=None,
                    refusal=None,
                    state="rejected" if still_open else proposal.state,
                    decided=_now() if still_open else proposal.decided,
                    decided_by="forget" if still_open else proposal.decided_by,
                    why=ERASED_WHY if still_open else proposal.why,
                    history=[*proposal.history, {"at": _now(), "by": "forget", "action": "erased"}],
                )
            )
    return affected


def _decided(
    proposal: Proposal, approver: Principal, state: ProposalState, *, result: dict[str, Any], why: str = ""
) -> Proposal:
    at = _now()
    return replace(
        proposal,
        state=state,
        decided=at,
        decided_by=approver.name,
        result=result,
        why=why,
        history=[*proposal.history, {"at": at, "by": approver.name, "action": state}],
    )
