"""A snapshot's indexes kept on disk between processes, so a new process does not parse every topic.

A snapshot (:mod:`scriptorium.workspace.snapshot`) is built by parsing every topic of the installed tree
once: at a year's size, seconds in every new process that reads or changes memory (an import, a server's
first request, a CLI change). Its indexes — the topics' blob IDs, where each record ID lives, creation
order, the Timeline files' topics, block links, the conversations each topic cites — hold no text, only IDs
and paths, and are what a snapshot is made of apart from the parsed topics it fetches on demand.

A process that built or moved a snapshot writes its indexes here when it closes the workspace
(:data:`SNAPSHOT_CACHE`: the tree they are of, whole, in one file renamed into place). The next process
loads them: for the installed tree as they are; for an older tree, it derives the installed one from them,
parsing only the topics whose blob IDs differ (a comparison of two tree listings), as a transaction derives
its snapshot. A forget removes the file (a topic path can name a forgotten conversation), and a process
whose caches a forget dropped never writes one from before it. Derived state: nothing is fsynced, a file of
another version, or one that does not load, is ignored and the snapshot built again.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import threading
from pathlib import Path
from typing import Any

from scriptorium.logs import get_logger
from scriptorium.workspace.paths import RUNTIME_DIR

log = get_logger(__name__)

SNAPSHOT_CACHE = "snapshot.pickle"
"""Under ``.scriptorium/cache``."""
VERSION = 1
"""Bump when the indexes' layout or what the parser finds in a topic changes: older files are then ignored."""
FIELDS = ("topic_shas", "id_to_topic", "timeline_members", "creation", "edges", "citing")
"""The snapshot's fields the file holds (with the tree and commit they are of)."""


def cache_file(root: Path) -> Path:
    return Path(root) / RUNTIME_DIR / "cache" / SNAPSHOT_CACHE


def load(root: Path) -> dict[str, Any] | None:
    """The indexes a process left, or None when there are none usable."""
    try:
        with cache_file(root).open("rb") as handle:
            data = pickle.load(handle)
    except FileNotFoundError:
        return None
    except Exception as exc:  # a damaged file is ignored, never trusted
        log.warning("workspace.snapshot_cache_unreadable", error=str(exc))
        return None
    if not isinstance(data, dict) or data.get("version") != VERSION or not all(key in data for key in FIELDS):
        return None
    return data


def save(root: Path, data: dict[str, Any]) -> None:
    """Replace the file with ``data`` (the fields of :data:`FIELDS`, ``tree`` and ``commit``)."""
    path = cache_file(root)
    if not path.parent.parent.is_dir():  # the workspace is gone (moved to another host, put aside): keep nothing,
        return  # and never make its folders again
    tmp = path.with_name(f".{SNAPSHOT_CACHE}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(exist_ok=True)
        with tmp.open("wb") as handle:
            pickle.dump({**data, "version": VERSION}, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError as exc:  # an optimisation: a read-only disk still works, it builds again
        with contextlib.suppress(OSError):
            tmp.unlink()
        log.warning("workspace.snapshot_cache_not_written", error=str(exc))


def remove(root: Path) -> None:
    """Drop the file (a forget landed)."""
    with contextlib.suppress(FileNotFoundError):
        cache_file(root).unlink()
