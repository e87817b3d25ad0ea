"""How recall may search and how much it answers by default: the names the command line's parser offers
without loading the index (numpy, the caches) it describes."""

from __future__ import annotations

from typing import Literal

DEFAULT_LIMIT = 5
SearchMode = Literal["bm25", "embedding", "hybrid"]

SEARCH_MODES: tuple[SearchMode, ...] = ("bm25", "embedding", "hybrid")
