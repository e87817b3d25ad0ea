"""Speaker awareness (:mod:`scriptorium.recall.speakers`): a question that names a speaker reaches what
that speaker said, above the turns that only address them by name; the requester filter holds."""

from __future__ import annotations

import numpy as np
import pytest

from scriptorium.audience import Viewer
from scriptorium.recall.index import RecallIndex
from scriptorium.recall.records import Hit
from scriptorium.recall.speakers import ROLES, Speakers, speaker_of
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace.sources import SourceMessage
from scriptorium.writers.verbatim import ROLE_LABEL
from tests.conftest import message


def test_a_records_speaker_is_its_name_label_else_its_role() -> None:
    assert set(ROLES) == set(ROLE_LABEL.values()), "the labels the verbatim writer writes"
    assert speaker_of("User: Melanie: The kids like dinosaurs.") == "Melanie"
    assert speaker_of("Assistant: Matt Patterson: Thanks!") == "Matt Patterson"
    assert speaker_of("Assistant: the deploy runs nightly: at two.") == "Assistant"
    assert speaker_of("User: I think: yes") == "User", "a sentence's first word is no name label"
    assert speaker_of("Decision: we use Postgres.") is None, "a model's record has no role label"
    assert speaker_of("We moved the database.") is None
    texts = ["User: Melanie: a", "", "Assistant: Matt Patterson: b", "plain", "User: Melanie: c"]
    speakers = Speakers([speaker_of(text) for text in texts])
    assert speakers.of.tolist() == [0, -1, 1, -1, 0]
    assert speakers.named(["patterson", "kid"]).tolist() == [1], "one word of a longer name names it"
    assert speakers.named(["kid"]).tolist() == []
    assert speakers.weights(["kid"], 0.1) is None
    assert speakers.weights(["melani", "kid"], 0.1) == [0.1, 1.0]
    slots, scores = np.arange(5), np.asarray([2.0, 2.0, -0.5, 1.0, -0.5])
    boosted = speakers.boost(slots, scores, speakers.named(["melani"]), 1.0)
    assert boosted.tolist() == [4.0, 2.0, -0.5, 1.0, 0.0], "a negative score is raised too, never lowered"
    assert speakers.boost_user(slots, scores, 1.0).tolist() == scores.tolist(), "named people: no user's turn"
    with_user = Speakers([speaker_of(text) for text in ["User: use pnpm", "Assistant: ok", "User: Melanie: a"]])
    assert with_user.boost_user(np.arange(3), np.asarray([1.0, 1.0, 1.0]), 1.0).tolist() == [2.0, 1.0, 1.0]


TALK = (
    "# Talk\n\n"
    "2026-11-01: User: Caroline: How are the kids, Melanie? Do the kids like the museum? [k](test/t1/m1)\n\n"
    "2026-11-01: Assistant: Melanie: The kids like the dinosaurs best. [k](test/t1/m2)\n\n"
    "2026-11-02: User: Caroline: Melanie, my kids like pottery. [k](test/t1/m3)\n\n"
    "2026-11-02: Assistant: Melanie: Swimming with the kids today. [k](test/t1/m4)\n\n"
    "2026-11-03: Assistant: Melanie: Bob's kids like sailing. [k](test/t1/m5)\n"
)


WORK = "# Work\n\n" + "".join(
    f"2026-11-0{1 + n % 3}: User: The {thing} job runs at {n} o'clock. [k](test/t1/m{n})\n\n"
    for n, thing in enumerate(("billing", "backup", "deploy", "report", "cleanup", "index", "mail", "sync"), 6)
)
"""Other records, so that the words of the talk are rare, as in a real memory (in a corpus of five, BM25
gives a word most records hold a negative weight)."""


@pytest.fixture
def talk(ws: MemoryWorkspace) -> MemoryWorkspace:
    """A conversation of Caroline (user) and Melanie (assistant), beside other records; m5 is a private
    record of bob's."""
    sources = [message(n) for n in (*range(1, 5), *range(6, 14))]
    sources.append(SourceMessage("test", "t1", "m5", "assistant", "2026-11-03T10:00:00Z", "x", audience="bob"))
    with ws.lock():
        paths = ws.archive_sources(sources)
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes(
        [TopicChange("topics/talk.md", "create", TALK), TopicChange("topics/work.md", "create", WORK)], message="talk"
    )
    return ws


def _said(hits: list[Hit]) -> list[str]:
    """Each hit's speaker and the start of what they said."""
    return [": ".join(hit.snippet.split(": ")[1:3])[:22] for hit in hits]


