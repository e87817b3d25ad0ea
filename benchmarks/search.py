"""Recall latency: BM25 over 1,000 / 10,000 / 100,000 records, beside bm25s on the same corpus and tokens.

For each size it writes a workspace's installed files (topics of 100 records,
every record citing an archived source; words drawn from a Zipf distribution
over a 30,000-word vocabulary, so queries mix common and rare words; each record opens with its role,
half of them with a speaker's name too, and a quarter of the queries name a speaker) and
measures, in the same run:

* ``full build``: a fresh index over every topic (parse, tokenize, index, trust, disk cache),
  the disk cache removed before each build; median of ``--build-repeats`` builds, alternating
  with as many ``bm25s`` builds on the same tokens;
* ``warm p50/p95``: 300 queries of 2–5 words against the warm index (top 5);
* ``bm25s p50``: the same queries on ``bm25s`` indexed with the same tokens (speed reference), timed
  in turn with ours, query by query;
* ``rank-bm25 get_scores p50`` (up to 10,000 records): the library scorer walking every document;
* ``requester p50``: the same queries as one requester (a quarter of the sources are hers, a quarter
  another's), whose scores use the statistics of the records she may see only, timed alternately with
  the owner's on the same warm index; ``ratio`` is its median over the owner's (target <= 1.5);
* at 10,000 records, ``branches``: the same queries with each hit's branch status read from a
  session store holding the archive's conversations (each forked once);
* at 10,000 records, ``cold start`` (a new process-level index loading the disk cache, then one query)
  and ``reindex``: the refresh after a one-topic edit (median of as many edits as builds),
  as a fraction of the median full build.

Every side runs the same 20 warm-up queries (not among the timed ones), then the same
timed queries, unchanged: a query whose words no record holds is timed on every side.
Each side is timed from the query text to its top 5 (our tokenizer feeds both).

Targets: warm p50 at or below bm25s's at every size; a full build at 100,000 within 2 x bm25s's
indexing; a cold start at 10,000 within 50 ms; reindex ≤ 10% of a full build.
Last line: one JSON object (``p50_ms_1k``, ``build_ms_100k``, ``bm25s_build_ms_100k``,
``p50_ms_10k``, ``p50_ms_100k``, ``bm25s_p50_ms_10k``,
``bm25s_p50_ms_100k``, ``cold_start_ms_10k``, ``reindex_fraction_10k``, ``bm25s_p50_ms_1k``,
``branches_p50_ms_10k``, ``requester_p50_ms_100k``, ``requester_ratio_100k``).

With ``--embedding`` (needs the embeddings extra) it also times embedding and hybrid
queries up to 10,000 records (the query's own encoding included), beside encoding the
query alone (target: an embedding query within 2x of that); the JSON line then gains
``embedding_p50_ms_10k``, ``hybrid_p50_ms_10k`` and ``encode_p50_ms_10k``.

Usage: python benchmarks/search.py [--sizes 1000,10000,100000] [--queries 300] [--embedding]
(needs `pip install -e '.[bench]'`)
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import structlog

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scriptorium.audience import OWNER, Viewer  # noqa: E402
from scriptorium.recall.index import RecallIndex  # noqa: E402
from scriptorium.recall.text import date_words, indexed_headings, tokenize  # noqa: E402
from scriptorium.workspace.paths import conversation_file, source_path  # noqa: E402
from scriptorium.workspace.sources import SourceMessage, render_source  # noqa: E402
from scriptorium.workspace.threads import join  # noqa: E402

RECORDS_PER_TOPIC = 100
SOURCES = 2_000
VOCABULARY = 30_000
WARMUP = 20
REQUESTER = Viewer("alice")


def audience_of(source: int) -> str | None:
    """Source ``source``'s requester: a quarter alice's, a quarter bob's, the rest shared."""
    return {1: "alice", 2: "bob"}.get(source % 4)


SPEAKERS = ("Avery", "Blake", "Casey", "Devon", "Emery", "Finley", "Gray", "Harper")
"""Records open as the verbatim writer writes them, with their role, and half of them with a speaker's name
after it (a transcript of several people); a quarter of the queries name a speaker
(:mod:`scriptorium.recall.speakers`)."""


