"""Recall of evidence turns on a LoCoMo-format dataset, after ingesting it with the verbatim (or LLM) writer.

Each conversation's sessions become sessions in a SQLite store (speaker A as
the user, speaker B as the assistant, the session's date on every turn) and
are written into a fresh workspace by the normal forced write pass (a turn that shares an image
carries its caption, ``blip_caption``, as LoCoMo's own retrieval baselines read it). For every
question, the top 5 and top 10 records of a search are mapped back, through
the sources they cite, to the dialogue turns (``dia_id``) they came from;
recall@k is the share of the question's evidence turns found, averaged over
questions (categories 1–4 together for the headline; every category in
``by_category``: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial).

Beside it, in the same run and on the same questions: the raw-turn baseline, plain
BM25 (rank-bm25) over every turn's own text with its session's date in words and
the same stemmed analysis (``raw@5``, ``raw@10``).

Modes: ``bm25``, ``embedding`` (multilingual-e5-small; needs ``pip install -e '.[embeddings]'``) and
``hybrid`` (weighted score fusion of the two; ``--fusion rrf`` for reciprocal rank fusion).
Questions whose evidence names no turn cannot be scored: they are left out, counted
and printed per category (``questions_without_evidence`` counts those of categories 1–4).
Last line: one JSON object (``mode``, ``questions``, ``questions_without_evidence``,
``recall_at_5``, ``recall_at_10``, ``baseline_recall_at_5``, ``baseline_recall_at_10``,
``by_category``).

``--writer llm`` ingests through the configured OpenAI-compatible endpoint instead
(``SCRIPTORIUM_WRITER_MODEL``, ``SCRIPTORIUM_WRITER_BASE_URL``, ``SCRIPTORIUM_WRITER_API_KEY``
or ``<state>/writer.json`` as for ``scriptorium``), with the LLM organizer: what the model's
memory gives back. With no model configured, or none reachable, it is skipped: the reason
is printed, and the last line is ``{"writer": "llm", "skipped": REASON}``.

Usage: python benchmarks/recall.py DATASET.json [--mode bm25|embedding|hybrid] [--writer verbatim|llm]
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scriptorium.errors import ScriptoriumError
from scriptorium.recall.index import SEARCH_MODES, RecallIndex
from scriptorium.recall.prompt import prompt_recall
from scriptorium.recall.text import tokenize
from scriptorium.sessions import Node, NodeKind, open_store
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.paths import source_identity_from_path
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.service import Organizer, Writer, WriteService, WriteSettings

_DIA = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def evidence_ids(raw: list[str]) -> set[str]:
    """Normalise LoCoMo's evidence strings (``"D8:6; D9:17"``, ``"D:11:26"``) to ``D8:6`` form."""
    found: set[str] = set()
    for item in raw:
        found.update(f"D{a}:{b}" for a, b in _DIA.findall(str(item)))
    return found


def session_time(text: str) -> datetime:
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return datetime(2023, 1, 1, tzinfo=UTC)


def node_id(sample: str, dia_id: str) -> str:
    return f"{sample}.{dia_id.replace(':', '.')}"


def turn_text(turn: dict[str, object]) -> str:
    """A turn as a runtime stores it: its speaker's name and its text, and for a turn that shares an image,
    the image's caption (``blip_caption``), as LoCoMo's own retrieval baselines read it ("… and shared a
    photo of …"): the image, not its words, is often what a question asks about."""
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    return f"{text} [shared {caption}]" if caption else text


def raw_turns(conversation: dict[str, object], sample: str) -> list[tuple[str, str]]:
    """Every turn as (node ID, its text with its session's date in words): the baseline's corpus."""
    conv = conversation["conversation"]
    assert isinstance(conv, dict)
    out = []
    for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
        when = session_time(str(conv.get(f"{key}_date_time", "")))
        date_text = when.strftime("%A %d %B %Y")
        for turn in conv[key]:
            out.append((node_id(sample, turn["dia_id"]), f"{turn_text(turn)} {date_text}"))
    return out


