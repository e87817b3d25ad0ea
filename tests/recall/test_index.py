"""BM25 recall: rank-bm25's scores, incremental refresh, trust, and the disk cache."""

from __future__ import annotations

import pickle
import random
import shutil
from typing import Any

import numpy as np
import pytest
import zstandard
from rank_bm25 import BM25Okapi

from scriptorium.changes.structured import DeleteRecord, update_records
from scriptorium.errors import InvalidArgument, NotFound
from scriptorium.recall.bm25 import IncrementalBM25
from scriptorium.recall.cache import CACHE_DIR, INDEX_FILE
from scriptorium.recall.index import RecallIndex
from scriptorium.recall.neighbours import NEIGHBOUR_WEIGHT, SECOND_SHARE
from scriptorium.recall.text import tokenize
from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.conftest import State, message


def test_incremental_scores_equal_rank_bm25_on_the_live_corpus() -> None:
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(60)]
    index = IncrementalBM25()
    live: dict[int, list[str]] = {}
    for step in range(400):
        if live and rng.random() < 0.35:
            slot = rng.choice(sorted(live))
            index.remove(slot)
            del live[slot]
        else:  # one document, or a few at once (a topic's records come together)
            docs = [
                [rng.choice(vocab[: rng.randint(5, 60)]) for _ in range(rng.randint(0, 30))]
                for _ in range(rng.choice((1, 1, 3)))
            ]
            slots = index.add_many(docs) if len(docs) > 1 else [index.add(docs[0])]
            for slot, doc in zip(slots, docs, strict=True):
                assert slot not in live
                live[slot] = doc
        if step % 25 or not live:
            continue
        index.commit()
        order = sorted(live)
        reference = BM25Okapi([live[s] for s in order])
        query = [rng.choice(vocab) for _ in range(rng.randint(1, 6))]
        expected = dict(zip(order, reference.get_scores(query), strict=True))
        slots, scores = index.candidate_scores(query)
        got = dict(zip(slots.tolist(), scores.tolist(), strict=True))
        for slot in order:  # candidates are exactly the documents sharing a term
            shares = any(q in live[slot] for q in query)
            assert (slot in got) == shares
            assert got.get(slot, 0.0) == pytest.approx(expected[slot], rel=1e-12, abs=1e-12)
        # Within some of the documents (a requester's view): the scores BM25Okapi gives over those alone.
        members = np.zeros(len(index.doc_len), dtype=bool)
        chosen = [s for s in order if rng.random() < 0.5] or order[:1]
        members[chosen] = True
        within = BM25Okapi([live[s] for s in chosen])
        expected = dict(zip(chosen, within.get_scores(query), strict=True))
        scoped = index.subcorpus(members)
        index.candidate_scores(query, members, scoped)  # a second query reuses what the first computed
        slots, scores = index.candidate_scores(query, members, scoped)
        got = dict(zip(slots.tolist(), scores.tolist(), strict=True))
        assert set(got) == {s for s in chosen if any(q in live[s] for q in query)}
        for slot in chosen:
            assert got.get(slot, 0.0) == pytest.approx(expected[slot], rel=1e-12, abs=1e-12)


def test_tokenize_drops_stopwords_and_punctuation_and_stems() -> None:
    assert tokenize("The Postgres-16 upgrade, and what we decided!") == ["postgr", "16", "upgrad", "decid"]
    assert tokenize("moved moving moves") == ["move"] * 3, "records and queries meet at the stem"


def test_a_records_date_searches_as_the_words_a_question_uses() -> None:
    from scriptorium.recall.text import date_words

    assert date_words("2023-05-08") == ["2023", "may", "monday"]
    assert date_words("2023-05") == ["2023", "may"] and date_words("2023") == ["2023"] and date_words(None) == []


