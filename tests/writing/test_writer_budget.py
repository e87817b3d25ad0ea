"""A daily budget for the writers that cost money (:mod:`scriptorium.writing.budget`): past it a pass waits
(WRITER_BUDGET_SPENT, retryable, nothing stored) or the verbatim writer writes it, as the user chose; the day
rolls over at 00:00 UTC; charges from several processes add up; tokens are what the model reported."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scriptorium.errors import BudgetSpent, ReasonCode
from scriptorium.sessions import SessionStore
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.writer_history import WriterHistory
from scriptorium.writer_interface import Organizer, Writer
from scriptorium.writers.agent import agent_writer
from scriptorium.writers.agent_cli import CLAUDE_CODE, CODEX, AgentConfig
from scriptorium.writers.llm import LLMConfig, LLMOrganizer, LLMWriter
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.budget import BUDGET_FILE, BudgetLimits, Spend, WriterBudget
from scriptorium.writing.outcomes import NothingDue, Pending, Written
from scriptorium.writing.service import WriteService, WriteSettings
from tests.agent_fixtures import StandIns, standins
from tests.fake_openai import FakeOpenAI, serve, source_refs, tools
from tests.sessions_fixtures import chain

__all__ = ["standins"]

RUNTIME = ".scriptorium"
HISTORY = f"{RUNTIME}/history.jsonl"
"""The one file a refused pass adds to: the writer history says it waited, and why."""


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    yield from serve()


def cited_edit(body: dict[str, object]) -> dict[str, object]:
    refs = source_refs(body)  # type: ignore[arg-type]
    content = "# Trip\n\n" + "\n\n".join(f"2026-11-01: Fact from {r} [trip plan]({r})" for r in refs) + "\n"
    return {"tool_calls": [("write_topic", {"path": "topics/trips/plan.md", "content": content})]}


def llm_service(
    ws: MemoryWorkspace,
    store: SessionStore,
    fake: FakeOpenAI,
    limits: BudgetLimits,
    over_budget: tuple[Writer, Organizer] | None = None,
    clock: float | None = None,
) -> WriteService:
    config = LLMConfig(model="scripted-1", base_url=fake.base_url, timeout_s=10.0)
    settings = WriteSettings(trigger_tokens=0, budget=limits, over_budget=over_budget)
    writer, organizer = LLMWriter(lambda: config), LLMOrganizer(lambda: config)
    if clock is None:
        return WriteService(ws, store, writer, organizer, settings)
    return WriteService(ws, store, writer, organizer, settings, clock=lambda: clock)


def one_batch(fake: FakeOpenAI) -> None:
    """What the model answers to one batch: a cited edit, then commit_edits (two requests)."""
    fake.script += [cited_edit, tools(("commit_edits", {}))]


def more_turns(store: SessionStore) -> None:
    store.add_nodes(chain("s1", ["u3", "a3"], parent="a2", start=4), head="a3")


def stored(root: Path) -> dict[str, bytes]:
    """Every byte the workspace keeps — topics, sources, git's objects and refs, the runtime folder — but the
    writer history, which records every pass."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.relative_to(root).as_posix() != HISTORY
    }


def spend(ws: MemoryWorkspace) -> dict[str, object]:
    return json.loads((ws.root / RUNTIME / BUDGET_FILE).read_text())


def marks(store: SessionStore, ws: MemoryWorkspace, *nodes: str) -> list[bool]:
    return [store.get_node("s1", n).written_for(ws.key) for n in nodes]  # type: ignore[union-attr]