class Baseline:
    """Plain BM25 (rank-bm25) over the raw turns, with the same stemmed analysis and each turn's date."""

    def __init__(self, turns: list[tuple[str, str]]) -> None:
        from rank_bm25 import BM25Okapi

        self.ids = [node for node, _ in turns]
        self.bm25 = BM25Okapi([tokenize(text) or ["_"] for _, text in turns])

    def top(self, question: str, k: int) -> list[str]:
        scores = self.bm25.get_scores(tokenize(question))
        order = sorted(range(len(scores)), key=lambda i: -scores[i])[:k]
        return [self.ids[i] for i in order]


def ingest(conversation: dict[str, object], sample: str, service: WriteService) -> int:
    conv = conversation["conversation"]
    assert isinstance(conv, dict)
    speaker_a = conv.get("speaker_a")
    turns = 0
    for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
        session_id = f"{sample}-{key}"
        started = session_time(str(conv.get(f"{key}_date_time", "")))
        service.store.create_session(session_id, {"provider": "locomo", "title": f"{sample} {key}"})
        nodes, parent = [], None
        for n, turn in enumerate(conv[key]):
            kind = NodeKind.USER if turn["speaker"] == speaker_a else NodeKind.ASSISTANT
            nid = node_id(sample, turn["dia_id"])
            text = turn_text(turn)
            nodes.append(Node(nid, session_id, parent, str(kind), kind, text, started + timedelta(seconds=n)))
            parent = nid
        service.store.add_nodes(nodes, head=parent, updated_at=started)
        outcome = service.write(session_id, force=True)
        if not outcome.ok:
            raise Unwritten(f"{session_id}: {outcome}")
        turns += len(nodes)
    return turns


def smoke_slice(data: list[dict[str, Any]], sessions: int = 2) -> list[dict[str, Any]]:
    """The smallest slice of a dataset (``--smoke``): its first conversation's first ``sessions`` sessions, and
    the questions whose evidence is all in them."""
    first = data[0]
    conv = first["conversation"]
    kept = {f"session_{n}" for n in range(1, sessions + 1)}
    sliced = {k: v for k, v in conv.items() if not k.startswith("session_") or k.removesuffix("_date_time") in kept}
    inside = tuple(f"D{n}:" for n in range(1, sessions + 1))
    qa = [q for q in first["qa"] if q.get("evidence") and all(str(e).startswith(inside) for e in q["evidence"])]
    return [{**first, "conversation": sliced, "qa": qa}]


class Unwritten(Exception):
    """A session the writer did not write (with the LLM writer: a model that is not there, or failed)."""


def writers(name: str) -> tuple[Writer, Organizer]:
    """The writer and organizer to ingest with; raises ScriptoriumError when the LLM writer has no model."""
    if name == "verbatim":
        return VerbatimWriter(), OfflineOrganizer()
    from scriptorium.composition import make_writer
    from scriptorium.settings import Settings

    settings = Settings(writer="llm")
    settings.llm_config_source()()  # no model configured: WRITER_START_FAILED, before any work
    return make_writer(settings)


def skipped(reason: str) -> None:
    print(f"skipped: --writer llm: {reason}")
    print(json.dumps({"writer": "llm", "skipped": reason}))


TUNABLE = ("feedback_weight", "feedback_terms", "topic_weight", "neighbour_weight", "speaker_boost", "name_weight")
"""The index's stage settings a run may override (for tuning on dev only)."""
INJECTED_CHARS = 2_000
_INJECTED_ID = re.compile(r"\^(m-[0-9a-z]+)")


