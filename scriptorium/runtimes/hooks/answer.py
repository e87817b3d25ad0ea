"""What the context hooks hand the runtime, apart from memory itself: the answer's shape within Claude
Code's cap on added context (:func:`context_output`), the project a session belongs to (:func:`same_project`:
SessionStart adds the newest records of that project's earlier sessions), and the recall budget past which
a prompt goes on without context (:func:`within`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scriptorium.logs import get_logger
from scriptorium.recall.places import project_root

log = get_logger(__name__)
CONTEXT_CAP = 10_000
"""Claude Code's cap on a hook's additionalContext, in characters."""
Output = dict[str, Any] | None


def context_output(event: str, text: str) -> Output:
    """The hook answer that adds ``text`` to the model's context (None when there is nothing to add)."""
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": cap(text)}}


def cap(text: str, limit: int = CONTEXT_CAP) -> str:
    """``text`` within ``limit`` characters, cut at a line and keeping the closing ``</memory-context>``."""
    if len(text) <= limit:
        return text
    closing = "\n</memory-context>" if text.rstrip().endswith("</memory-context>") else ""
    room = limit - len(closing) - len("\n…")
    cut = text[:room]
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return f"{cut}\n…{closing}"


def same_project(folders: Mapping[str, object], cwd: Path, exclude: str = "") -> set[str]:
    """Of ``folders`` (session ID → the folder it ran in), the sessions that ran in the project of ``cwd``:
    inside its git work tree, or, outside one, in that very folder (a home folder is not one project)."""
    root = project_root(cwd)
    base = str(root if root is not None else cwd)  # a Path's string: no trailing slash but the root's
    inside = base if base.endswith("/") else f"{base}/"
    found = set()
    for session, ran in folders.items():
        if session == exclude or not isinstance(ran, str) or not ran:
            continue
        # A folder written plainly is decided on its string (a project's year of sessions, no Path each); only
        # one a Path would rewrite (a trailing slash or "/.", "//", "/./") is compared as a Path.
        if ran == base or (root is not None and ran.startswith(inside)):
            found.add(session)
        elif ran.endswith(("/", "/.")) or "//" in ran or "/./" in ran:
            where = Path(ran)
            if (root is not None and where.is_relative_to(root)) or (root is None and where == cwd):
                found.add(session)
    return found


def within(budget_s: float, call: Callable[[], str], what: str) -> str:
    """``call()``'s answer if it comes within ``budget_s``, else "" (the work is abandoned, not awaited)."""
    answer: list[str] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            answer.append(call())
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=run, name=f"hook-{what}", daemon=True)
    worker.start()
    worker.join(budget_s)
    if failure:
        raise failure[0]
    # An answer that came after the budget counts as late, even if it is here by now: the thread may
    # have run to the end before this one looked (the interpreter switches threads every few ms).
    if not answer or time.monotonic() - started > budget_s:
        log.info("hook.over_budget", what=what, budget_ms=round(budget_s * 1000))
        return ""
    return answer[0]
