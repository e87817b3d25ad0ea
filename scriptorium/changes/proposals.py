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
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from scriptorium.audience import Principal
from scriptorium.errors import (
    NotFound,
)
from scriptorium.formats import VERSION_KEY, read_versioned, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.sessions.model import map_strings
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


def now() -> str:
    """The time a proposal's history records, to the second, in UTC."""
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
                    decided=now() if still_open else proposal.decided,
                    decided_by="forget" if still_open else proposal.decided_by,
                    why=ERASED_WHY if still_open else proposal.why,
                    history=[*proposal.history, {"at": now(), "by": "forget", "action": "erased"}],
                )
            )
    return affected
