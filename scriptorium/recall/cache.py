"""The recall index's disk cache: one shard per topic, source trust, and a manifest written last.

A one-topic edit rewrites one shard and the manifest. A shard whose signature
disagrees with the manifest (a crash between the two), or that cannot be read,
is left out and its topic parsed again; a damaged or outdated manifest drops
the whole cache. Derived state: nothing is fsynced, deleting it loses nothing.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

CACHE_VERSION = 2
"""Bump when the cached layout, the tokenizer or the scorer changes: older caches are then rebuilt."""
CACHE_DIR = f"recall-bm25.v{CACHE_VERSION}"
MANIFEST = "manifest.pickle"
SOURCES_FILE = "sources.pickle"

Shard = tuple[str, Any, list[Any]]
"""(topic path, its file signature, its records as the index stores them)."""


@dataclass(slots=True)
class Cached:
    """What a load found: the install gate (None when some shard was missing), shards and source trust."""

    gate: Any
    shards: list[Shard] = field(default_factory=list)
    sources: dict[str, Any] = field(default_factory=dict)
    folders: dict[str, Any] = field(default_factory=dict)


class ShardedCache:
    """The cache folder of one workspace's index."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _shard(self, topic: str) -> Path:
        return self.directory / "topics" / (hashlib.sha1(topic.encode()).hexdigest() + ".pickle")

    @staticmethod
    def _read(path: Path) -> Any:
        with path.open("rb") as handle:
            return pickle.load(handle)

    @staticmethod
    def _write(path: Path, payload: object) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)

    def load(self) -> Cached | None:
        """The cached index, or None when there is none usable."""
        try:
            manifest = self._read(self.directory / MANIFEST)
            if not isinstance(manifest, dict) or manifest.get("version") != CACHE_VERSION:
                log.info("recall.cache_outdated", path=str(self.directory))
                return None
            sources = self._read(self.directory / SOURCES_FILE)
            cached = Cached(manifest["gate"], sources=sources["sources"], folders=sources["folders"])
            for topic, sig in manifest["topics"].items():
                try:
                    shard = self._read(self._shard(topic))
                    current = shard["topic"] == topic and shard["signature"] == sig
                except Exception:  # missing or torn
                    current = False
                if not current:
                    cached.gate = None  # an incomplete load must scan the topics on the first refresh
                    continue
                cached.shards.append((topic, sig, shard["docs"]))
            return cached
        except FileNotFoundError:
            return None
        except Exception as exc:  # a damaged cache is rebuilt, never trusted
            log.warning("recall.cache_unreadable", path=str(self.directory), error=str(exc))
            return None

    def save(
        self,
        gate: Any,
        topics: Mapping[str, Any],
        changed: Iterable[Shard],
        removed: Iterable[str],
        sources: Mapping[str, Any] | None,
        folders: Mapping[str, Any],
    ) -> None:
        """Write the changed shards, drop removed ones, the sources when given, then the manifest."""
        try:
            for topic, sig, docs in changed:
                self._write(self._shard(topic), {"topic": topic, "signature": sig, "docs": docs})
            for topic in removed:
                self._shard(topic).unlink(missing_ok=True)
            if sources is not None or not (self.directory / SOURCES_FILE).exists():
                self._write(self.directory / SOURCES_FILE, {"sources": dict(sources or {}), "folders": dict(folders)})
            self._write(self.directory / MANIFEST, {"version": CACHE_VERSION, "gate": gate, "topics": dict(topics)})
        except OSError as exc:  # the cache is an optimisation: a read-only disk still searches
            log.warning("recall.cache_not_written", path=str(self.directory), error=str(exc))