def test_a_neighbour_lends_part_of_its_score(seeded: MemoryWorkspace) -> None:
    """A reply that answers only with the message before it still ranks, below that message; a record
    two away gets a smaller share, and one three away nothing."""
    text = (
        "# Talk\n\n2026-11-01: Where did Melanie go camping? [k](test/t1/m1)\n\n"
        "2026-11-01: By the lake, last weekend. [k](test/t1/m2)\n\n"
        "2026-11-02: The billing job runs nightly. [k](test/t1/m3)\n\n"
        "2026-11-02: Retries stay at three. [k](test/t1/m4)\n"
    )
    seeded.apply_changes([TopicChange("topics/talk.md", "create", text)], message="talk")
    index = RecallIndex(seeded.root)
    hits = index.search("camping Melanie", 5)
    assert [h.snippet[:9] for h in hits] == ["Where did", "By the la", "The billi"]
    assert hits[1].score == pytest.approx(NEIGHBOUR_WEIGHT * hits[0].score)
    assert hits[2].score == pytest.approx(NEIGHBOUR_WEIGHT * SECOND_SHARE * hits[0].score)
    index.ranking.neighbour_weight = 0.0
    assert [h.snippet[:9] for h in index.search("camping Melanie", 5)] == ["Where did"]


def topic(ws: MemoryWorkspace, path: str, text: str) -> None:
    exists = path in ws.snapshot().topic_shas
    ws.apply_changes([TopicChange(path, "update" if exists else "create", text)], message=f"edit {path}")


@pytest.fixture
def recall(seeded: MemoryWorkspace) -> MemoryWorkspace:
    topic(seeded, "topics/food.md", "# Food\n\nAlice drinks green tea every morning [k](test/t1/m1).\n")
    infra = "# Infra\n\n## Database\n\nWe moved the database to Postgres 16 [k](test/t1/m2).\n"
    topic(seeded, "topics/infra.md", infra)
    return seeded


def test_search_returns_the_record_with_its_place_and_score(recall: MemoryWorkspace) -> None:
    index = RecallIndex(recall.root)
    (hit,) = index.search("postgres upgrade")
    record = recall.snapshot().topics["topics/infra.md"].records[0]
    assert hit.memory_id == record.memory_id
    assert (hit.topic, hit.headings, hit.trust) == ("topics/infra.md", ("Infra", "Database"), "trusted")
    assert hit.snippet == "We moved the database to Postgres 16."
    # rank-bm25's Okapi idf is log((N - n + 0.5) / (n + 0.5)): zero for a term in half of two records.
    assert hit.score == pytest.approx(0.0)
    assert index.search("tea")[0].topic == "topics/food.md"
    assert index.search("the and of") == []


def test_one_topic_edit_reparses_only_that_topic(recall: MemoryWorkspace) -> None:
    index = RecallIndex(recall.root)
    index.search("tea")
    assert index.last_refresh.topics_parsed == 2
    index.search("tea")
    assert not index.last_refresh.checked  # nothing installed since: not even a stat of the topics
    rid = recall.snapshot().topics["topics/food.md"].records[0].memory_id
    topic(recall, "topics/food.md", f"# Food\n\nAlice switched to coffee [k](test/t1/m1). ^{rid}\n")
    assert index.search("tea") == []
    assert index.last_refresh.topics_parsed == 1 and index.last_refresh.topics_removed == 0
    assert index.search("coffee")[0].topic == "topics/food.md"
    update_records(recall, [DeleteRecord(rid)], message="drop food")
    assert index.search("coffee") == []
    assert index.last_refresh.topics_removed == 1


def test_records_backed_by_pending_sources_stay_out_until_promoted(recall: MemoryWorkspace) -> None:
    with recall.lock():
        paths = recall.archive_sources([message(20, "a web page said so", thread="web", trust="pending")])
    topic(recall, "topics/rumour.md", "# Rumour\n\nThe tea shop closes in May [k](test/web/m20).\n")
    index = RecallIndex(recall.root)
    assert [h.topic for h in index.search("tea shop")] == ["topics/food.md"]
    owner = index.search("tea shop", include_pending=True)
    assert [(h.topic, h.trust) for h in owner] == [("topics/rumour.md", "pending"), ("topics/food.md", "trusted")]
    result = recall.promote_source("test/web/m20")
    assert result.changed_files == (recall.archive.stored_path(paths[0]),)
    assert (recall.root / result.changed_files[0]).stat().st_mode & 0o777 == 0o400
    assert recall.archive.read(paths[0]).trust == "trusted"
    hits = index.search("tea shop")
    assert index.last_refresh.trust_changed == 1 and index.last_refresh.topics_parsed == 0
    assert (hits[0].topic, hits[0].trust) == ("topics/rumour.md", "trusted")
    assert recall.promote_source("test/web/m20").changed_files == ()  # already trusted: nothing to do


