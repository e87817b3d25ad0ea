"""What a requester's change does, checked after normalization, and what its preview may show.

:func:`~scriptorium.access.scope.check_within` refuses a request by its fields (the records it names, the
sources it lists). That is not enough: a record's text can carry an inline citation, a heading can carry
a line break, a rendered topic can hold more records than the request created. The transaction hands
this guard its validated plan (the topics exactly as they would be installed), and the guard refuses
what a requester may not do, whatever the request said:

* a ``write`` token's change (applied with no owner's decision) leaves ``topics/core.md`` alone, the
  owner's: it is every runtime's resident block;
* the records the change creates are exactly the ones it asked for;
* every record it changes, moves or deletes is one the requester may see, and for a ``write`` token one
  that is its own alone;
* every source a created or changed record cites, and every record it links to, is one the requester may
  see; one it may not is refused exactly as one that does not exist;
* every record a ``write`` token creates or changes carries the requester's own audience (the request
  itself is archived as the requester's pending evidence and cited: :func:`request_evidence`);
* last, a ``write`` token's change (not a dry run) is charged to its requester's storage quota, the bytes
  of every file the plan puts in the tree (:mod:`scriptorium.access.quota`).

The dry run's diff shows only what the requester may see: the records it may see, the headings above
them and their citations; never another requester's lines, labels or source paths, and never whether a
topic it sees nothing of exists (such a side of the diff is ``/dev/null``, as for a topic that is not
there). The owner's full diff is kept beside it (:attr:`RequesterGuard.full_diff`) for the owner's review
of a held proposal.
"""

from __future__ import annotations

import difflib
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from scriptorium.access.quota import Charge, StorageQuota, write_quota
from scriptorium.access.scope import source_audience
from scriptorium.audience import Principal, fold
from scriptorium.changes.new_sources import NewSource
from scriptorium.changes.structured import Change, Citation, CreateRecord, UpdateRecord
from scriptorium.errors import Forbidden, InvalidArgument, NotFound, ReasonCode, ScriptoriumError, ValidationRejected
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.blocks import split_record_line
from scriptorium.workspace.paths import CORE_SOURCE, TOPICS, LookAlikePath, source_identity_from_path
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.topics import ParsedTopic, Record
from scriptorium.workspace.transaction import Plan

_NOTE_LABEL = re.compile(r"^\[\^([^\]\s]+)\]:")
_TRAILER = re.compile(r"^\s*[A-Za-z][A-Za-z0-9-]*\s*:")
EVIDENCE_LABEL = "request"


def request_evidence(principal: Principal, message: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with the request archived as the requester's own evidence and cited by every record it
    creates or rewrites, so that such a record carries the requester's audience (and is pending) even
    when every other source it cites is shared."""
    changes: Sequence[Change] = arguments["memory_changes"]
    texts = [c.content.strip() for c in changes if isinstance(c, CreateRecord | UpdateRecord)]
    if not texts:
        return arguments
    key = f"new-source-request-{uuid.uuid4().hex[:12]}"
    text = f"{principal.name} asked: {message.strip() or 'a change'}\n\n" + "\n\n".join(texts)
    cite = Citation(key, EVIDENCE_LABEL)
    cited = [
        replace(c, sources=(*c.sources, cite)) if isinstance(c, CreateRecord | UpdateRecord) else c for c in changes
    ]
    evidence = [*arguments.get("new_sources", ()), NewSource(key, text)]
    return {**arguments, "memory_changes": cited, "new_sources": evidence}


def quoted_message(message: str) -> str:
    """A requester's commit message with every line that reads as a git trailer (``Approved-proposal: …``)
    quoted: trailers are the runtime's own, and the history trusts them (a decision found by its trailer
    is never applied twice)."""
    return "\n".join(f"> {line}" if _TRAILER.match(line) else line for line in message.split("\n"))


def guarded(
    ws: MemoryWorkspace, principal: Principal, arguments: dict[str, Any]
) -> tuple[dict[str, Any], RequesterGuard]:
    """A requester's ``memory_changes`` arguments with its request evidence, and the guard to run them with."""
    creates = sum(isinstance(c, CreateRecord) for c in arguments["memory_changes"])
    applied = principal.scope == "write" and not arguments.get("dry_run")
    guard = RequesterGuard(ws, principal, creates, write_quota(ws) if applied else None)
    if not guard.direct:
        return arguments, guard
    return request_evidence(principal, arguments.get("message", ""), arguments), guard