def test_past_the_days_runs_a_pass_waits_retryable_and_stores_nothing(
    ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI
) -> None:
    service = llm_service(ws, sessions, fake, BudgetLimits(runs=1, tokens=0))
    one_batch(fake)
    assert isinstance(service.write("s1", force=True), Written)  # the day's one run
    assert spend(ws)["runs"] == 1
    more_turns(sessions)
    asked, before = len(fake.requests), stored(ws.root)

    outcome = service.write("s1", force=True)

    assert isinstance(outcome, Pending) and outcome.retryable
    assert outcome.reason is ReasonCode.WRITER_BUDGET_SPENT and outcome.reason.retryable
    assert "1 of 1 runs" in outcome.message and "SCRIPTORIUM_WRITER_DAILY_RUNS" in outcome.message
    assert "00:00 UTC" in outcome.message and outcome.pending_nodes == 2
    assert len(fake.requests) == asked, "the model was not asked"
    assert stored(ws.root) == before, "no source archived, no topic, no commit, no charge"
    assert marks(sessions, ws, "u3", "a3") == [False, False]
    last = WriterHistory(ws.root / RUNTIME).recent(1)[0]
    assert last["reason"] == "WRITER_BUDGET_SPENT" and last["retryable"] and last["writer"] == "llm"


def test_the_tokens_cap_is_counted_from_what_the_model_reported(
    ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI
) -> None:
    service = llm_service(ws, sessions, fake, BudgetLimits(runs=0, tokens=4))
    one_batch(fake)  # two replies of 2 tokens each (the stand-in's usage)
    assert isinstance(service.write("s1", force=True), Written)
    assert (spend(ws)["runs"], spend(ws)["tokens"]) == (1, 4)
    more_turns(sessions)
    outcome = service.write("s1", force=True)
    assert outcome.reason is ReasonCode.WRITER_BUDGET_SPENT and "4 of 4 tokens" in outcome.message
    assert "SCRIPTORIUM_WRITER_DAILY_TOKENS" in outcome.message


def test_over_budget_verbatim_writes_the_pass_with_the_verbatim_writer(
    ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI
) -> None:
    service = llm_service(ws, sessions, fake, BudgetLimits(runs=1), (VerbatimWriter(), OfflineOrganizer()))
    one_batch(fake)
    assert isinstance(service.write("s1", force=True), Written)
    more_turns(sessions)
    asked = len(fake.requests)

    outcome = service.write("s1", force=True)

    assert isinstance(outcome, Written) and outcome.nodes_written == 2
    assert len(fake.requests) == asked, "the model was not asked"
    topics = [p for p in ws.snapshot().topics if p.startswith("topics/conversations/")]
    assert len(topics) == 1 and "a3: the assistant said" in ws.read_topic(topics[0])
    assert marks(sessions, ws, "u3", "a3") == [True, True]
    assert spend(ws)["runs"] == 1, "the verbatim writer is never charged"
    assert WriterHistory(ws.root / RUNTIME).recent(1)[0]["writer"] == "verbatim (over llm's budget)"


def test_the_verbatim_writer_is_never_capped(ws: MemoryWorkspace, sessions: SessionStore) -> None:
    WriterBudget(ws.root / RUNTIME, BudgetLimits(runs=1)).charge(5, 0)
    before = spend(ws)
    settings = WriteSettings(trigger_tokens=0, budget=BudgetLimits(runs=1))
    outcome = WriteService(ws, sessions, VerbatimWriter(), OfflineOrganizer(), settings).write("s1", force=True)
    assert isinstance(outcome, Written) and spend(ws) == before


def test_the_budget_starts_again_at_midnight_utc(ws: MemoryWorkspace, sessions: SessionStore, fake: FakeOpenAI) -> None:
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)  # past: no organize is due
    late, early = (midnight - timedelta(minutes=1)).timestamp(), (midnight + timedelta(minutes=1)).timestamp()
    yesterday = (midnight - timedelta(days=1)).date().isoformat()
    WriterBudget(ws.root / RUNTIME, BudgetLimits(), clock=lambda: late).charge(1, 0)

    refused = llm_service(ws, sessions, fake, BudgetLimits(runs=1), clock=late).write("s1", force=True)
    assert refused.reason is ReasonCode.WRITER_BUDGET_SPENT and "in 0 h 1 min" in refused.message

    one_batch(fake)
    outcome = llm_service(ws, sessions, fake, BudgetLimits(runs=1), clock=early).write("s1", force=True)
    assert isinstance(outcome, Written)
    assert spend(ws) == {"version": 1, "day": midnight.date().isoformat(), "runs": 1, "tokens": 4}
    budget = WriterBudget(ws.root / RUNTIME, BudgetLimits(runs=1), clock=lambda: late)
    assert budget.today() == Spend(yesterday), "a ledger of another day is nothing spent on this one"