def test_a_record_of_several_sources_is_trusted_when_all_are_and_folds_every_audience(recall: MemoryWorkspace) -> None:
    """Promotion re-evaluates the records citing a source: one of two pending sources promoted leaves the
    record pending; both, trusted. Its audience folds all its sources' (alice's and a shared one: alice's),
    whichever changed last."""
    from dataclasses import replace

    from scriptorium.audience import ANYONE, Viewer

    with recall.lock():
        recall.archive_sources(
            [
                replace(message(21, "a note of alice's", thread="web", trust="pending"), audience="alice"),
                message(22, "a shared web page", thread="web", trust="pending"),
            ]
        )
    topic(recall, "topics/rumour.md", "# Rumour\n\nThe kiosk sells saffron [a](test/web/m21) [b](test/web/m22).\n")
    index = RecallIndex(recall.root)
    (memory_id,) = [h.memory_id for h in index.search("saffron kiosk", include_pending=True)]
    assert index.search("saffron kiosk", viewer=Viewer("alice")) == []
    recall.promote_source("test/web/m21")
    assert index.search("saffron kiosk", viewer=Viewer("alice")) == [], "one of two sources is still pending"
    assert index.audience_of("topics/rumour.md", memory_id) == "alice"
    recall.promote_source("test/web/m22")  # the shared one, changed last
    assert [h.memory_id for h in index.search("saffron kiosk", viewer=Viewer("alice"))] == [memory_id]
    assert index.audience_of("topics/rumour.md", memory_id) == "alice"
    assert index.search("saffron kiosk", viewer=Viewer("bob")) == index.search("saffron kiosk", viewer=ANYONE) == []
    fresh = RecallIndex(recall.root, persist=False)  # a full build agrees with the re-evaluation
    assert fresh.audience_of("topics/rumour.md", memory_id) == "alice" and fresh.search(
        "saffron", viewer=Viewer("alice")
    )


def test_promoting_an_unknown_or_malformed_source_changes_nothing(recall: MemoryWorkspace) -> None:
    before = State(recall)
    with pytest.raises(NotFound):
        recall.promote_source("test/web/nope")
    with pytest.raises(InvalidArgument):
        recall.promote_source("just-a-name")
    before.assert_unchanged(recall)


def test_the_disk_cache_is_reused_and_deleting_it_loses_nothing(recall: MemoryWorkspace) -> None:
    first = RecallIndex(recall.root)
    expected = [h.to_dict() for h in first.search("tea postgres", 10)]
    cache = recall.root / ".scriptorium" / "cache" / CACHE_DIR
    assert [p.name for p in cache.iterdir()] == [INDEX_FILE]
    cold = RecallIndex(recall.root)
    assert [h.to_dict() for h in cold.search("tea postgres", 10)] == expected
    assert not cold.last_refresh.checked  # loaded from disk, nothing re-parsed, not even a stat
    shutil.rmtree(cache)
    rebuilt = RecallIndex(recall.root)
    assert [h.to_dict() for h in rebuilt.search("tea postgres", 10)] == expected
    assert rebuilt.last_refresh.topics_parsed == 2


def _packed(value: object) -> bytes:
    return zstandard.ZstdCompressor().compress(pickle.dumps(value))


def _unpacked(data: bytes) -> Any:
    return pickle.loads(zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 30))


