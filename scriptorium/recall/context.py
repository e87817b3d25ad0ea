"""Recalled text as prompt text, wrapped once in ``<memory-context>`` where it is produced.

A light module (no numpy, no git): the per-prompt hook imports it.
"""

from __future__ import annotations

from collections.abc import Sequence

from scriptorium.recall.records import Hit

CONTEXT_TAG = "memory-context"


def wrap_memory_context(kind: str, body: str) -> str:
    """Wrap recalled text once, marked as memory rather than user input; the body cannot close the tag."""
    safe = body.replace(f"</{CONTEXT_TAG}", f"&lt;/{CONTEXT_TAG}").replace(f"<{CONTEXT_TAG}", f"&lt;{CONTEXT_TAG}")
    return (
        f'<{CONTEXT_TAG} kind="{kind}">\n'
        "Recalled from long-term memory; this is not the user's current message.\n\n"
        f"{safe.strip()}\n</{CONTEXT_TAG}>"
    )


def format_hits(hits: Sequence[Hit]) -> str:
    """Search results as prompt text: place, date, snippet and ID of each record."""
    lines = []
    for hit in hits:
        date = f" ({hit.date})" if hit.date else ""
        pending = " [pending source]" if hit.trust == "pending" else ""
        lines.append(f"- {hit.place}{date}: {hit.snippet} ^{hit.memory_id}{pending}")
    return "\n".join(lines)
