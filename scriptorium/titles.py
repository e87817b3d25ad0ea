"""A title taken from what was said: how a conversation its runtime left untitled is named.

The importer titles such a session by its first user message (:func:`derived_title`). The words are the
conversation's own, so forgetting that message must take them along: the erasure looks for
:func:`title_words` of every forgotten text (``workspace.sources.forgotten_forms``), and a derived title never
names a file — topic paths keep the session's ID (``Session.topic_name``), so a forget rewrites a heading,
never a path in history.
"""

from __future__ import annotations

import re

TITLE_CHARS = 48
"""The words' share of a title: cut at a word within this many characters."""
_MARKUP = re.compile(r"[\[\]^|#*_`<>\\]+")
"""Characters that mean something in a topic's Markdown (links, block IDs, emphasis): a heading gets none."""


def title_words(text: str) -> str:
    """The words a title keeps of ``text``: Markdown markup dropped, whitespace folded, cut at a word within
    :data:`TITLE_CHARS` (an ellipsis marks the cut). Empty when nothing is left."""
    words = " ".join(_MARKUP.sub(" ", text).split())
    if len(words) <= TITLE_CHARS:
        return words
    cut = words[: TITLE_CHARS + 1]
    kept = cut[: cut.rfind(" ")] if " " in cut else cut[:TITLE_CHARS]
    return kept.rstrip(" ,.;:-") + "…"


def derived_title(text: str, session_id: str) -> str | None:
    """The title of a session whose first user message is ``text``: its words and the end of the session's
    ID, so that two sessions that began alike are told apart. None when the message has no words."""
    words = title_words(text)
    return f"{words} · {session_id[-8:]}" if words else None