def test_the_check_says_when_the_budget_starts_again_and_how_to_raise_it(tmp_path: Path) -> None:
    at = datetime(2026, 11, 1, 21, 30, tzinfo=UTC).timestamp()
    budget = WriterBudget(tmp_path, BudgetLimits(runs=2, tokens=0), clock=lambda: at)
    budget.charge(1, 10)
    budget.check()
    budget.charge(1, 10)
    with pytest.raises(BudgetSpent) as error:
        budget.check()
    assert error.value.retryable and "2026-11-01" in error.value.message
    assert "in 2 h 30 min" in error.value.guidance and "SCRIPTORIUM_WRITER_OVER_BUDGET=verbatim" in error.value.guidance
    assert budget.status() == {
        "day": "2026-11-01",
        "runs": 2,
        "runs_limit": 2,
        "tokens": 20,
        "tokens_limit": 0,
        "spent": True,
    }


CHARGER = """
import sys
from pathlib import Path
from scriptorium.writing.budget import BudgetLimits, WriterBudget

budget = WriterBudget(Path(sys.argv[1]), BudgetLimits())
sys.stdin.read()  # both start together
for _ in range(int(sys.argv[2])):
    budget.charge(1, 10)
"""


def test_charges_from_two_processes_at_once_are_all_counted(tmp_path: Path) -> None:
    each = 150
    procs = [
        subprocess.Popen([sys.executable, "-c", CHARGER, str(tmp_path), str(each)], stdin=subprocess.PIPE)
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()
    assert [proc.wait(timeout=120) for proc in procs] == [0, 0]
    spent = WriterBudget(tmp_path, BudgetLimits()).today()
    assert (spent.runs, spent.tokens) == (2 * each, 2 * each * 10)


PERSONA = {"claude-code": "claude", "codex": "codex"}
REPORTED = {"claude-code": 12 + 900 + 4000 + 310, "codex": 1200 + 300}
"""What the stand-ins report: Claude Code's result ``usage`` (input, cache writes, cache reads, output); Codex's
``turn.completed`` usage (input, its cached part counted in it, and output)."""


@pytest.mark.parametrize("backend", ["claude-code", "codex"])
def test_an_agent_run_is_charged_the_tokens_its_output_reports(
    ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns, backend: str
) -> None:
    standins.scenario(PERSONA[backend], "nothing")
    writer, organizer = agent_writer(backend, lambda: AgentConfig(timeout_s=20.0))
    service = WriteService(ws, sessions, writer, organizer, WriteSettings(budget=BudgetLimits(runs=1)))
    assert isinstance(service.reorganize(), NothingDue)  # the organizer ran, and changed nothing
    assert (spend(ws)["runs"], spend(ws)["tokens"]) == (1, REPORTED[backend])
    refused = service.reorganize()  # the nightly organize waits too
    assert refused.reason is ReasonCode.WRITER_BUDGET_SPENT and len(standins.calls(PERSONA[backend])) == 1


def test_the_backends_read_usage_from_failed_runs_too() -> None:
    claude = {"type": "result", "subtype": "success", "is_error": True, "result": "boom"}
    usage = {"input_tokens": 3, "cache_read_input_tokens": 7, "output_tokens": 1}
    assert CLAUDE_CODE.tokens(json.dumps({**claude, "usage": usage})) == 11
    assert CLAUDE_CODE.tokens(json.dumps(claude)) is None
    turns = [{"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 8, "output_tokens": 2}}]
    lines = "\n".join(json.dumps(e) for e in [{"type": "turn.started"}, *turns, *turns])
    assert CODEX.tokens(lines) == 24
    assert CODEX.tokens('{"type": "turn.failed"}') is None
