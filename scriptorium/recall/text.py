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
from collections.abc import Sequence
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


_TERMS: dict[str, str] = {}
"""Lower-cased word → its term: its stem, or "" for a stopword. Words repeat (a workspace of 100,000
records has a few tens of thousands of distinct ones), so each is stemmed once per process, not once per
use; cleared when it grows past :data:`TERM_CACHE_LIMIT`."""
TERM_CACHE_LIMIT = 500_000


def _learn(words: set[str]) -> dict[str, str]:
    """The term table, holding every word of ``words`` (a full table is replaced, not emptied, so a
    thread still reading the old one finds what it learnt there)."""
    global _TERMS
    table = _TERMS
    new = [word for word in words if word not in table]
    if not new:
        return table
    if len(table) + len(new) > TERM_CACHE_LIMIT:
        table = _TERMS = {}
        new = list(words)
    stems = _stemmer().stemWords(new)
    table.update((word, "" if word in STOPWORDS else term) for word, term in zip(new, stems, strict=True))
    return table


def words_of(text: str) -> list[str]:
    """The lower-cased words and numbers of ``text``, before analysis."""
    return _WORD.findall(text.lower())


def terms_of(words: set[str]) -> dict[str, str]:
    """A table holding each of ``words``' term: its stem, or "" for a stopword (read, do not change)."""
    return _learn(words)


def tokenize(text: str) -> list[str]:
    """Stems of the lower-cased words and numbers, without stopwords (queries and records alike)."""
    words = _WORD.findall(text.lower())
    terms = _learn(set(words))
    return [term for word in words if (term := terms[word])]


def tokenize_many(texts: Sequence[str]) -> list[list[str]]:
    """:func:`tokenize` of each text, with one lookup of the words new to this process for all of them."""
    groups = [_WORD.findall(text.lower()) for text in texts]
    terms = _learn({word for group in groups for word in group})
    return [[term for word in group if (term := terms[word])] for group in groups]


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
    return prose(record.text)


def prose(text: str) -> str:
    """A record's text (date and block IDs off) as :func:`display_text` shows it."""
    if "[^" in text:  # each pattern only where its marker is: most records have one footnote, no link
        text = _FOOTNOTE_REF.sub("", text)
    if "](" in text:
        text = _LINK.sub(lambda m: m.group(1), text)
    text = " ".join(text.split())  # split(): the \s+ runs, ends stripped; only spaces remain
    if " ." in text or " ," in text or " ;" in text or " :" in text or " !" in text or " ?" in text:
        text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    return text


ROLES = ("User", "Assistant")
"""The role labels the verbatim writer opens a record with (:data:`scriptorium.writers.verbatim.ROLE_LABEL`;
a test keeps the two alike)."""
_LABEL = r"[A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}"
_SPEAKER = re.compile(rf"(?P<role>{'|'.join(ROLES)}): (?:(?P<name>{_LABEL}): )?")


def speaker_of(text: str) -> str | None:
    """The speaker a record's text opens with (its name label, else its role label), or None
    (:mod:`scriptorium.recall.speakers`)."""
    match = _SPEAKER.match(text)
    if match is None:
        return None
    return match.group("name") or match.group("role")


def indexed_headings(headings: tuple[str, ...], text: str) -> tuple[str, ...]:
    """The headings whose words a record's terms hold: its chain, but none for a turn of a conversation
    between a user and an agent (a bare role label, :data:`ROLES`). Such a topic's heading is the session's
    title, which every turn of it shares: its words would match each turn alike, and the shortest turns
    (a tool's timeout, an "ok") most. Tuned on the coding dev set only (recall@10 / context recall, with the
    user's stage): kept 0.570 / 0.570, left out 0.628 / 0.640. A transcript of named people keeps its
    headings (LoCoMo dev: 0.792 @10 with them, 0.781 without)."""
    return () if speaker_of(text) in ROLES else headings


def record_terms(record: Record, text: str) -> Counter[str]:
    """The words BM25 sees: the prose, the heading chain it sits under (:func:`indexed_headings`), and its
    date's words."""
    return Counter(tokenize(" ".join((*indexed_headings(record.headings, text), text, *date_words(record.date)))))


def records_terms(records: Sequence[Record], texts: Sequence[str]) -> list[list[str]]:
    """The terms of a topic's records (``texts`` their prose), repeats kept: :func:`record_terms` as
    lists, tokenized together (a full build tokenizes every record of the workspace). A test checks both
    agree."""
    return tokenize_many(
        [
            " ".join((*indexed_headings(r.headings, t), t, *date_words(r.date)))
            for r, t in zip(records, texts, strict=True)
        ]
    )


def snippet(text: str, query_words: set[str], width: int = 200) -> str:
    """Up to ``width`` characters of ``text`` around the first query word, starting at a word."""
    if len(text) <= width:
        return text
    start = 0
    for match in _WORD.finditer(text):
        if stem([match.group(0).lower()])[0] in query_words:
            start = max(0, match.start() - width // 4)
            if start and not text[start - 1].isspace():  # not in the middle of a word
                space = text.find(" ", start, match.start())
                start = space + 1 if space >= 0 else match.start()
            break
    piece = text[start : start + width].strip()
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")