def test_a_damaged_or_outdated_cache_is_rebuilt(recall: MemoryWorkspace) -> None:
    expected = [h.to_dict() for h in RecallIndex(recall.root).search("tea postgres", 10)]
    cache = recall.root / ".scriptorium" / "cache" / CACHE_DIR / INDEX_FILE
    whole = cache.read_bytes()
    assert whole[:4] == b"\x28\xb5\x2f\xfd" and len(whole) < len(pickle.dumps(_unpacked(whole))), "stored compressed"
    damaged_files = (b"not a pickle", whole[: len(whole) // 2], _packed({"version": 2}), _packed([1]))
    for damaged in (*damaged_files, pickle.dumps(_unpacked(whole))):  # the last: the index uncompressed
        cache.write_bytes(damaged)
        index = RecallIndex(recall.root)
        assert [h.to_dict() for h in index.search("tea postgres", 10)] == expected
        assert index.last_refresh.topics_parsed == 2
    # One that unpickles but does not hold together (a field missing) is rebuilt too.
    cache.write_bytes(_packed({k: v for k, v in _unpacked(whole).items() if k != "citing"}))
    index = RecallIndex(recall.root)
    assert [h.to_dict() for h in index.search("tea postgres", 10)] == expected
    assert index.last_refresh.topics_parsed == 2


def test_a_stale_cache_reparses_only_what_changed_and_answers_as_a_fresh_build(recall: MemoryWorkspace) -> None:
    """A cache written before an install (another process's, or an older run's) never answers for the new files."""
    RecallIndex(recall.root).search("tea")
    cache = recall.root / ".scriptorium" / "cache" / CACHE_DIR / INDEX_FILE
    stale = cache.read_bytes()
    rid = recall.snapshot().topics["topics/food.md"].records[0].memory_id
    topic(recall, "topics/food.md", f"# Food\n\nAlice switched to coffee [k](test/t1/m1). ^{rid}\n")
    topic(recall, "topics/garden.md", "# Garden\n\nThe roses need water on Fridays [k](test/t1/m3).\n")
    cache.write_bytes(stale)
    index = RecallIndex(recall.root)
    assert index.search("tea") == []
    assert index.last_refresh.topics_parsed == 2  # food and garden; infra kept from the cache
    fresh = RecallIndex(recall.root, persist=False)
    for query in ("coffee", "roses water", "postgres", "alice"):
        assert [h.to_dict() for h in index.search(query, 10)] == [h.to_dict() for h in fresh.search(query, 10)]


def test_a_cache_written_after_edits_loads_each_topics_records_into_their_slots(recall: MemoryWorkspace) -> None:
    """The cache keeps each topic's records as they were pickled when it was indexed: after a topic is
    replaced, one deleted and one added (slots emptied and reused), a new process answers as a fresh build."""
    index = RecallIndex(recall.root)
    index.search("tea")
    rid = recall.snapshot().topics["topics/food.md"].records[0].memory_id
    topic(recall, "topics/food.md", f"# Food\n\nAlice switched to coffee [k](test/t1/m1). ^{rid}\n")
    recall.apply_changes([TopicChange("topics/infra.md", "delete")], message="drop infra")
    topic(recall, "topics/garden.md", "# Garden\n\nThe roses need water on Fridays [k](test/t1/m3).\n")
    topic(recall, "topics/trips.md", "# Trips\n\nCamping by the lake in May [k](test/t1/m4).\n")
    index.search("coffee")  # refreshes, and writes the cache
    cold = RecallIndex(recall.root)
    fresh = RecallIndex(recall.root, persist=False)
    for query in ("coffee", "roses water", "postgres", "alice", "camping lake", "tea"):
        assert [h.to_dict() for h in cold.search(query, 10)] == [h.to_dict() for h in fresh.search(query, 10)]
    assert not cold.last_refresh.checked  # every answer came from the cache as written


def test_scores_rank_more_specific_records_first(seeded: MemoryWorkspace) -> None:
    lines = ["# Notes", ""]
    for n in range(30):
        lines += [f"Note {n} about the garden and the weather [k](test/t1/m{n % 10}).", ""]
    lines += ["The garden irrigation timer broke on Tuesday [k](test/t1/m3).", ""]
    topic(seeded, "topics/notes.md", "\n".join(lines))
    hits = RecallIndex(seeded.root).search("irrigation timer garden", 3)
    assert "irrigation" in hits[0].snippet
    assert len(hits) == 3 and hits[0].score > hits[1].score
    assert np.all(np.diff([h.score for h in hits]) <= 0)


def test_the_index_holds_each_records_terms(seeded: MemoryWorkspace) -> None:
    """A build looks words up straight to term ids: what it holds for each record is record_terms'."""
    from collections import Counter

    from scriptorium.recall.text import display_text, record_terms

    text = (
        "# Trips\n\n## Summer plans\n\n"
        "2023-05-08: Where did Melanie go camping? The lake, of course [k](test/t1/m1)\n\n"
        "2024: Cafés in Zürich, naïve résumé — 42 times [k](test/t1/m2)\n\n"
        "The and of a [k](test/t1/m3)\n\n"
        "2025-03: Running runs ran; user's x_y [link](topics/a.md) [k](test/t1/m4)\n"
    )
    seeded.apply_changes([TopicChange("topics/trips.md", "create", text)], message="trips")
    index = RecallIndex(seeded.root)
    index.refresh()
    state = index._state
    assert state is not None
    bm25 = state.bm25
    words = {i: w for w, i in bm25.vocab.items()}
    held: dict[int, Counter[str]] = {}
    for term, slot, tf in zip(bm25._term.tolist(), bm25._slot.tolist(), bm25._tf.tolist(), strict=True):
        held.setdefault(slot, Counter())[words[term]] += tf
    topic = seeded.snapshot().topics["topics/trips.md"]
    by_id = {doc.memory_id: slot for slot, doc in enumerate(state.docs) if doc is not None}
    for record in topic.records:
        slot = by_id[record.memory_id]
        assert held.get(slot, Counter()) == record_terms(record, display_text(record)), record.text
        assert bm25.doc_len[slot] == sum(record_terms(record, display_text(record)).values())


def test_equal_scores_at_the_cut_go_to_the_smallest_memory_ids(seeded: MemoryWorkspace) -> None:
    """Which tied records make the top k is defined (the order they are listed in), not the partition's."""
    from scriptorium.recall.neighbours import best

    text = "# Tea\n\n" + "".join(f"Alice drinks tea [k](test/t1/m{n}).\n\n" for n in range(1, 7))
    seeded.apply_changes([TopicChange("topics/tea.md", "create", text)], message="tea")
    index = RecallIndex(seeded.root)
    index.ranking.neighbour_weight = 0.0  # neighbours would lend the middle records more
    every = index.search("tea", 10)
    assert len(every) == 6 and len({h.score for h in every}) == 1
    assert [h.memory_id for h in index.search("tea", 3)] == sorted(h.memory_id for h in every)[:3]
    assert best(np.array([1.0, 2.0, 2.0, 2.0, 0.0]), 2).tolist() == [1, 2]
    assert best(np.array([3.0, 2.0, 2.0, 5.0]), 3).tolist() == [0, 3, 1]


def test_the_best_of_a_long_array_are_those_a_full_sort_picks() -> None:
    """A long array is cut down through a sample first (:func:`best`): the result is still exactly the
    ``count`` highest, ties at the cut to the earliest positions, whatever the array's ties."""
    from scriptorium.recall.neighbours import SAMPLE_STRIDE, best

    rng = np.random.default_rng(5)
    for trial in range(300):
        count = int(rng.integers(1, 60))
        size = int(rng.integers(4 * SAMPLE_STRIDE * count, 8 * SAMPLE_STRIDE * count + 2))
        scores = [rng.random(size), rng.integers(0, 4, size).astype(float), np.round(rng.random(size), 2)][trial % 3]
        if trial % 5 == 0:
            scores[::SAMPLE_STRIDE] = 0.0  # the sample holds none of the best
        expected = sorted(range(size), key=lambda i: (-scores[i], i))[:count]
        assert sorted(best(scores, count).tolist()) == sorted(expected), (trial, size, count)
    assert sorted(best(np.arange(2000.0), 3).tolist()) == [1997, 1998, 1999]


def test_weighted_query_terms_scale_each_terms_rank_bm25_score() -> None:
    """``term_weights`` (what feedback's added words count): a document's score is the sum, over the query's
    terms, of each term's weight times rank-bm25's score for that term alone, within a subcorpus too."""
    rng = random.Random(11)
    vocab = [f"w{i}" for i in range(30)]
    docs = [[rng.choice(vocab) for _ in range(rng.randint(1, 20))] for _ in range(80)]
    index = IncrementalBM25()
    index.add_many(docs)
    index.commit()
    reference = BM25Okapi(docs)
    query, weights = ["w1", "w2", "w3", "w2"], [1.0, 0.5, 0.25, 2.0]
    expected = sum(w * reference.get_scores([t]) for t, w in zip(query, weights, strict=True))
    slots, scores = index.candidate_scores(query, term_weights=weights)
    assert dict(zip(slots.tolist(), scores.tolist(), strict=True)) == pytest.approx(
        {s: expected[s] for s in slots.tolist()}, rel=1e-12
    )
    one, alone = index.candidate_scores(["w3"], term_weights=[0.25])
    assert alone.tolist() == pytest.approx((0.25 * reference.get_scores(["w3"]))[one].tolist(), rel=1e-12)
    assert index.idf("w3") == pytest.approx(reference.idf["w3"]) and index.idf("never") == 0.0
