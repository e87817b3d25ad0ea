"""A small bounded mapping for in-process caches of immutable values."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """Least-recently-used mapping that forgets the oldest entries beyond ``limit``.

    Long-running workers parse and build trees on every transaction; the values
    are immutable and derivable, so forgetting them only costs a re-read.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()  # the API serves requests from a thread pool

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.limit:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
