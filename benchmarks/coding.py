"""Memory for coding work, measured: real coding sessions, asked about the way a later session asks.

A data set is a folder in the format of ``coding-dev/FORMAT.md`` (transcripts under ``projects/<name>/``
where their tool keeps them, ``questions.jsonl``). The run:

* imports every transcript with the ordinary command, ``scriptorium ingest <DATASET>/projects --state
  <scratch>`` (a scratch state folder, never the user's: the default writer, forced passes);
* finds each evidence quote in the imported messages: the user or assistant message of the quote's file
  (its sessions: the import's cursor names the file) whose text holds it, whitespace and case folded;
* asks each question through the UserPromptSubmit hook's own code path (:func:`scriptorium.runtimes.hooks.command.
  run_hook`, what ``scriptorium hook`` and the hook daemon run, here in this process with the index loaded,
  as the daemon holds it): the question as ``prompt``, the question's ``project_dir`` as ``cwd``, a fresh
  session ID, and ``core: first-prompt`` as Claude Code's setup gives it, so the prompt opens its session's
  context (the core, the project's newest records) before its recall. The records the hook ranked are the hits
  its recall packed (read as they pass, in their order); what it injected is its ``additionalContext``, every
  record in it (the opening's too) standing for the messages it cites;
* scores, as FORMAT.md defines them: ``recall_at_5`` / ``recall_at_10`` (share of a question's evidence
  quotes whose message a top-k record cites, averaged over questions), ``context_recall`` (the same over every
  record the hook injected), ``stale_first_rate`` (of ``changed`` questions, the share
  where a stale quote's record ranks, in the top 10, above every current one's), ``foreign_share`` (of the
  records injected for questions that are not ``cross_project``, the share citing no session of the
  question's project: a session whose ``cwd`` is the project's folder or inside it), ``by_category``,
  ``p50_hook_ms`` (the hook's median time, warm), ``questions``;
* beside them the baseline: plain BM25 (rank-bm25, the index's own word analysis) over the raw imported
  messages, its top 10 (``baseline_recall_at_10``) and the messages whose excerpts (the hook's excerpt width,
  one a line) fit in the same character budget (``baseline_context_recall``).

Nothing here knows a data set's projects, paths or wording. A quote found in no message of its file counts
as not recalled and is reported (``unresolved_quotes``). Prints a table by category, then one JSON line.

Usage: python benchmarks/coding.py DATASET [--questions FILE] [--mode bm25|embedding|hybrid] [--state DIR] [--misses]
(``--questions`` default ``DATASET/questions.jsonl``; file paths in questions are relative to DATASET;
``--state``: keep the scratch state there, and import into it again, which adds nothing, on the next run.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from coding_scores import CATEGORIES, Message, Scores, first_rank, in_project, report, share, stale_first

from scriptorium.producers.importing import CURSOR_PREFIX
from scriptorium.recall import prompt as prompt_module
from scriptorium.recall.context import EXCERPT_CHARS, RECALL_BUDGET_CHARS, wrap_memory_context
from scriptorium.recall.records import Hit
from scriptorium.recall.text import snippet, tokenize
from scriptorium.runtimes.hooks.command import run_hook
from scriptorium.runtimes.openings import FIRST_PROMPT
from scriptorium.sessions import Node, NodeKind, SessionStore, open_store
from scriptorium.settings import Settings
from scriptorium.workspace.paths import source_identity_from_path
from scriptorium.workspace.topics import parse_topic

MIN_QUOTE = 20
MESSAGE_KINDS = (NodeKind.USER, NodeKind.ASSISTANT)
_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})[^\n]*\n.*?(?:^[ ]{0,3}\1[ \t]*$|\Z)", re.S | re.M)
_INJECTED_ID = re.compile(r"\^(m-[0-9a-z]+)")
SCRATCH_MARK = ".coding-benchmark"
"""The file that marks a state folder as this benchmark's scratch (``--state`` refuses any other non-empty one)."""


def fold(text: str) -> str:
    """Whitespace folded to one space, case folded: how quotes are matched."""
    return " ".join(text.split()).casefold()


def outside_fences(text: str) -> str:
    return _FENCE.sub("\n", text)


# -- the questions and their quotes -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Evidence:
    file: str
    quote: str


