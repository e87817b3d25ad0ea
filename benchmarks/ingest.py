"""``scriptorium ingest`` throughput with the verbatim writer, beside the floor of archiving alone.

Generates a 10,000-message Claude Code transcript (alternating user and
assistant turns with tool calls in between), then in the same run:

* ``ingest``: the ``scriptorium ingest`` command (in-process: import into
  SQLite with secrets redacted, as by default, forced write passes in 16k-token
  batches, verbatim writer,
  transactions, views, git);
* ``floor``: archiving the same messages as sources alone (the files every
  pass must write, fsynced), plus the one transaction that commits them.

Both sides are warmed alike (one untimed round of each first), then each of
``--repeats`` rounds runs both on fresh folders, back to back, alternating which
goes first, so machine noise and order hit them alike. Before each side the
process-wide caches (token counts, parsed topics, views: what one side could
leave the other) are dropped, dirty pages are written out (``os.sync``) and,
where the kernel lets this process, the page cache is dropped too. Figures are
medians over the rounds (the ratio is the median of the rounds' own ratios).

Then ``incremental``: a Claude Code transcript of ``--incremental-mb`` (10 MB)
is imported whole into a fresh session store (the import step: read, parse,
store nodes, move the cursor), two turns are appended, and it is imported again:
``incremental_fraction`` is the second import's time over the first's (medians
over the rounds; the writer's pass is the same for both and left out).

Prints a table, then one JSON line: ``messages_per_s``,
``archive_floor_messages_per_s``, ``ratio_vs_floor``, ``incremental_fraction``.

Usage: python benchmarks/ingest.py [--messages N] [--repeats N] [--incremental-mb N]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scriptorium.cli import main as cli
from scriptorium.producers.claude_code import parse_sessions
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.staging import TOPIC_API
from scriptorium.writing.batch import to_message

WORDS = [
    "the",
    "cluster",
    "needs",
    "a",
    "redis",
    "broker",
    "and",
    "postgres",
    "sessions",
    "so",
    "we",
    "plan",
    "nightly",
    "reorganize",
    "at",
    "three",
    "with",
    "short",
    "answers",
    "python",
    "first",
    "and",
    "careful",
    "tests",
    "for",
    "every",
    "failure",
    "path",
    "including",
    "crashes",
]


def generate(path: Path, messages: int) -> None:
    t0 = datetime(2026, 6, 1, tzinfo=UTC)
    parent = None
    lines = [json.dumps({"type": "summary", "summary": "Benchmark conversation", "leafUuid": "x"})]
    for i in range(messages):
        role = "user" if i % 2 == 0 else "assistant"
        text = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(40)) + f" (turn {i})"
        content: object = text if role == "user" else [{"type": "text", "text": text}]
        uuid = f"msg-{i:06d}"
        entry = {
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "bench-session",
            "type": role,
            "timestamp": (t0 + timedelta(seconds=30 * i)).isoformat().replace("+00:00", "Z"),
            "message": {"role": role, "content": content},
        }
        lines.append(json.dumps(entry))
        parent = uuid
        if role == "assistant" and i % 10 == 1:  # a tool call and its result, never written
            call, result = f"tool-{i:06d}", f"result-{i:06d}"
            lines.append(
                json.dumps(
                    {
                        **entry,
                        "uuid": call,
                        "parentUuid": parent,
                        "message": {
                            "role": "assistant",
                            "content": [{"type": "tool_use", "id": call, "name": "Bash", "input": {"command": "ls"}}],
                        },
                    }
                )
            )
            lines.append(
                json.dumps(
                    {
                        **entry,
                        "uuid": result,
                        "parentUuid": call,
                        "type": "user",
                        "message": {
                            "role": "user",
                            "content": [{"type": "tool_result", "tool_use_id": call, "content": "README.md"}],
                        },
                    }
                )
            )
            parent = result
    path.write_text("\n".join(lines) + "\n")


def run_ingest(transcript: Path, state: Path) -> dict[str, object]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["ingest", str(transcript), "--state", str(state), "--json"])
    assert code == 0
    return json.loads(out.getvalue())  # type: ignore[no-any-return]


def run_floor(transcript: Path, root: Path) -> int:
    (session,) = parse_sessions([transcript])
    sources = [to_message(n, "claude-code", "trusted").source for n in session.nodes if n.is_content]
    ws = MemoryWorkspace.init(root)
    with ws.lock():
        paths = ws.archive_sources(sources)
        ws.transact(lambda stage: None, message="archive", appended_sources=paths, staging=TOPIC_API)
    ws.close()
    return len(sources)


def cold_start() -> bool:
    """What one side leaves the next dropped: process caches, dirty pages, and (as root) the page cache.
    Returns whether the page cache could be dropped."""
    from scriptorium.workspace.epoch import drop_process_caches

    drop_process_caches()
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
        return True
    except OSError:
        return False


def incremental(tmp: Path, megabytes: float, rounds: int) -> tuple[float, float, float]:
    """(whole import s, re-import after two appended turns s, fraction), medians over ``rounds``."""
    from scriptorium.producers.ingest import import_paths
    from scriptorium.redaction import redactor_for
    from scriptorium.sessions import open_store

    redactor = redactor_for(tmp, True)  # as the CLI's default: secrets taken out of every line read

    whole, again = [], []
    for round_ in range(rounds):
        path = tmp / f"big-{round_}.jsonl"
        messages = 1000
        generate(path, messages)
        per_message = path.stat().st_size / messages
        messages = int(megabytes * 1024 * 1024 / per_message)
        generate(path, messages)
        store = open_store(f"sqlite:///{tmp / f'incremental-{round_}.db'}")
        t0 = time.perf_counter()
        first = import_paths(store, [path], redactor=redactor)
        whole.append(time.perf_counter() - t0)
        lines = path.read_text().splitlines()
        last = json.loads(lines[-1])
        with path.open("a") as handle:
            for n, role in enumerate(("user", "assistant")):
                uuid = f"appended-{n}"
                entry = {**last, "uuid": uuid, "parentUuid": last["uuid"], "type": role}
                entry["message"] = {"role": role, "content": f"appended turn {n}"}
                handle.write(json.dumps(entry) + "\n")
                last = entry
        t0 = time.perf_counter()
        second = import_paths(store, [path], redactor=redactor)
        again.append(time.perf_counter() - t0)
        store.close()
        assert first.new_nodes >= messages and second.new_nodes == 2 and second.lines_read == 2, second
    fraction = statistics.median(a / w for w, a in zip(whole, again, strict=True))
    return statistics.median(whole), statistics.median(again), fraction


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--incremental-mb", type=float, default=10.0)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="200 messages, one round, a 0.2 MB transcript: that it runs, not its figures (CI)",
    )
    args = parser.parse_args()
    if args.smoke:
        args.messages, args.repeats, args.incremental_mb = 200, 1, 0.2
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    ingest_s: list[float] = []
    floor_s: list[float] = []
    results: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="scriptorium-bench-") as tmp:
        transcript = Path(tmp) / "bench.jsonl"
        generate(transcript, args.messages)
        run_ingest(transcript, Path(tmp) / "warm-state")  # both sides warmed alike, untimed
        run_floor(transcript, Path(tmp) / "warm-floor" / "memory")
        page_cache_dropped = True
        for round_ in range(args.repeats):
            state = Path(tmp) / f"state-{round_}"

            def ingest_side(state: Path = state) -> None:
                result = run_ingest(transcript, state)
                assert result["sources"] == args.messages, result
                results.append(result)

            def floor_side(round_: int = round_) -> None:
                assert run_floor(transcript, Path(tmp) / f"floor-{round_}" / "memory") == args.messages

            sides = [(ingest_side, ingest_s), (floor_side, floor_s)]
            for side, times in sides if round_ % 2 == 0 else sides[::-1]:  # alternate which goes first
                page_cache_dropped &= cold_start()
                t0 = time.perf_counter()
                side()
                times.append(time.perf_counter() - t0)
        result = results[-1]
        again = run_ingest(transcript, state)
        assert again["records"] == 0
        whole_s, again_s, fraction = incremental(Path(tmp), args.incremental_mb, args.repeats)
    rate = args.messages / statistics.median(ingest_s)
    floor_rate = args.messages / statistics.median(floor_s)
    ratio = statistics.median(f / i for i, f in zip(ingest_s, floor_s, strict=True))
    print(f"{'what':>22} {'messages':>9} {'median s':>9} {'msg/s':>9}  rounds (s)")
    for label, times, per_s in (("scriptorium ingest", ingest_s, rate), ("archive floor", floor_s, floor_rate)):
        rounds = ", ".join(f"{t:.2f}" for t in times)
        print(f"{label:>22} {args.messages:>9} {statistics.median(times):>9.2f} {per_s:>9.1f}  {rounds}")
    print(f"batches: {result['batches']}, records: {result['records']}, topics: {len(result['topics'])}")  # type: ignore[arg-type]
    order = "alternating first side; process caches dropped and os.sync() before each side"
    print(f"{order}; page cache {'dropped' if page_cache_dropped else 'not droppable here (kept)'}")
    print(
        f"incremental: importing a {args.incremental_mb:g} MB transcript whole {whole_s * 1000:.1f} ms, "
        f"again after two appended turns {again_s * 1000:.2f} ms = {fraction:.4f} (target <= 0.05)"
    )
    print(
        json.dumps(
            {
                "messages_per_s": round(rate, 1),
                "archive_floor_messages_per_s": round(floor_rate, 1),
                "ratio_vs_floor": round(ratio, 3),
                "incremental_fraction": round(fraction, 5),
            }
        )
    )


if __name__ == "__main__":
    main()