def test_a_question_naming_a_speaker_reaches_what_the_speaker_said(talk: MemoryWorkspace) -> None:
    """Melanie's answer holds "kids" and "like" once and not her name; Caroline's question to her holds
    all three, twice over: BM25 alone ranks the question first."""
    index = RecallIndex(talk.root)
    index.ranking.neighbour_weight = 0.0  # the stage under test alone
    hits = index.search("What do Melanie's kids like?", 3, viewer=Viewer("alice"))
    assert _said(hits)[0] == "Melanie: The kids like"
    assert index.search("Melanie kids like sailing", 1)[0].audience == "bob", "the owner sees bob's record"
    assert all(hit.audience != "bob" for hit in index.search("Melanie kids like sailing", 10, viewer=Viewer("alice")))
    index.ranking.speaker_boost = 0.0
    assert _said(index.search("What do Melanie's kids like?", 3, viewer=Viewer("alice")))[0] == "Caroline: How are the "


def test_a_speakers_name_alone_still_finds_the_records_that_hold_it(talk: MemoryWorkspace) -> None:
    index = RecallIndex(talk.root)
    said = _said(index.search("Melanie", 10, viewer=Viewer("alice")))
    assert len(said) == 4, said  # every record but bob's private one holds the name
    assert said[0].startswith("Melanie: "), "her own records first"


def test_a_question_naming_no_speaker_is_scored_as_without_the_stage(talk: MemoryWorkspace) -> None:
    index = RecallIndex(talk.root)
    with_stage = [(h.memory_id, h.score) for h in index.search("kids dinosaurs pottery", 5)]
    index.ranking.speaker_boost = 0.0
    assert [(h.memory_id, h.score) for h in index.search("kids dinosaurs pottery", 5)] == with_stage


TRIP = (
    "# Trip\n\n"
    "2026-11-04: User: Caroline: Jon, did you travel this spring? And Gina, did you bake for the fair? "
    "[k](test/t1/m1)\n\n"
    "2026-11-04: Assistant: Jon: I travelled to Rome with my brother. [k](test/t1/m2)\n\n"
    "2026-11-05: User: Gina: I baked sourdough loaves all weekend. [k](test/t1/m3)\n\n"
    "2026-11-05: Assistant: Melanie: We travel in the summer and bake on rainy days. [k](test/t1/m4)\n"
)


def test_a_question_about_two_speakers_reaches_each_ones_own_turn(talk: MemoryWorkspace) -> None:
    """Multi-hop: the answer is two turns that share no word of the question with each other (Jon's holds
    "travel", Gina's "bake"). By BM25 alone, Caroline's question to both, which holds every word of it, leads
    and one answer falls out of the top two; with both speakers named, each one's own turn leads."""
    talk.apply_changes([TopicChange("topics/trip.md", "create", TRIP)], message="trip")
    index = RecallIndex(talk.root)
    index.ranking.neighbour_weight = 0.0  # the stage under test alone
    question = "Where did Jon travel, and what did Gina bake?"
    assert sorted(_said(index.search(question, 2))) == ["Gina: I baked sourdoug", "Jon: I travelled to Ro"]
    index.ranking.speaker_boost = 0.0
    alone = _said(index.search(question, 2))
    assert alone[0].startswith("Caroline: Jon") and "Gina: I baked sourdoug" not in alone, alone


PAIRING = (
    "# Pairing\n\n"
    "2026-11-06: User: run the migrations with the dry-run flag first, always [k](test/t1/m7)\n\n"
    "2026-11-06: Assistant: I ran the migrations. The migrations table lists the migrations applied so far, "
    "and the next migrations run after the schema check; the migrations log is in the build folder. "
    "[k](test/t1/m8)\n"
)


def test_in_a_conversation_with_an_agent_the_users_own_turn_leads(talk: MemoryWorkspace) -> None:
    """The user states the convention in a few words; the agent's turn repeats the question's word by
    volume. BM25 alone ranks the agent's narration first; the user's own words lead with the stage."""
    talk.apply_changes([TopicChange("topics/pairing.md", "create", PAIRING)], message="pairing")
    index = RecallIndex(talk.root)
    index.ranking.neighbour_weight = 0.0  # the stage under test alone
    assert _said(index.search("how do we run the migrations?", 1)) == ["run the migrations wit"]
    index.ranking.user_boost = 0.0
    assert _said(index.search("how do we run the migrations?", 1)) == ["I ran the migrations. "]


def test_a_conversation_of_named_people_is_scored_as_without_the_users_stage(talk: MemoryWorkspace) -> None:
    """Every turn of the talk carries its speaker's name: none is the bare user's, and no score moves."""
    index = RecallIndex(talk.root)
    with_stage = [(h.memory_id, h.score) for h in index.search("kids dinosaurs pottery sailing", 5)]
    index.ranking.user_boost = 0.0
    assert [(h.memory_id, h.score) for h in index.search("kids dinosaurs pottery sailing", 5)] == with_stage
