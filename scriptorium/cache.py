"""A small bounded mapping for in-process caches of immutable values."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """Least-recently-used mapping that forgets the oldest entries beyond ``limit`` entries, or beyond
    ``max_weight`` in all (each entry weighs what its :meth:`put` says: the bytes a parsed topic came from,
    say), so a cache is sized by the memory it holds rather than by a count that fits one workspace.

    Long-running workers parse and build trees on every transaction; the values
    are immutable and derivable, so forgetting them only costs a re-read.
    """

    def __init__(self, limit: int, max_weight: int | None = None) -> None:
        self.limit = limit
        self.max_weight = max_weight
        self.weight = 0
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()  # the API serves requests from a thread pool

    def get(self, key: K) -> V | None:
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            self._data.move_to_end(key)
            return entry[0]

    def put(self, key: K, value: V, weight: int = 1) -> None:
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.weight -= old[1]
            self._data[key] = (value, weight)
            self.weight += weight
            while len(self._data) > self.limit or (
                self.max_weight is not None and self.weight > self.max_weight and len(self._data) > 1
            ):
                _key, (_value, dropped) = self._data.popitem(last=False)
                self.weight -= dropped

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.weight = 0

    def __len__(self) -> int:
        return len(self._data)