@dataclass(frozen=True, slots=True)
class Question:
    id: str
    project_dir: str
    question: str
    category: str
    evidence: tuple[Evidence, ...]
    stale: tuple[Evidence, ...] = ()


def load_questions(path: Path) -> list[Question]:
    questions = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        raw = json.loads(line)
        category = str(raw["category"])
        if category not in CATEGORIES:
            raise SystemExit(f"{path.name}:{number}: unknown category {category!r}")

        def evidence(items: Iterable[dict[str, str]]) -> tuple[Evidence, ...]:
            return tuple(Evidence(str(item["file"]), str(item["quote"])) for item in items)

        questions.append(
            Question(
                str(raw["id"]),
                str(raw["project_dir"]),
                str(raw["question"]),
                category,
                evidence(raw["evidence"]),
                evidence(raw.get("stale") or ()),
            )
        )
    return questions


def quote_problem(quote: str, nodes: Sequence[Node], raw_text: str | None = None) -> str | None:
    """Why ``quote`` is not a valid evidence quote of the file whose nodes (every kind, in order) are
    ``nodes`` (None: it is): at least 20 characters, occurring exactly once in the file — in the text of one
    user or assistant message, outside its fenced code. ``raw_text``: the file as text, for a format whose
    nodes do not keep every text (a markdown tool block), where it must not occur a second time either."""
    wanted = fold(quote)
    if len(wanted) < MIN_QUOTE:
        return f"shorter than {MIN_QUOTE} characters"
    anywhere = sum(fold(node.content).count(wanted) for node in nodes)
    if raw_text is not None and (in_file := fold(raw_text).count(wanted)) > 1:
        return f"occurs {in_file} times in the file"
    if anywhere == 0:
        return "in no message of the file"
    if anywhere > 1:
        return f"occurs {anywhere} times in the file's messages"
    holder = next(node for node in nodes if wanted in fold(node.content))
    if holder.kind not in MESSAGE_KINDS:
        return f"in a {holder.kind} node, not a user or assistant message"
    if wanted not in fold(outside_fences(holder.content)):
        return "inside fenced code"
    return None


def file_sessions(store: SessionStore) -> dict[Path, list[str]]:
    """Each transcript file the store imported → its sessions (by the import cursors the sessions keep)."""
    found: dict[Path, list[str]] = defaultdict(list)
    for session in store.list_sessions():
        for key in session.metadata:
            if key.startswith(CURSOR_PREFIX):
                found[Path(key[len(CURSOR_PREFIX) :])].append(session.id)
    return found


def file_nodes(store: SessionStore, sessions: Iterable[str]) -> list[Node]:
    return [node for session in sessions for node in store.get_branch(session)]


def check_file_quotes(path: Path, quotes: Sequence[str]) -> dict[str, str | None]:
    """Each quote's problem in transcript ``path`` (None: valid), the file imported alone, unredacted, into a
    scratch store with the product's importers."""
    from scriptorium.producers.ingest import import_paths

    with tempfile.TemporaryDirectory(prefix="coding-quotes-") as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'sessions.db'}")
        try:
            report = import_paths(store, [path], redactor=None)
            nodes = file_nodes(store, report.sessions)
        finally:
            store.close()
    raw = None if path.suffix == ".jsonl" else path.read_text(encoding="utf-8", errors="replace")
    return {quote: quote_problem(quote, nodes, raw) for quote in quotes}


# -- the memory's side ----------------------------------------------------------------------------------


def scratch_env() -> dict[str, str]:
    """The caller's environment without any ``SCRIPTORIUM_*`` setting (the user's memory is never named)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCRIPTORIUM_")}
    return {**env, "SCRIPTORIUM_WATCH": "false", "SCRIPTORIUM_LOG_LEVEL": "WARNING"}


@contextmanager
def scratch_settings_env() -> Iterator[None]:
    """No ``SCRIPTORIUM_*`` setting of the caller's environment while the hook runs in this process (none may
    point it at the user's session store or memory), restored after."""
    kept = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("SCRIPTORIUM_")]}
    try:
        yield
    finally:
        os.environ.update(kept)


