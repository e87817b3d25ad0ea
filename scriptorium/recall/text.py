"""What a record looks like to search: its words, its display text, its snippet."""

from __future__ import annotations

import re
from collections import Counter

from scriptorium.workspace.topics import Record

_WORD = re.compile(r"[^\W_]+")
_FOOTNOTE_REF = re.compile(r"\[\^[^\]\s]+\]")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_SPACE = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?])")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would you your yours yourself yourselves""".split()  # noqa: SIM905
)
"""English function words: they match almost every record and rank none of them."""


def tokenize(text: str) -> list[str]:
    """Lower-cased words and numbers, without stopwords (queries and records alike)."""
    return [word for word in _WORD.findall(text.lower()) if word not in STOPWORDS]


def display_text(record: Record) -> str:
    """The record's prose: footnote markers dropped, links reduced to their labels."""
    text = _FOOTNOTE_REF.sub("", record.text)
    text = _LINK.sub(lambda m: m.group(1), text)
    return _SPACE_BEFORE_PUNCT.sub(r"\1", _SPACE.sub(" ", text)).strip()


def record_terms(record: Record, text: str) -> Counter[str]:
    """The words BM25 sees: the prose, plus the heading chain it sits under."""
    return Counter(tokenize(" ".join((*record.headings, text))))


def snippet(text: str, query_words: set[str], width: int = 200) -> str:
    """Up to ``width`` characters of ``text`` around the first query word."""
    if len(text) <= width:
        return text
    start = 0
    for match in _WORD.finditer(text):
        if match.group(0).lower() in query_words:
            start = max(0, match.start() - width // 4)
            break
    piece = text[start : start + width].strip()
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")
