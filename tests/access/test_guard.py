"""The requester guard's own promises (:mod:`scriptorium.access.guard`) that no attack test reads: what the
request's evidence says, and which refusals it leaves as they are."""

from __future__ import annotations

import pytest

from scriptorium.access.guard import EVIDENCE_LABEL, RequesterGuard, request_evidence
from scriptorium.audience import Principal
from scriptorium.changes.new_sources import NewSource
from scriptorium.changes.structured import Citation, CreateRecord, DeleteRecord, Destination
from scriptorium.errors import InvalidArgument, NotFound, ReasonCode, ScriptoriumError, ValidationRejected
from scriptorium.workspace import MemoryWorkspace

BOB = Principal("write", "bob")
CREATE = CreateRecord("Bob drinks oolong", None, (Citation("runtime/bob-s/bob-s-1", "tea"),), Destination("t.md"))


@pytest.mark.parametrize(
    ("message", "opening"),
    [("remember my tea", "bob (write) asked: remember my tea"), ("  \n", "bob (write) asked: a change")],
)
def test_the_request_evidence_quotes_the_requesters_message_and_what_it_writes(message: str, opening: str) -> None:
    arguments = request_evidence(BOB, message, {"memory_changes": [CREATE, DeleteRecord("m-000000000001")]})
    (evidence,) = arguments["new_sources"]
    assert isinstance(evidence, NewSource)
    assert evidence.text == f"{opening}\n\nBob drinks oolong"
    created, deleted = arguments["memory_changes"]
    assert created.sources == (*CREATE.sources, Citation(evidence.key, EVIDENCE_LABEL))
    assert deleted == DeleteRecord("m-000000000001"), "a delete cites nothing"


@pytest.mark.parametrize(
    "refused",
    [
        NotFound("no topic t.md"),
        ValidationRejected("t.md is not valid UTF-8", reason=ReasonCode.INVALID_TOPIC_FORMAT, rejected_text="t.md"),
        InvalidArgument("limit must be at least 1"),
    ],
    ids=lambda error: str(error.reason),
)
def test_a_refusal_that_quotes_no_record_reaches_the_requester_as_it_is(
    ws: MemoryWorkspace, refused: ScriptoriumError
) -> None:
    """Only a refused citation (INVALID_SOURCE) is rewritten, and one quoting a record the requester may not
    see; any other refusal keeps its type, message and rejected line (reasons sorting either side of
    INVALID_SOURCE)."""
    assert RequesterGuard(ws, BOB, 0).refusal(ws.snapshot(), refused) is refused