def cited_turns(snap: Snapshot, memory_ids: list[str]) -> set[str]:
    """The dialogue turns (node IDs) the records ``memory_ids`` cite."""
    found: set[str] = set()
    for memory_id in memory_ids:
        record = snap.record(memory_id)
        assert record is not None, memory_id
        for ref in record.refs:
            note = snap.topics[record.topic].footnotes.get(ref)
            identity = source_identity_from_path(note.source_path) if note and note.source_path else None
            if identity:
                found.add(identity[2])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--mode", choices=SEARCH_MODES, default="bm25")
    parser.add_argument("--writer", choices=("verbatim", "llm"), default="verbatim")
    parser.add_argument(
        "--time-boost", type=float, default=None, help="override the index's time boost (for tuning on dev only)"
    )
    parser.add_argument("--fusion", choices=("rrf", "weighted"), default=None, help="hybrid fusion (tuning on dev)")
    parser.add_argument("--lexical-weight", type=float, default=None, help="BM25's weight in weighted fusion")
    parser.add_argument("--feedback-weight", type=float, default=None, help="pseudo-relevance feedback (dev only)")
    parser.add_argument("--feedback-terms", type=int, default=None, help="words feedback adds (dev only)")
    parser.add_argument("--topic-weight", type=float, default=None, help="the session stage's weight (dev only)")
    parser.add_argument("--neighbour-weight", type=float, default=None, help="neighbour lending (dev only)")
    parser.add_argument("--speaker-boost", type=float, default=None, help="a named speaker's records (dev only)")
    parser.add_argument("--name-weight", type=float, default=None, help="a speaker's name as a word (dev only)")
    parser.add_argument("--smoke", action="store_true", help="the first two sessions of the first conversation (CI)")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    data = json.loads(args.dataset.read_text())
    if args.smoke:
        data = smoke_slice(data)
    try:
        writer, organizer = writers(args.writer)
    except ScriptoriumError as exc:
        skipped(exc.message)
        return
    scores: dict[int, dict[int, list[float]]] = defaultdict(lambda: {5: [], 10: []})
    baseline: dict[int, dict[int, list[float]]] = defaultdict(lambda: {5: [], 10: []})
    no_evidence: dict[int, int] = defaultdict(int)  # questions left out: nothing to find
    in_context: dict[int, list[float]] = defaultdict(list)
    query_ms: list[float] = []
    turns = 0
    with tempfile.TemporaryDirectory(prefix="scriptorium-recall-") as tmp:
        for number, conversation in enumerate(data):
            sample = str(conversation.get("sample_id") or f"conv{number}")
            ws = MemoryWorkspace.init(Path(tmp) / sample / "memory")
            store = open_store(f"sqlite:///{Path(tmp) / sample / 'sessions.db'}")
            service = WriteService(ws, store, writer, organizer, WriteSettings(trigger_tokens=0))
            try:
                turns += ingest(conversation, sample, service)
            except Unwritten as exc:
                if args.writer != "llm":
                    raise
                skipped(f"the model did not write a session ({exc})")
                return
            index = RecallIndex(ws.root)
            if args.time_boost is not None:
                index.ranking.time_boost = args.time_boost
            if args.fusion is not None:
                index.fusion = args.fusion
            if args.lexical_weight is not None:
                index.lexical_weight = args.lexical_weight
            for setting in TUNABLE:
                if getattr(args, setting) is not None:
                    setattr(index.ranking, setting, getattr(args, setting))
            snap = ws.snapshot()
            raw = Baseline(raw_turns(conversation, sample))
            for qa in conversation["qa"]:
                wanted = {node_id(sample, d) for d in evidence_ids(qa.get("evidence", []))}
                if not wanted:
                    no_evidence[int(qa["category"])] += 1
                    continue
                started = time.perf_counter()
                hits = index.search(str(qa["question"]), 10, mode=args.mode)
                query_ms.append((time.perf_counter() - started) * 1000)
                raw_top = raw.top(str(qa["question"]), 10)
                for k in (5, 10):
                    baseline[int(qa["category"])][k].append(len(wanted & set(raw_top[:k])) / len(wanted))
                for k in (5, 10):
                    found = cited_turns(snap, [hit.memory_id for hit in hits[:k]])
                    scores[int(qa["category"])][k].append(len(wanted & found) / len(wanted))
                # What the UserPromptSubmit hook would inject for this question, in its first 2,000 characters
                injected = prompt_recall(index, str(qa["question"]), mode=args.mode)[:INJECTED_CHARS]
                found = cited_turns(snap, _INJECTED_ID.findall(injected))
                in_context[int(qa["category"])].append(len(wanted & found) / len(wanted))
            store.close()
            ws.close()
    scored = [cat for cat in (1, 2, 3, 4) if cat in scores]  # a dataset may lack a category
    headline = {k: [v for cat in scored for v in scores[cat][k]] for k in (5, 10)}
    base_headline = {k: [v for cat in scored for v in baseline[cat][k]] for k in (5, 10)}
    injected_headline = [v for cat in scored for v in in_context[cat]]
    print(
        f"{'category':>10} {'questions':>10} {'recall@5':>9} {'recall@10':>10} "
        f"{'raw@5':>7} {'raw@10':>7} {'@2000ch':>8} {'no evidence':>12}"
    )
    for cat in sorted(set(scores) | set(no_evidence)):
        if cat not in scores:
            print(f"{cat:>10} {0:>10} {'-':>9} {'-':>10} {'-':>7} {'-':>7} {'-':>8} {no_evidence[cat]:>12}")
            continue
        r5, r10 = statistics.mean(scores[cat][5]), statistics.mean(scores[cat][10])
        b5, b10 = statistics.mean(baseline[cat][5]), statistics.mean(baseline[cat][10])
        c2000 = statistics.mean(in_context[cat])
        print(
            f"{cat:>10} {len(scores[cat][5]):>10} {r5:>9.3f} {r10:>10.3f} {b5:>7.3f} {b10:>7.3f} {c2000:>8.3f} "
            f"{no_evidence[cat]:>12}"
        )
    left_out = sum(no_evidence[cat] for cat in (1, 2, 3, 4))
    print(f"left out (no evidence turns): {left_out} in categories 1-4, {sum(no_evidence.values())} in all")
    r5, r10 = statistics.mean(headline[5]), statistics.mean(headline[10])
    b5, b10 = statistics.mean(base_headline[5]), statistics.mean(base_headline[10])
    c2000 = statistics.mean(injected_headline)
    print(
        f"{'1-4':>10} {len(headline[5]):>10} {r5:>9.3f} {r10:>10.3f} {b5:>7.3f} {b10:>7.3f} {c2000:>8.3f}   "
        f"({len(data)} conversations, {turns} turns)"
    )
    print(f"query p50: {statistics.median(query_ms):.3f} ms (index.search, top 10)")
    print("targets on dev (default mode): recall@10 >= 0.82, recall@5 >= 0.72, categories 1 and 3 >= 0.55 @10,")
    print(f"  recall in the hook's first 2,000 characters >= 0.70; raw baseline @10 here: {b10:.3f}")
    print(
        json.dumps(
            {
                "mode": args.mode,
                "writer": args.writer,
                "questions": len(headline[5]),
                "questions_without_evidence": left_out,
                "recall_at_5": round(r5, 4),
                "recall_at_10": round(r10, 4),
                "baseline_recall_at_5": round(b5, 4),
                "baseline_recall_at_10": round(b10, 4),
                "recall_at_2000_chars": round(statistics.mean(injected_headline), 4),
                "p50_query_ms": round(statistics.median(query_ms), 3),
                "by_category": {
                    str(cat): {
                        "questions": len(scores[cat][5]),
                        "recall_at_5": round(statistics.mean(scores[cat][5]), 4),
                        "recall_at_10": round(statistics.mean(scores[cat][10]), 4),
                        "recall_at_2000_chars": round(statistics.mean(in_context[cat]), 4),
                    }
                    for cat in sorted(scores)
                },
            }
        )
    )


if __name__ == "__main__":
    main()
