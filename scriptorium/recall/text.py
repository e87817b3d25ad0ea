"""What a record looks like to search: its words, its display text, its snippet.

Words are lower-cased, stopwords left out, and reduced to their Snowball
(English) stem with PyStemmer, the same for records and queries: "moved",
"moving" and "moves" all search as "move". A record's date adds the words a
question uses for it: the year, the month's name and, for a full date, the
weekday ("2023-05-08" also searches as "2023", "may", "monday").
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from datetime import date as _date
from functools import lru_cache

import Stemmer

from scriptorium.workspace.topics import Record

_WORD = re.compile(r"[^\W_]+")
_FOOTNOTE_REF = re.compile(r"\[\^[^\]\s]+\]")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
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


_LOCAL = threading.local()
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")  # fmt: skip
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def _stemmer() -> Stemmer.Stemmer:
    stemmer = getattr(_LOCAL, "stemmer", None)  # a Stemmer object is not to be shared between threads
    if stemmer is None:
        stemmer = _LOCAL.stemmer = Stemmer.Stemmer("english")
    return stemmer


def stem(words: list[str]) -> list[str]:
    return list(_stemmer().stemWords(words))


def tokenize(text: str) -> list[str]:
    """Stems of the lower-cased words and numbers, without stopwords (queries and records alike)."""
    return stem([word for word in _WORD.findall(text.lower()) if word not in STOPWORDS])


def date_words(when: str | None) -> list[str]:
    """The words a question uses for a record's date: year, month name, weekday (as far as it is known)."""
    return list(_date_words(when)) if when else []


@lru_cache(maxsize=4096)
def _date_words(when: str) -> tuple[str, ...]:
    parts = [int(p) for p in when.split("-")]
    words = [str(parts[0])]
    if len(parts) > 1:
        words.append(MONTHS[parts[1] - 1])
    if len(parts) > 2:
        words.append(WEEKDAYS[_date(parts[0], parts[1], parts[2]).weekday()])
    return tuple(words)


def display_text(record: Record) -> str:
    """The record's prose: footnote markers dropped, links reduced to their labels."""
    text = record.text
    if "[^" in text:  # each pattern only where its marker is: most records have one footnote, no link
        text = _FOOTNOTE_REF.sub("", text)
    if "](" in text:
        text = _LINK.sub(lambda m: m.group(1), text)
    return _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(text.split()))  # split(): the \s+ runs, ends stripped


def record_terms(record: Record, text: str) -> Counter[str]:
    """The words BM25 sees: the prose, the heading chain it sits under, and its date's words."""
    return Counter(tokenize(" ".join((*record.headings, text, *date_words(record.date)))))


def snippet(text: str, query_words: set[str], width: int = 200) -> str:
    """Up to ``width`` characters of ``text`` around the first query word."""
    if len(text) <= width:
        return text
    start = 0
    for match in _WORD.finditer(text):
        if stem([match.group(0).lower()])[0] in query_words:
            start = max(0, match.start() - width // 4)
            break
    piece = text[start : start + width].strip()
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")