class RequesterGuard:
    """The plan guard of one requester's change (see the module docs)."""

    def __init__(
        self, ws: MemoryWorkspace, principal: Principal, creates: int, quota: StorageQuota | None = None
    ) -> None:
        self.ws = ws
        self.principal = principal
        self.viewer = principal.viewer
        self.creates = creates
        self.direct = principal.scope == "write"
        """A ``write`` token's change, applied with no owner's decision: the core is out of its reach, and
        what it writes is its own. A ``propose`` token's change reaches the memory only by the owner's
        approval, which may put it anywhere."""
        self.full_diff = ""
        """The unfiltered diff of the last dry run (the owner's, to review a held proposal)."""
        self._sources: dict[str, str | None] = {}
        self.quota = quota
        """The requester's storage quota, charged what the checked plan would commit (a change applied)."""
        self.charged: Charge | None = None

    def _source(self, path: str) -> str | None:
        """A source's audience ("" shared), None when it is not archived."""
        if path not in self._sources:
            self._sources[path] = source_audience(self.ws, path)  # None: missing or unreadable, citable by none
        return self._sources[path]

    def audience(self, snap: Snapshot, record: Record) -> str:
        return fold(self._source(path) for path in snap.topics[record.topic].cited_paths(record))

    def sees(self, snap: Snapshot, record: Record) -> bool:
        return self.viewer.sees(self.audience(snap, record))

    def refusal(self, base: Snapshot, refused: ScriptoriumError) -> ScriptoriumError:
        """What a refusal may tell this requester. One quoting a record it may not see names none (no text,
        no topic, no ID). A refused citation quotes no line: the normalizer quotes the line as sent, and
        :meth:`check` could only quote it as normalized, which would tell a source this requester may not
        cite from one that does not exist. A new topic named like an existing one is refused naming neither
        (but the core): the other may be a topic this requester sees nothing of."""
        if isinstance(refused, LookAlikePath):
            return refused.unnamed
        if refused.reason == ReasonCode.INVALID_SOURCE:
            return ValidationRejected(
                refused.message, reason=refused.reason, guidance=refused.guidance, path=refused.path
            )
        hidden = [bid for bid in refused.quotes if (rec := base.record(bid)) is None or not self.sees(base, rec)]
        if not hidden:
            return refused
        message = refused.message
        for bid in hidden:
            message = message.replace(f"^{bid}", "a record you cannot see")
        return type(refused)(message, reason=refused.reason, guidance=refused.guidance)

    def check(self, plan: Plan) -> None:
        base, staged = plan.base, plan.staged
        topics = sorted(p for p in plan.files if p.startswith(f"{TOPICS}/"))
        if self.direct and CORE_SOURCE in topics:
            raise Forbidden(
                f"{CORE_SOURCE} is the owner's: it is every runtime's resident block",
                guidance="Put the record in another topic; the owner may move it into the core.",
            )
        before = {r.memory_id: r for p in topics if p in base.topics for r in base.topics[p].records}
        after = {r.memory_id: r for p in topics if p in staged.topics for r in staged.topics[p].records}
        created = [mid for mid in after if base.record(mid) is None]
        if len(created) != self.creates:
            raise InvalidArgument(
                f"the change would create {len(created)} record(s) where it asks for {self.creates}: a record's "
                "content and headings are one line of text each, with no Markdown structure"
            )
        touched = [mid for mid, old in before.items() if _differs(base, old, staged, after.get(mid))]
        touched += [mid for mid in after if mid not in before and mid not in created]  # moved in
        for mid in touched:
            old = base.record(mid)
            assert old is not None
            audience = self.audience(base, old)
            if not self.viewer.sees(audience):
                raise NotFound(f"no record ^{mid}")
            if self.principal.scope == "write" and audience != self.principal.requester:
                raise Forbidden(
                    f"record ^{mid} is {'shared' if not audience else 'not yours alone'}: a write token changes "
                    "only its requester's own records",
                    guidance="Send the change with a propose token: the owner approves or rejects it.",
                )
        for mid in [*created, *(m for m in touched if m in after)]:
            self._check_new(staged, after[mid])
        if self.quota is not None:  # last: a change refused for anything else costs nothing
            self.charged = self.quota.charge(self.principal, plan_bytes(plan))

    def refund(self) -> None:
        """Take back the quota charged for a change that failed after its check."""
        if self.quota is not None:
            self.quota.refund(self.charged)
            self.charged = None

    def _check_new(self, staged: Snapshot, record: Record) -> None:
        for path in staged.topics[record.topic].cited_paths(record):
            audience = self._source(path)
            if audience is None or not self.viewer.sees(audience):
                identity = "/".join(source_identity_from_path(path) or (path,))
                # As the normalizer refuses a source that is not archived.
                raise ValidationRejected(
                    f"cited source {identity} is not in the archive",
                    reason=ReasonCode.INVALID_SOURCE,
                    guidance="Cite only archived sources, written as [short keyword](provider/thread/message).",
                    path=record.topic,  # and no line, as refusal() gives the normalizer's
                )
        for target in record.links:
            linked = staged.record(target)
            if linked is not None and not self.sees(staged, linked):
                # Word for word the transaction's refusal of a link to a record that does not exist.
                raise ValidationRejected(
                    f"record ^{record.memory_id} links to ^{target}, which does not exist",
                    reason=ReasonCode.DANGLING_LINK,
                    guidance="Link only to existing records, as [[topics/path#^id]].",
                    rejected_text=f"^{record.memory_id} → ^{target}",
                    path=record.topic,
                )
        if self.direct and self.audience(staged, record) != (self.principal.requester or ""):
            raise Forbidden(f"record ^{record.memory_id} would not be {self.viewer.label}'s own")

    def topics_diff(self, plan: Plan, read_blob: Callable[[str], bytes]) -> str:
        self.full_diff = plan.topics_diff(read_blob)
        chunks: list[str] = []
        for path in sorted(p for p in plan.files if p.startswith(f"{TOPICS}/")):
            old = plan.base.topics.get(path)
            new = plan.staged.topics.get(path) if plan.files[path] is not None else None
            before = self._visible(plan.base, old) if old is not None else []
            after = self._visible(plan.staged, new) if new is not None else []
            # A side with nothing this requester may see is /dev/null, whether or not the file is there: a topic
            # of others' records alone is, to it, no topic (its name may carry a private session's title).
            names = (f"a/{path}" if before else "/dev/null", f"b/{path}" if after else "/dev/null")
            chunks += difflib.unified_diff(before, after, *names)
        return "".join(chunks)

    def _visible(self, snap: Snapshot, topic: ParsedTopic) -> list[str]:
        """The lines of ``topic`` this requester may see: its visible records, the headings above them, and the
        footnote definitions they use."""
        out: list[str] = []
        chain: list[tuple[int, str, bool]] = []  # (level, line, already shown)
        kept: list[str] = []
        records = {r.memory_id: r for r in topic.records}
        notes: list[tuple[str, str]] = []
        for block in topic.blocks:
            if block.kind == "heading":
                while chain and chain[-1][0] >= block.level:
                    chain.pop()
                chain.append((block.level, block.lines[0], False))
            elif block.kind == "record":
                ids = split_record_line(block.lines[-1])[1]
                record = records.get(ids[0]) if ids else None
                if record is None or not self.sees(snap, record):
                    continue
                for index, (level, line, shown) in enumerate(chain):
                    if not shown:
                        out += [line + "\n", "\n"]
                        chain[index] = (level, line, True)
                out += [line + "\n" for line in block.lines] + ["\n"]
                kept += block.lines
            elif block.kind == "footnote" and (label := _NOTE_LABEL.match(block.lines[0])):
                notes.append((label.group(1), "".join(line + "\n" for line in block.lines)))
        text = "\n".join(kept)
        out += [body for label, body in notes if f"[^{label}]" in text]
        return out


def plan_bytes(plan: Plan) -> int:
    """What a plan would add to git: the bytes of every file it puts in the tree."""
    return sum(len(data) for data in plan.files.values() if data is not None)


def _differs(base: Snapshot, old: Record, staged: Snapshot, new: Record | None) -> bool:
    if new is None:
        return True
    if (old.text, old.date, old.headings, old.links, old.block_ids) != (
        new.text,
        new.date,
        new.headings,
        new.links,
        new.block_ids,
    ):
        return True
    return base.topics[old.topic].cited_paths(old) != staged.topics[new.topic].cited_paths(new)
