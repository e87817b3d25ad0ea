"""The per-prompt recall a runtime receives: packed into its character budget, excerpts around the prompt's
words, each place written once, best first; what the asking session holds left out."""

from __future__ import annotations

import re
from pathlib import Path

from scriptorium.recall.context import EXCERPT_CHARS, RECALL_BUDGET_CHARS, pack_hits, wrap_memory_context
from scriptorium.recall.index import RecallIndex
from scriptorium.recall.prompt import prompt_recall
from scriptorium.recall.records import Hit
from scriptorium.recall.text import snippet
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import message

IDS = re.compile(r"\^(m-[0-9a-z]+|x\d+)")


def hit(memory_id: str, topic: str, text: str, date: str | None = "2026-11-20") -> Hit:
    return Hit(memory_id, topic, ("Heading",), date, text, 1.0, "trusted")


def test_packing_keeps_rank_order_writes_each_place_once_and_stays_within_the_budget() -> None:
    hits = [
        hit("x1", "topics/a.md", "first about ferries"),
        hit("x2", "topics/b.md", "second about ferries"),
        hit("x3", "topics/a.md", "third about ferries"),
        hit("x4", "topics/c.md", "x" * 500),  # too long for what is left: skipped
        hit("x5", "topics/d.md", "fifth, short"),
    ]
    text = pack_hits(hits, lambda t: t, budget=len(wrap_memory_context("recall", "")) + 210)
    assert len(text) <= len(wrap_memory_context("recall", "")) + 210
    assert IDS.findall(text) == ["x1", "x3", "x2", "x5"], text  # a's two together, in the rank of its first
    assert text.count("topics/a.md › Heading (2026-11-20)") == 1
    assert pack_hits(hits, lambda t: t, budget=10) == "", "nothing fits: nothing at all, not an empty wrapper"
    assert pack_hits([], lambda t: t) == ""


def test_a_conversation_is_named_by_its_title_alone_so_more_records_fit() -> None:
    """A conversation topic's path is a date and its title again: the recall names it by the title (with the
    record's date), and in the same budget holds more records than it would under the path."""
    topic = "topics/conversations/2026-11/2026-11-20-moving-the-ferry-timetable-to-the-new-harbour-office.md"
    hits = [
        Hit(
            f"x{n}",
            topic.replace("ferry", f"ferry-{n}"),
            ("Moving the ferry timetable",),
            "2026-11-20",
            f"ferry {n}",
            1.0,
            "trusted",
        )
        for n in range(12)
    ]
    budget = len(wrap_memory_context("recall", "")) + 500
    text = pack_hits(hits, lambda t: t, budget=budget)
    assert "Moving the ferry timetable (2026-11-20)\n- ferry 0 ^x0" in text and "topics/" not in text, text
    assert len(IDS.findall(text)) == 12
    other = pack_hits([hit("x1", "topics/ferries.md", "ferry 1")], lambda t: t)
    assert "topics/ferries.md › Heading (2026-11-20)" in other, "any other topic keeps its path"


def test_an_excerpt_starts_at_a_word_and_holds_the_first_word_the_prompt_asked_about() -> None:
    text = "Long before anything else happened " * 5 + "the harbour master moved the ferry to Oban " + "z" * 200
    piece = snippet(text, {"ferri"}, EXCERPT_CHARS)
    assert "ferry" in piece and len(piece) <= EXCERPT_CHARS + 2  # the two ellipses
    assert piece.startswith("…") and piece[1:].split()[0] in text.split(), piece


def test_the_prompts_recall_fills_its_budget_with_more_records_than_a_top_five(tmp_path: Path) -> None:
    """Thirty records about the harbour, each long: the recall holds excerpts of many more than five of them
    (what the budget takes), within the budget; without excerpts five long records would fill it."""
    ws = MemoryWorkspace.init(tmp_path / "memory")
    notes = [f"Harbour note {n}: " + "the tide tables and mooring fees " * 12 for n in range(30)]
    turns = [message(n, note, thread="h") for n, note in enumerate(notes)]
    with ws.lock():
        paths = ws.archive_sources(turns)
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    body = "\n\n".join(f"{note} [k](test/h/m{n})." for n, note in enumerate(notes))
    ws.apply_changes([TopicChange("topics/harbour.md", "create", f"# Harbour\n\n{body}\n")], message="harbour")
    ws.close()
    text = prompt_recall(RecallIndex(tmp_path / "memory"), "what are the mooring fees at the harbour?")
    assert len(text) <= RECALL_BUDGET_CHARS
    assert len(IDS.findall(text)) >= 12, text
    assert text.count("topics/harbour.md") == 1


def _topics(root: Path, topics: dict[str, list[str]]) -> dict[str, str]:
    """A workspace whose ``topics`` (path → record texts) cite trusted sources; each text → its memory ID."""
    ws = MemoryWorkspace.init(root)
    turns, n = [], 0
    bodies = {}
    for path, texts in topics.items():
        lines = []
        for text in texts:
            turns.append(message(n, text, thread="c"))
            lines.append(f"{text} [k](test/c/m{n}).")
            n += 1
        bodies[path] = "# Notes\n\n" + "\n\n".join(lines) + "\n"
    with ws.lock():
        paths = ws.archive_sources(turns)
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes([TopicChange(p, "create", b) for p, b in bodies.items()], message="notes")
    records = [record for topic in ws.snapshot().topics.values() for record in topic.records]
    ws.close()
    return {text: r.memory_id for texts in topics.values() for text in texts for r in records if text in r.text}


def test_feedback_finds_the_answer_that_shares_no_word_with_the_question(tmp_path: Path) -> None:
    """ "What will Caroline study?" — her plan names psychology; the courses she means say psychology and
    counseling but neither her name nor "study": only the first match's words reach them."""
    answer = "Psychology courses on counseling start in the fall."
    ids = _topics(
        tmp_path / "memory",
        {
            "topics/plans.md": ["Caroline wants to study psychology next year.", answer],
            "topics/other.md": [f"Caroline went to the shop on day {n}." for n in range(6)],
        },
    )
    index = RecallIndex(tmp_path / "memory")
    index.ranking.neighbour_weight = 0.0  # the answer sits next to the plan: neighbours alone would lend it a score
    index.ranking.feedback_weight = 0.0
    assert ids[answer] not in [h.memory_id for h in index.search("What will Caroline study?", 10)]
    index.ranking.feedback_weight = 0.3
    assert ids[answer] in [h.memory_id for h in index.search("What will Caroline study?", 10)]


def test_the_session_stage_lifts_a_weak_match_in_the_conversation_the_question_is_about(tmp_path: Path) -> None:
    """The same weak match in two topics: the one in the topic with the question's strong matches ranks
    first with the session stage, and the two tie without it."""
    weak = "We walked to the harbour at noon."
    ids = _topics(
        tmp_path / "memory",
        {
            "topics/trip.md": ["The harbour ferry timetable at Oban.", "The ferry timetable was late.", weak],
            "topics/town.md": ["Bread at the bakery was fresh.", weak.replace("noon", "dusk")],
        },
    )
    index = RecallIndex(tmp_path / "memory")
    index.ranking.neighbour_weight = 0.0
    index.ranking.topic_weight = 0.0
    scores = {h.memory_id: h.score for h in index.search("harbour ferry timetable", 10)}
    in_trip, in_town = ids[weak], ids[weak.replace("noon", "dusk")]
    assert scores[in_trip] == scores[in_town]
    index.ranking.topic_weight = 0.3
    ranked = [h.memory_id for h in index.search("harbour ferry timetable", 10)]
    assert ranked.index(in_trip) < ranked.index(in_town)
