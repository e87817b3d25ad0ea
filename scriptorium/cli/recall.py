"""``scriptorium memory search | promote | backfill``: recall and its trust at the shell."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from scriptorium.cli.output import EXIT_OK, EXIT_REJECTED, EXIT_RETRY, emit
from scriptorium.cli.parser import Declare
from scriptorium.recall.modes import DEFAULT_LIMIT, SEARCH_MODES

if TYPE_CHECKING:  # the handlers import what they run on: the parser loads none of it (issue 56)
    from scriptorium.settings import Settings


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.audience import OWNER, viewer_for
    from scriptorium.recall.branches import shared_view
    from scriptorium.recall.index import RecallIndex
    from scriptorium.workspace.workspace import MemoryWorkspace

    with MemoryWorkspace(settings.memory_dir, settings.workspace_config()) as ws:
        index = RecallIndex.open(ws.root)
        hits = index.search(
            args.query,
            args.limit,
            include_pending=args.include_pending,
            mode=args.mode or settings.search_mode,
            branches=shared_view(settings.session_store_url),
            viewer=viewer_for(args.as_requester) if args.as_requester else OWNER,
        )
    lines = []
    for hit in hits:
        place = " › ".join((hit.topic, *hit.headings))
        flag = ("  [pending]" if hit.trust == "pending" else "") + (f"  [{hit.branch}]" if hit.branch else "")
        flag += f"  [audience: {hit.audience.replace(',', ', ')}]" if hit.audience else ""
        lines.append(
            f"{hit.score:7.3f}  {hit.memory_id}  {place}{flag}\n         {hit.date or 'undated'}: {hit.snippet}"
        )
    emit(args, {"query": args.query, "results": [h.to_dict() for h in hits]}, "\n".join(lines) or "no matches")
    return EXIT_OK


def cmd_promote(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.workspace.workspace import MemoryWorkspace

    with MemoryWorkspace(settings.memory_dir, settings.workspace_config()) as ws:
        result = ws.promote_source(args.source)
    human = f"promoted {args.source} (revision {result.revision[:12]})" if result.changed else "already trusted"
    emit(args, result.to_dict(), human)
    return EXIT_OK


def cmd_backfill(args: argparse.Namespace, settings: Settings) -> int:
    from tqdm import tqdm

    from scriptorium.composition import build_runtime
    from scriptorium.writing.outcomes import Failed, Pending, Written

    runtime = build_runtime(settings, create=False)
    try:
        service = runtime.service
        with tqdm(total=service.backfill_due(), unit="src", disable=args.json or not sys.stderr.isatty()) as bar:
            service.on_batch = lambda batch, result: bar.update(len(batch.messages))
            outcome = service.backfill()
        revision = runtime.workspace.revision
    finally:
        runtime.close()
    payload: dict[str, Any] = {"outcome": type(outcome).__name__, "revision": revision}
    if isinstance(outcome, Written):
        payload |= {"sources": outcome.nodes_written, "batches": outcome.batches, "records": outcome.records_created}
        human = (
            f"backfilled {outcome.nodes_written} source(s) in {outcome.batches} batch(es): "
            f"{outcome.records_created} record(s); revision {revision[:12]}"
        )
    elif isinstance(outcome, Pending | Failed):
        payload |= {"reason": str(outcome.reason), "message": outcome.message}
        emit(args, payload, f"error {outcome.reason}: {outcome.message}")
        return EXIT_RETRY if outcome.retryable else EXIT_REJECTED
    else:
        human = f"nothing to backfill (revision {revision[:12]})"
    emit(args, payload, human)
    return EXIT_OK


def register(verb: Declare) -> None:
    """Add these verbs through the CLI's ``verb(name, handler, help, arguments)``."""

    def search(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("query", help="what to look for")
        sub.add_argument("-n", "--limit", type=int, default=DEFAULT_LIMIT, help="how many results")
        sub.add_argument(
            "--mode", choices=SEARCH_MODES, help="bm25 | embedding | hybrid (default $SCRIPTORIUM_SEARCH_MODE)"
        )
        sub.add_argument(
            "--include-pending", action="store_true", help="also show records backed by pending sources (marked)"
        )
        sub.add_argument(
            "--as", dest="as_requester", metavar="NAME", help="only what requester NAME may see (its own and shared)"
        )

    verb("search", cmd_search, "search the memory's records (BM25); pending-backed ones only when asked", search)
    verb(
        "promote",
        cmd_promote,
        "mark an archived source trusted (its records enter automatic recall)",
        lambda sub: sub.add_argument("source", help="provider/thread/message, or its sources/… path"),
    )
    verb("backfill", cmd_backfill, "write trusted sources that no topic cites yet, batch by batch")
