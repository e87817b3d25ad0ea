"""The recall index's disk cache: the whole index in one file, read as it is, never re-derived.

The file holds the postings arrays, the records, each topic's signature and
slots, and the trust of every cited source, under the install gate (the
signature of ``.scriptorium/state.json``) it was current for. A new process
loads it and, while the gate holds, searches at once; when the gate moved, the
topic signatures say which topics to parse again. It is written whole to a
temporary file and renamed into place, so a reader sees the old index or the
new one, never half of either; a file that cannot be read or comes from
another layout is ignored and the index rebuilt from the topics. Derived
state: nothing is fsynced, deleting it loses nothing.

The pickle is compressed with Zstandard at its fastest level (``zstandard``, already the OpenClaw
reader's): at a heavy user's year the index is about 90 MB as it is, nearly as much as the raw
transcripts, and about a quarter of that compressed; loading it takes a tenth of a second longer,
within the first prompt's budget for loading the cache.
"""

from __future__ import annotations

import os
import pickle
import shutil
import threading
from pathlib import Path
from typing import Any

import zstandard

from scriptorium.logs import get_logger

log = get_logger(__name__)

CACHE_VERSION = 9
"""Bump when the cached layout, the tokenizer or the scorer changes: older caches are then rebuilt."""
CACHE_DIR = f"recall-bm25.v{CACHE_VERSION}"
INDEX_FILE = "index.pickle.zst"
LEVEL = 1
"""Zstandard's level: its fastest (about 4× smaller than the pickle; higher levels gain a tenth more)."""


class IndexCache:
    """The cache file of one workspace's index."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / INDEX_FILE

    def load(self) -> dict[str, Any] | None:
        """The cached index as :meth:`save` was given it, or None when there is none usable."""
        try:
            with self.path.open("rb") as handle, zstandard.ZstdDecompressor().stream_reader(handle) as stream:
                cached = pickle.load(stream)
        except FileNotFoundError:
            return None
        except Exception as exc:  # a damaged cache is rebuilt, never trusted
            log.warning("recall.cache_unreadable", path=str(self.path), error=str(exc))
            return None
        if not isinstance(cached, dict) or cached.get("version") != CACHE_VERSION:
            log.info("recall.cache_outdated", path=str(self.path))
            return None
        return cached

    def save(self, index: dict[str, Any]) -> None:
        """Replace the cache file with ``index`` (a dict of plain values and arrays)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as handle, zstandard.ZstdCompressor(level=LEVEL).stream_writer(handle) as stream:
                pickle.dump({**index, "version": CACHE_VERSION}, stream, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
            for older in self.directory.parent.glob("recall-bm25.v*"):  # an upgrade leaves the old layout behind
                if older.name != CACHE_DIR:
                    shutil.rmtree(older, ignore_errors=True)
        except OSError as exc:  # the cache is an optimisation: a read-only disk still searches
            tmp.unlink(missing_ok=True)
            log.warning("recall.cache_not_written", path=str(self.path), error=str(exc))
