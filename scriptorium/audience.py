"""Who may see a record: audiences of sessions, sources and records, and the viewer asking.

A session belongs to one requester or is shared (the default). Its archived
sources carry that audience, and a record's audience is that of every source it
cites, folded into one string:

* ``""`` — every cited source is shared;
* ``"alice"`` — the only requester among them is ``alice``;
* ``"alice,bob"`` — sources of several requesters: no requester may see it all.

A :class:`Viewer` sees a record only when it may see every cited source (as trust
works: one pending source makes the whole record pending). The owner sees
everything; a requester sees the shared records and its own; a caller that is no
requester (a runtime token made without ``--requester``, a hook with no audience
configured) sees the shared ones.

A light module: the per-prompt hook imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

SHARED = ""


def fold(audiences: Iterable[str | None]) -> str:
    """One record's audience from its sources' (None or ``""``: shared), names sorted and distinct."""
    names = sorted({a for a in audiences if a})
    return ",".join(names)


def names(audience: str) -> list[str]:
    """The requesters a folded audience names (empty: shared)."""
    return audience.split(",") if audience else []


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who a read answers: the owner (``everything``), a requester, or nobody in particular (shared only)."""

    requester: str | None = None
    everything: bool = False

    def sees(self, audience: str) -> bool:
        """Whether a record (or source) of ``audience`` may be shown."""
        return self.everything or not audience or audience == self.requester

    @property
    def label(self) -> str:
        return "owner" if self.everything else (self.requester or "shared")


OWNER = Viewer(everything=True)
ANYONE = Viewer()
"""A caller that is no requester: the shared records only."""


def viewer_for(requester: str | None) -> Viewer:
    return Viewer(requester) if requester else ANYONE


Scope = Literal["owner", "runtime", "propose", "write"]
"""What a token lets its holder do (:mod:`scriptorium.access.tokens`): ``owner`` everything; ``runtime`` events,
sessions, the effective core and trusted search; ``propose`` search and held changes; ``write`` search and
changes applied directly, within its audience."""
TokenScope = Literal["runtime", "propose", "write"]
SCOPES: tuple[TokenScope, ...] = ("runtime", "propose", "write")
"""The scopes a scoped token may have (the owner's is none of them): here, not in :mod:`.tokens`, so that the
command line's parser offers them without loading the token store."""


@dataclass(frozen=True, slots=True)
class Principal:
    """The one a request speaks for: its scope, and for a scoped token its requester and ID."""

    scope: Scope
    requester: str | None = None
    token_id: str | None = None
    transcripts: tuple[str, ...] = ()
    """A requester's runtime token's transcript folders (:mod:`scriptorium.access.tokens`)."""

    @property
    def viewer(self) -> Viewer:
        """What this principal's reads may show: everything for the owner, else its own and shared records."""
        return OWNER if self.scope == "owner" else viewer_for(self.requester)

    @property
    def name(self) -> str:
        """How the history names it: ``owner``, or the requester (else the token) with its scope."""
        if self.scope == "owner":
            return "owner"
        return f"{self.requester or 'token ' + (self.token_id or '?')} ({self.scope})"


OWNER_PRINCIPAL = Principal("owner")