def speaker(rng: np.random.Generator, index: int) -> str:
    """Record ``index``'s opening labels."""
    role = "User" if index % 2 else "Assistant"
    return f"{role}: {SPEAKERS[int(rng.integers(len(SPEAKERS)))]}: " if index % 4 < 2 else f"{role}: "


def words(rng: np.random.Generator, count: int) -> list[str]:
    ranks = np.minimum(rng.zipf(1.15, size=count), VOCABULARY)
    return [f"w{r}" for r in ranks]


def write_workspace(root: Path, records: int, seed: int = 1) -> list[list[str]]:
    """Installed files of a workspace with ``records`` records; returns each record's tokens (index order)."""
    rng = np.random.default_rng(seed)
    (root / ".scriptorium").mkdir(parents=True)
    (root / ".scriptorium" / "state.json").write_text('{"tree": "bench", "commit": null}')
    conversations: dict[str, list[bytes]] = {}
    for n in range(SOURCES):
        msg = SourceMessage(
            "bench", f"t{n // 100:03d}", f"m{n:05d}", "user", "2026-01-01T00:00:00Z", f"source {n}",
            audience=audience_of(n),
        )  # fmt: skip
        conversations.setdefault(conversation_file(msg.path), []).append(render_source(msg))
    for conversation, entries in conversations.items():  # the archive's layout: a file a conversation
        target = root / conversation
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(join(entries))
    corpus: list[list[str]] = []
    for topic in range((records + RECORDS_PER_TOPIC - 1) // RECORDS_PER_TOPIC):
        lines, notes = [f"# Topic {topic}", ""], []
        for k in range(min(RECORDS_PER_TOPIC, records - topic * RECORDS_PER_TOPIC)):
            index = topic * RECORDS_PER_TOPIC + k
            text = speaker(rng, index) + " ".join(words(rng, int(rng.integers(10, 30))))
            source = index % SOURCES
            when = f"2025-03-{1 + index % 28:02d}"
            lines += [f"{when}: {text}.[^e{index}] ^m-{index:012d}", ""]
            cited = conversation_file(source_path("bench", f"t{source // 100:03d}", f"m{source:05d}"))
            notes.append(f"[^e{index}]: [ev](../../{cited}#source-m{source:05d})")
            heading = indexed_headings((f"Topic {topic}",), text)  # none for a bare User: turn, as the index
            corpus.append(tokenize(" ".join([*heading, text, *date_words(when)])))  # sees it
        path = root / "topics" / f"area-{topic % 10}" / f"topic-{topic:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines + notes) + "\n")
    return corpus


def queries(count: int, seed: int = 2) -> list[str]:
    rng = np.random.default_rng(seed)
    asked = [" ".join(words(rng, int(rng.integers(2, 6)))) for _ in range(count)]
    return [f"{SPEAKERS[n % len(SPEAKERS)]} {query}" if n % 4 == 0 else query for n, query in enumerate(asked)]


def timed(call: object, *args: object) -> float:
    started = time.perf_counter()
    call(*args)  # type: ignore[operator]
    return (time.perf_counter() - started) * 1000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def fresh_build(root: Path) -> tuple[RecallIndex, float]:
    """A full build from the files alone: the disk cache is removed first, so nothing is reused."""
    shutil.rmtree(root / ".scriptorium" / "cache", ignore_errors=True)
    index = RecallIndex(root)
    return index, timed(index.refresh)


def latencies(search: Callable[[str], object], warm: list[str], timed_queries: list[str]) -> list[float]:
    """The same warm-up, then the same timed queries, for every side."""
    for q in warm:
        search(q)
    return [timed(search, q) for q in timed_queries]


def paired_latencies(
    first: Callable[[str], object], second: Callable[[str], object], warm: list[str], timed_queries: list[str]
) -> tuple[list[float], list[float]]:
    """Two sides warmed alike, then timed query by query in turn, so machine noise hits both alike."""
    for q in warm:
        first(q)
        second(q)
    a, b = [], []
    for q in timed_queries:
        a.append(timed(first, q))
        b.append(timed(second, q))
    return a, b


def branch_status_p50(index: RecallIndex, tmp: Path, warm: list[str], qs: list[str]) -> float:
    """The same queries with each hit's branch status read from a session store (SQLite) holding the
    archive's conversations — each forked once at its middle, so every status lookup has work to do."""
    from datetime import UTC, datetime, timedelta

    from scriptorium.recall.branches import BranchView
    from scriptorium.sessions import Node, NodeKind, open_store

    store = open_store(f"sqlite:///{tmp / 'branches.db'}")
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for thread in range(SOURCES // 100):
        session = f"t{thread:03d}"
        store.create_session(session, {"provider": "bench"})
        ids = [f"m{thread * 100 + k:05d}" for k in range(100)]
        nodes = [Node(i, session, ids[k - 1] if k else None, "user", NodeKind.USER, i, t0 + timedelta(seconds=k))
                 for k, i in enumerate(ids)]  # fmt: skip
        nodes.append(Node(f"{session}-fork", session, ids[49], "user", NodeKind.USER, "retry", t0))
        store.add_nodes(nodes, head=ids[-1])
    view = BranchView(store)
    lat = latencies(lambda q: index.search(q, branches=view), warm, qs)
    assert any(h.branch for q in qs[:50] for h in index.search(q, branches=view)), "statuses were looked up"
    store.close()
    return statistics.median(lat)


def measure(size: int, n_queries: int, tmp: Path, embedding: bool, build_repeats: int) -> dict[str, float]:
    import bm25s
    from rank_bm25 import BM25Okapi

    root = tmp / f"ws-{size}"
    corpus = write_workspace(root, size)
    qs = queries(n_queries)
    warm = queries(WARMUP, seed=3)  # a separate warm-up set: no timed query has been run before
    out: dict[str, float] = {"queries": len(qs), "warmup": len(warm), "build_repeats": build_repeats}
    builds, bm25s_builds = [], []
    retriever = bm25s.BM25()
    for _ in range(build_repeats):  # alternate the two builds, so machine noise hits both alike
        index, elapsed = fresh_build(root)
        builds.append(elapsed)
        retriever = bm25s.BM25()
        bm25s_builds.append(timed(lambda r=retriever: r.index(corpus, show_progress=False)))
    out["build_ms"], out["bm25s_build_ms"] = statistics.median(builds), statistics.median(bm25s_builds)
    assert index.size() == size
    # bm25s on the same corpus and tokens (a query term it does not know scores nothing, as ours), timed in
    # turn with ours query by query, so that the machine's noise hits both alike.
    lat, blat = paired_latencies(
        index.search, lambda q: retriever.retrieve([tokenize(q)], k=5, show_progress=False, n_threads=1), warm, qs
    )
    out["answered"] = sum(1 for q in qs if index.search(q)) / len(qs)
    out["p50_ms"], out["p95_ms"] = statistics.median(lat), pct(lat, 0.95)
    out["bm25s_p50_ms"], out["bm25s_p95_ms"] = statistics.median(blat), pct(blat, 0.95)
    if embedding and size <= 10_000:  # the dense path: one-time encoding, then warm queries
        started = time.perf_counter()
        index.search(qs[0], mode="embedding")
        out["embed_build_s"] = time.perf_counter() - started
        from scriptorium.recall.embedding import default_encoder

        encoder = default_encoder()
        qlat = latencies(encoder.encode_query, warm, qs[:100])  # the floor: encoding the query alone
        elat = latencies(lambda q: index.search(q, mode="embedding"), warm, qs[:100])
        hlat = latencies(lambda q: index.search(q, mode="hybrid"), warm, qs[:100])
        out["encode_p50_ms"] = statistics.median(qlat)
        out["embedding_p50_ms"], out["hybrid_p50_ms"] = statistics.median(elat), statistics.median(hlat)
    if size <= 10_000:
        okapi = BM25Okapi(corpus)
        rlat = latencies(lambda q: okapi.get_scores(tokenize(q)), warm, qs)
        out["rank_bm25_p50_ms"] = statistics.median(rlat)
        ranking = index.ranking
        stages = (
            ranking.neighbour_weight,
            ranking.feedback_weight,
            ranking.topic_weight,
            ranking.speaker_boost,
            ranking.user_boost,
        )
        # the BM25 component alone: the library scorer's best score
        ranking.neighbour_weight = ranking.feedback_weight = ranking.topic_weight = 0.0
        ranking.speaker_boost = ranking.user_boost = 0.0
        # (The best of the first ten: the current-truth rules order hits by time as well as score.)
        for q in qs[:20]:
            best = max(okapi.get_scores(tokenize(q)))
            hits = index.search(q, 10)
            assert math.isclose(max((h.score for h in hits), default=0.0), best, rel_tol=1e-6, abs_tol=1e-9), q
        # A requester's scores are BM25Okapi's over the records she may see, and nothing else.
        visible = [i for i in range(len(corpus)) if audience_of(i % SOURCES) in (None, REQUESTER.requester)]
        within = BM25Okapi([corpus[i] for i in visible])
        for q in qs[:20]:
            best = max(within.get_scores(tokenize(q)))
            hits = index.search(q, 10, viewer=REQUESTER)
            assert math.isclose(max((h.score for h in hits), default=0.0), best, rel_tol=1e-6, abs_tol=1e-9), q
        (
            ranking.neighbour_weight,
            ranking.feedback_weight,
            ranking.topic_weight,
            ranking.speaker_boost,
            ranking.user_boost,
        ) = stages
    owner, requester = paired_latencies(
        lambda q: index.search(q, viewer=OWNER), lambda q: index.search(q, viewer=REQUESTER), warm, qs
    )
    out["owner_p50_ms"], out["requester_p50_ms"] = statistics.median(owner), statistics.median(requester)
    out["requester_ratio"] = out["requester_p50_ms"] / out["owner_p50_ms"]
    if size == 10_000:
        out["branches_p50_ms"] = branch_status_p50(index, tmp, warm, qs)
        cold = []
        for _ in range(5):
            fresh = RecallIndex(root)
            cold.append(timed(fresh.search, qs[0]))
            assert not fresh.last_refresh.checked  # served from the disk cache, nothing re-parsed
        out["cold_start_ms"] = statistics.median(cold)
        reindex = []
        topic = root / "topics" / "area-3" / "topic-00003.md"
        for attempt in range(build_repeats):
            text = topic.read_text().replace("2025-03-", f"2025-0{4 + attempt % 5}-", 1)
            topic.write_text(text.replace(": ", f": edited{attempt} ", 1))
            (root / ".scriptorium" / "state.json").write_text(f'{{"tree": "bench-{attempt}", "commit": null}}')
            reindex.append(timed(index.refresh))
            assert index.last_refresh.topics_parsed == 1
        out["reindex_ms"] = statistics.median(reindex)
        out["reindex_fraction"] = out["reindex_ms"] / out["build_ms"]  # a median over a median, same repeats
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--build-repeats", type=int, default=3, help="full builds per size, on both sides")
    parser.add_argument(
        "--embedding", action="store_true", help="also time embedding and hybrid queries up to 10,000 records"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="1,000 and 10,000 records, 20 queries, one build: that it runs, not its figures (CI)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.queries, args.build_repeats = "1000,10000", 20, 1
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="scriptorium-search-") as tmp:
        for size in sizes:
            results[size] = measure(size, args.queries, Path(tmp), args.embedding, args.build_repeats)
    print(
        f"{'records':>9} {'build ms':>9} {'bm25s build':>12} {'p50 ms':>8} {'p95 ms':>8} {'bm25s p50':>10} "
        f"{'ratio':>6} {'rank-bm25':>10} {'answered':>9}"
    )
    for size, r in results.items():
        rank = f"{r['rank_bm25_p50_ms']:10.2f}" if "rank_bm25_p50_ms" in r else f"{'-':>10}"
        print(
            f"{size:>9} {r['build_ms']:9.1f} {r['bm25s_build_ms']:12.1f} {r['p50_ms']:8.3f} {r['p95_ms']:8.3f} "
            f"{r['bm25s_p50_ms']:10.3f} "
            f"{r['p50_ms'] / r['bm25s_p50_ms']:6.2f} {rank} {r['answered']:9.0%}"
        )
    ten = results.get(10_000, {})
    if ten:
        print(f"cold start from the disk cache (10k): {ten['cold_start_ms']:.1f} ms")
        print(
            f"with each hit's branch status from a session store (10k): p50 {ten['branches_p50_ms']:.3f} ms "
            f"beside bm25s {ten['bm25s_p50_ms']:.3f} ms"
        )
        print(
            f"one-topic edit (10k): {ten['reindex_ms']:.1f} ms = {ten['reindex_fraction']:.3f} of a full build "
            "(target <= 0.10)"
        )
    for size, r in results.items():
        if "embedding_p50_ms" in r:
            print(
                f"embedding at {size}: encode all {r['embed_build_s']:.1f} s once; query p50 "
                f"{r['embedding_p50_ms']:.2f} ms (hybrid {r['hybrid_p50_ms']:.2f} ms) beside encoding the "
                f"query alone {r['encode_p50_ms']:.2f} ms: {r['embedding_p50_ms'] / r['encode_p50_ms']:.2f}x "
                "(target <= 2)"
            )
    print(f"{'records':>9} {'owner p50':>10} {'requester p50':>14} {'ratio':>6}   (alternated, same warm index)")
    for size, r in results.items():
        print(f"{size:>9} {r['owner_p50_ms']:10.3f} {r['requester_p50_ms']:14.3f} {r['requester_ratio']:6.2f}")
    requesters = ", ".join(f"{size}: {r['requester_ratio']:.2f}" for size, r in results.items())
    print(f"target: a requester's p50 <= 1.5 x the owner's ({requesters})")
    ratios = ", ".join(f"{size}: {r['p50_ms'] / r['bm25s_p50_ms']:.2f}" for size, r in results.items())
    print(f"targets: p50 <= bm25s's at every size ({ratios}); cold start <= 50 ms; one-topic edit <= 0.1")
    if 100_000 in results:
        big = results[100_000]
        print(f"         full build at 100k <= 2 x bm25s's ({big['build_ms'] / big['bm25s_build_ms']:.2f} x)")

    def get(size: int, key: str) -> float | None:
        value = results.get(size, {}).get(key)
        return None if value is None else round(value, 4)

    print(
        json.dumps(
            {
                "p50_ms_1k": get(1_000, "p50_ms"),
                "build_ms_100k": get(100_000, "build_ms"),
                "bm25s_build_ms_100k": get(100_000, "bm25s_build_ms"),
                "p50_ms_10k": get(10_000, "p50_ms"),
                "p50_ms_100k": get(100_000, "p50_ms"),
                "bm25s_p50_ms_10k": get(10_000, "bm25s_p50_ms"),
                "bm25s_p50_ms_100k": get(100_000, "bm25s_p50_ms"),
                "cold_start_ms_10k": get(10_000, "cold_start_ms"),
                "reindex_fraction_10k": get(10_000, "reindex_fraction"),
                "bm25s_p50_ms_1k": get(1_000, "bm25s_p50_ms"),
                "branches_p50_ms_10k": get(10_000, "branches_p50_ms"),
                "requester_p50_ms_100k": get(100_000, "requester_p50_ms"),
                "requester_ratio_100k": get(100_000, "requester_ratio"),
                **(
                    {
                        "embedding_p50_ms_10k": get(10_000, "embedding_p50_ms"),
                        "hybrid_p50_ms_10k": get(10_000, "hybrid_p50_ms"),
                        "encode_p50_ms_10k": get(10_000, "encode_p50_ms"),
                    }
                    if "embedding_p50_ms" in results.get(10_000, {})
                    else {}
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