def ingest(dataset: Path, state: Path) -> dict[str, Any]:
    """``scriptorium ingest`` of the data set's projects into ``state``, in a process of its own."""
    projects = dataset / "projects" if (dataset / "projects").is_dir() else dataset
    script = Path(sys.executable).with_name("scriptorium")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "scriptorium"]
    command = [*cli, "ingest", str(projects), "--state", str(state), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=scratch_env())
    if done.returncode not in (0, 3) or not done.stdout.strip():
        raise SystemExit(f"scriptorium ingest failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    imported: dict[str, Any] = json.loads(done.stdout)
    return imported


@dataclass(slots=True)
class Corpus:
    """The imported messages, and where each quote is."""

    messages: dict[Message, str]
    """Every user and assistant message on its session's current branch → its text."""
    by_file: dict[Path, list[str]]
    cwd: dict[str, Path]
    """Session → the folder it ran in (its ``cwd``), where the importer names one."""

    @classmethod
    def read(cls, store: SessionStore) -> Corpus:
        by_file = file_sessions(store)
        messages: dict[Message, str] = {}
        cwd: dict[str, Path] = {}
        for session in store.list_sessions():
            if isinstance(ran := session.metadata.get("cwd"), str) and ran:
                cwd[session.id] = Path(ran)
            for node in store.get_branch(session.id):
                if node.is_content:
                    messages[(session.id, node.id)] = node.content
        return cls(messages, by_file, cwd)

    def locate(self, dataset: Path, evidence: Evidence) -> set[Message]:
        """The messages of ``evidence``'s file that hold its quote (empty: not found)."""
        sessions = set(self.by_file.get((dataset / evidence.file).resolve(), ()))
        wanted = fold(evidence.quote)
        return {m for m, text in self.messages.items() if m[0] in sessions and wanted in fold(text)}


def messages_of(sources: Iterable[str]) -> set[Message]:
    found = set()
    for source in sources:
        if identity := source_identity_from_path(source):
            found.add((identity[1], identity[2]))
    return found


def cited(hit: Hit) -> set[Message]:
    return messages_of(hit.sources)


def records_cite(memory: Path) -> dict[str, set[Message]]:
    """Every installed record's memory ID → the messages it cites: what a record the hook injects outside
    its recall (the core, the project's newest records that open a session) stands for."""
    found: dict[str, set[Message]] = {}
    for path in sorted((memory / "topics").rglob("*.md")):
        topic = parse_topic(path.relative_to(memory).as_posix(), path.read_text())
        for record in topic.records:
            if record.block_ids:
                found[record.memory_id] = messages_of(topic.cited_paths(record))
    return found


@contextmanager
def ranked_hits() -> Iterator[dict[str, list[Hit]]]:
    """The hits each prompt's recall packs, in rank order, by the asking session, as they pass (the hook's
    own calls, observed: :func:`scriptorium.recall.prompt.prompt_recall` and the ``pack_hits`` it calls)."""
    seen: dict[str, list[Hit]] = {}
    asking = threading.local()
    recall, pack = prompt_module.prompt_recall, prompt_module.pack_hits

    def observed_recall(*args: Any, **kwargs: Any) -> str:
        asking.session = kwargs.get("session", "")
        return recall(*args, **kwargs)

    def observed_pack(hits: Sequence[Hit], *args: Any, **kwargs: Any) -> str:
        seen[getattr(asking, "session", "")] = list(hits)
        return pack(hits, *args, **kwargs)

    prompt_module.prompt_recall = observed_recall  # type: ignore[assignment]
    prompt_module.pack_hits = observed_pack  # type: ignore[assignment]
    try:
        yield seen
    finally:
        prompt_module.prompt_recall, prompt_module.pack_hits = recall, pack


def ask_hook(
    settings: Settings, question: str, cwd: str, seen: dict[str, list[Hit]], wait_s: float = 120
) -> tuple[list[Hit], str, float]:
    """The hook's answer to one prompt: (the hits it ranked, the context it injected, its milliseconds)."""
    session = f"coding-bench-{uuid.uuid4()}"
    payload = {
        "hook_event_name": "UserPromptSubmit",
        "session_id": session,
        "cwd": cwd,
        "prompt": question,
        "core": FIRST_PROMPT,  # as Claude Code's setup sends it: a session's first prompt opens its context
    }
    started = time.perf_counter()
    out = run_hook(json.dumps(payload).encode(), settings, detach_end=False)
    ms = (time.perf_counter() - started) * 1000
    deadline = time.monotonic() + wait_s  # over its budget the hook answers nothing; its search still ends
    while session not in seen and time.monotonic() < deadline:
        time.sleep(0.01)
    injected = json.loads(out)["hookSpecificOutput"]["additionalContext"] if out else ""
    return seen.pop(session, []), injected, ms


# -- the baseline ---------------------------------------------------------------------------------------


class Baseline:
    """Plain BM25 (rank-bm25) over the raw imported messages, with the index's word analysis."""

    def __init__(self, messages: dict[Message, str]) -> None:
        from rank_bm25 import BM25Okapi

        self.ids = list(messages)
        self.texts = [messages[m] for m in self.ids]
        self.bm25 = BM25Okapi([tokenize(text) or ["_"] for text in self.texts])

    def ranked(self, question: str, k: int = 40) -> list[int]:
        """The best ``k`` messages that share a word with ``question``, best first."""
        scores = self.bm25.get_scores(tokenize(question) or ["_"])
        return sorted((i for i in range(len(scores)) if scores[i] > 0), key=lambda i: -scores[i])[:k]

    def context(self, question: str, order: Sequence[int], budget: int = RECALL_BUDGET_CHARS) -> list[Message]:
        """The messages whose excerpts (the hook's width, one a line) fit in ``budget`` characters, wrapping
        included, in rank order (a message that no longer fits is left out, a shorter one may still go in)."""
        words = set(tokenize(question))
        room = budget - len(wrap_memory_context("recall", ""))
        kept = []
        for i in order:
            line = f"- {snippet(' '.join(self.texts[i].split()), words, EXCERPT_CHARS)}"
            if len(line) + 1 <= room:
                room -= len(line) + 1
                kept.append(self.ids[i])
        return kept


# -- scoring (the metrics themselves: coding_scores) ------------------------------------------------


def score_question(
    q: Question,
    dataset: Path,
    corpus: Corpus,
    hits: Sequence[Hit],
    injected: str,
    records: dict[str, set[Message]],
    baseline: Baseline,
    scores: Scores,
) -> None:
    current = [corpus.locate(dataset, e) for e in q.evidence]
    stale = [corpus.locate(dataset, e) for e in q.stale]
    for e, where in zip((*q.evidence, *q.stale), (*current, *stale), strict=True):
        if not where:
            scores.unresolved.append(f"{q.id}: {e.quote[:60]!r}")
    ranked = [cited(hit) for hit in hits]
    top = {k: set().union(*ranked[:k]) for k in (5, 10)}
    injected_ids = list(dict.fromkeys(_INJECTED_ID.findall(injected)))
    shown = [records[memory_id] for memory_id in injected_ids if memory_id in records]
    if not injected:
        scores.silent += 1
    if q.category != "cross_project":
        project = Path(q.project_dir) if Path(q.project_dir).is_absolute() else (dataset / q.project_dir).resolve()
        scores.injected += len(shown)
        scores.foreign += sum(1 for sources in shown if not in_project({s for s, _ in sources}, project, corpus.cwd))
    if q.category == "changed" and q.stale:
        scores.stale_first.append(stale_first(current, stale, ranked[:10]))
    order = baseline.ranked(q.question)
    base_top = {baseline.ids[i] for i in order[:10]}
    if share(current, set().union(*shown) if shown else set()) < 1:
        hook_ranks = [first_rank(m, ranked) for m in current]
        base_ranks = [first_rank(m, [{baseline.ids[i]} for i in order]) for m in current]
        stale_ranks = [first_rank(m, ranked) for m in stale]

        def shown_ranks(values: list[float]) -> str:
            return ",".join("-" if v == float("inf") else str(int(v) + 1) for v in values)

        scores.misses.append(
            f"{q.id} {q.category}: hook rank {shown_ranks(hook_ranks)} of {len(ranked)}, raw BM25 rank "
            f"{shown_ranks(base_ranks)}" + (f", stale at {shown_ranks(stale_ranks)}" if stale else "")
        )
    scores.add(
        q.category,
        recall_at_5=share(current, top[5]),
        recall_at_10=share(current, top[10]),
        context_recall=share(current, set().union(*shown) if shown else set()),
        baseline_recall_at_10=share(current, base_top),
        baseline_context_recall=share(current, set(baseline.context(q.question, order))),
    )


def prepare_state(state: Path) -> None:
    if state.exists() and any(state.iterdir()) and not (state / SCRATCH_MARK).exists():
        raise SystemExit(f"{state} is not empty and not this benchmark's scratch state: refusing to write there")
    state.mkdir(parents=True, exist_ok=True)
    (state / SCRATCH_MARK).write_text("scratch state of benchmarks/coding.py\n")


def run(dataset: Path, questions_file: Path, mode: str, state: Path, misses: bool = False) -> dict[str, Any]:
    questions = load_questions(questions_file)
    prepare_state(state)
    started = time.perf_counter()
    imported = ingest(dataset, state)
    import_s = time.perf_counter() - started
    print(
        f"imported {imported.get('files')} file(s), {imported.get('sessions')} session(s): "
        f"{imported.get('records')} record(s) written in {import_s:.1f} s"
    )
    settings = Settings(state=state, search_mode=mode, watch=False)  # type: ignore[arg-type]
    store = open_store(settings.session_store_url)
    try:
        corpus = Corpus.read(store)
    finally:
        store.close()
    baseline = Baseline(corpus.messages)
    records = records_cite(state / "memory")
    scores = Scores()
    with ranked_hits() as seen:
        # Loads the index (and, searching with embeddings, embeds every record), as the daemon has it loaded.
        first = questions[0].question if questions else "warm up"  # asked again below, timed with the rest
        _, warm_context, first_ms = ask_hook(settings, first, str(dataset), seen, wait_s=3600)
        for q in questions:
            cwd = q.project_dir if Path(q.project_dir).is_absolute() else str((dataset / q.project_dir).resolve())
            hits, injected, ms = ask_hook(settings, q.question, cwd, seen)
            scores.hook_ms.append(ms)
            score_question(q, dataset, corpus, hits, injected, records, baseline, scores)
    print(
        f"first prompt after the import (the first question): {first_ms:.0f} ms, "
        f"{'with' if warm_context else 'without'} context (then the index is loaded, as in the daemon)"
    )
    extra = {
        "messages": len(corpus.messages),
        "import_s": round(import_s, 1),
        "first_prompt_ms": round(first_ms),
        "first_prompt_has_context": bool(warm_context),
    }
    return report(scores, mode, extra, misses)


SMOKE_QUESTIONS = 3


def smoke_slice(dataset: Path, questions: Path, into: Path) -> Path:
    """The smallest slice of a data set (``--smoke``): its first questions, and only the transcript files their
    evidence and stale quotes are in, copied to ``into`` at the same paths; returns the questions file there."""
    lines = [line for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()][:SMOKE_QUESTIONS]
    for line in lines:
        raw = json.loads(line)
        for item in [*raw["evidence"], *raw.get("stale", [])]:
            (into / item["file"]).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(dataset / item["file"], into / item["file"])
    (into / "questions.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return into / "questions.jsonl"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--questions", type=Path, default=None, help="default DATASET/questions.jsonl")
    parser.add_argument(
        "--mode", choices=("bm25", "embedding", "hybrid"), default=Settings.model_fields["search_mode"].default
    )
    parser.add_argument("--state", type=Path, default=None, help="scratch state folder to keep (default: a temp one)")
    parser.add_argument("--misses", action="store_true", help="list where each question's missed evidence ranked")
    parser.add_argument(
        "--smoke", action="store_true", help=f"the first {SMOKE_QUESTIONS} questions over their own files only (CI)"
    )
    args = parser.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    dataset = args.dataset.resolve()
    questions = args.questions or dataset / "questions.jsonl"
    with contextlib.ExitStack() as stack, scratch_settings_env():
        if args.smoke:
            sliced = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="scriptorium-coding-smoke-")))
            questions = smoke_slice(dataset, questions, sliced)
            dataset = sliced
        if args.state is not None:
            run(dataset, questions, args.mode, args.state.resolve(), args.misses)
            return
        with tempfile.TemporaryDirectory(prefix="scriptorium-coding-") as tmp:
            run(dataset, questions, args.mode, Path(tmp) / "state", args.misses)


if __name__ == "__main__":
    main()
