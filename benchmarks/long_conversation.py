"""A write pass at the end of a long conversation costs what one at its start does (layout 4's parts).

Three workspaces written in lockstep, a pass to each in turn, each pass archiving ``--per-pass`` messages of
about 1.1 KB and installing a topic that cites them:

* ``parts``: every pass appends to one conversation (``--passes`` × ``--per-pass`` messages: 2,400 by default,
  2.8 MB), its file in parts of ``ConversationArchive.PART_BYTES`` (the default);
* ``one file``: the same, the conversation's file never cut (layout 3: each pass writes all of it again);
* ``floor``: each pass appends to a conversation of its own (what a pass costs whatever came before).

Prints the median pass of the first and of the last ``--window`` passes of each side, then one JSON line:
``pass_ms_first``, ``pass_ms_last``, ``growth_last_over_first`` (parts, last over first), ``floor_ms_last``,
``last_over_floor``, ``one_file_ms_last``, ``one_file_growth``, ``conversation_mb``, ``parts``.

Usage: python benchmarks/long_conversation.py [--passes N] [--per-pass N] [--window N] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scriptorium.workspace import MemoryWorkspace, SourceMessage, WorkspaceConfig
from scriptorium.workspace.paths import conversation_file, source_path

TEXT = "the deploy ran the migration then the cache warmed and the tests passed again "


def one_pass(ws: MemoryWorkspace, thread: str, n: int, per_pass: int) -> float:
    """Archive ``per_pass`` messages of ``thread`` and install a topic citing the first; its milliseconds."""
    messages = [
        SourceMessage(
            "claude-code", thread, f"m{n}-{k}", "user", "2026-11-01T00:00:00Z", f"pass {n} said {k}: {TEXT * 14}"
        )
        for k in range(per_pass)
    ]
    started = time.perf_counter()
    with ws.lock():
        paths = ws.archive_sources(messages)
    text = f"# Pass {n}\n\n2026-11-01: Fact {n} [k](claude-code/{thread}/m{n}-0).\n"
    ws.transact(lambda stage: stage.write(f"topics/passes/p{n}.md", text), message=f"pass {n}", appended_sources=paths)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=400)
    parser.add_argument("--per-pass", type=int, default=6)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="40 passes, windows of 5")
    args = parser.parse_args()
    if args.smoke:
        args.passes, args.window = 40, 5
    logging.disable(logging.CRITICAL)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))

    tmp = Path(tempfile.mkdtemp(prefix="long-conversation-"))
    sides = {name: MemoryWorkspace.init(tmp / name, WorkspaceConfig()) for name in ("parts", "one file", "floor")}
    sides["one file"].archive.PART_BYTES = 1 << 40  # type: ignore[attr-defined]
    times: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for n in range(args.passes):
            for name, ws in sides.items():
                thread = f"short-{n}" if name == "floor" else "long"
                times[name].append(one_pass(ws, thread, n, args.per_pass))
        parts = sides["parts"].archive.parts(conversation_file(source_path("claude-code", "long", "m0-0")))
    finally:
        for ws in sides.values():
            ws.close()

    def first(name: str) -> float:
        return statistics.median(times[name][: args.window])

    def last(name: str) -> float:
        return statistics.median(times[name][-args.window :])

    size = sum((tmp / "parts" / part).stat().st_size for part in parts)
    print(f"{args.passes} passes of {args.per_pass} messages; medians of the first and last {args.window} passes")
    print(f"{'side':>10} {'first ms':>9} {'last ms':>8} {'last/first':>11}")
    for name in sides:
        print(f"{name:>10} {first(name):9.1f} {last(name):8.1f} {last(name) / first(name):11.2f}")
    print(f"the long conversation: {size / 1e6:.2f} MB in {len(parts)} part(s)")
    print(
        json.dumps(
            {
                "pass_ms_first": round(first("parts"), 2),
                "pass_ms_last": round(last("parts"), 2),
                "growth_last_over_first": round(last("parts") / first("parts"), 3),
                "floor_ms_last": round(last("floor"), 2),
                "last_over_floor": round(last("parts") / last("floor"), 3),
                "one_file_ms_last": round(last("one file"), 2),
                "one_file_growth": round(last("one file") / first("one file"), 3),
                "conversation_mb": round(size / 1e6, 3),
                "parts": len(parts),
            }
        )
    )


if __name__ == "__main__":
    main()
