"""Time in a question: "in May 2023", "on October 13, 2023", "in June", "last year", "two years ago".

A question names a time the records it wants are dated in, more often than it
names words they hold. :func:`time_expressions` finds the calendar times a
query names — a day, a month of a year, a month of any year, a year — and
:func:`matches` tells, from a record's own date (``YYYY``, ``YYYY-MM`` or
``YYYY-MM-DD``), whether the record falls in one; the index boosts those.

Relative times ("last year", "three months ago", "yesterday") are relative to
something the question does not say: they are read against the newest record
date of the memory (``anchor``), the day the conversation has reached, never
the machine's clock. Weekdays are left to the words a record's date adds
("saturday"): a question's "last Saturday" names no week.

The grammar is a few patterns over month names, numbers and a handful of
relative phrases, on purpose: general date parsers (``dateparser``,
``dateutil``'s fuzzy mode) read "may" and "march" in any sentence as dates and
resolve "in June" to the current year, which is the wrong answer here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np
import numpy.typing as npt

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
           "nine": 9, "ten": 10}  # fmt: skip

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_COUNT = r"(?P<count>\d+|" + "|".join(NUMBERS) + r")"
_UNIT = r"(?P<unit>year|month|week|day)s?"

# Most specific first: a match consumes its text, so "May 23, 2023" is not also "May" and "2023".
_PATTERNS = [
    re.compile(r"\b(?P<iso>(?:19|20)\d\d-[01]\d-[0-3]\d)\b"),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b"),
    re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b"),
    re.compile(r"\b(?P<last>last|previous|this|next)\s+(?P<unit>year|month)\b"),
    re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+(?P<ago>ago|before|earlier|later|after)\b"),
    re.compile(r"\b(?P<yesterday>yesterday|today)\b"),
    re.compile(rf"\b{_YEAR}\b"),
    # A month alone only after a word that makes it one: "in June", not "may I ask" or "a long march".
    re.compile(rf"\b(?:in|during|of|early|late|mid|since|until|by|around|through|last|this|next)[ -]+{_MONTH}\b"),
]


@dataclass(frozen=True, slots=True)
class When:
    """A calendar time: a year, a month of a year, a month of any year (``year`` None), or a day."""

    year: int | None
    month: int | None = None
    day: int | None = None
    text: str = ""

    def __str__(self) -> str:
        parts = [f"{self.year:04d}" if self.year else "????"]
        if self.month:
            parts.append(f"{self.month:02d}")
        if self.day:
            parts.append(f"{self.day:02d}")
        return "-".join(parts)


def _month_shift(year: int, month: int, by: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + by
    return index // 12, index % 12 + 1


def _relative(groups: dict[str, str | None], anchor: date | None) -> When | None:
    if anchor is None:
        return None
    if groups.get("yesterday"):
        day = anchor.toordinal() - (1 if groups["yesterday"] == "yesterday" else 0)
        moved = date.fromordinal(day)
        return When(moved.year, moved.month, moved.day)
    if groups.get("last"):
        by = {"last": -1, "previous": -1, "this": 0, "next": 1}[str(groups["last"])]
        if groups["unit"] == "year":
            return When(anchor.year + by)
        year, month = _month_shift(anchor.year, anchor.month, by)
        return When(year, month)
    count_text = str(groups["count"])
    count = NUMBERS.get(count_text) or int(count_text)
    if groups["ago"] != "ago" or count > 100:
        return None  # "two weeks after the move": after what the question names, not after today
    unit = groups["unit"]
    if unit == "year":
        return When(anchor.year - count)
    if unit == "month":
        year, month = _month_shift(anchor.year, anchor.month, -count)
        return When(year, month)
    days = count * (7 if unit == "week" else 1)
    moved = date.fromordinal(anchor.toordinal() - days)
    return When(moved.year, moved.month) if unit == "week" else When(moved.year, moved.month, moved.day)


def _valid(when: When) -> bool:
    try:
        date(when.year or 2000, when.month or 1, when.day or 1)
    except ValueError:
        return False
    return True


def time_expressions(query: str, anchor: date | None = None) -> list[When]:
    """The calendar times ``query`` names, most specific first in each place; relative ones need ``anchor``."""
    text = query.lower()
    found: list[When] = []
    taken = [False] * len(text)
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if any(taken[match.start() : match.end()]):
                continue
            groups = match.groupdict()
            when: When | None
            if groups.get("iso"):
                y, m, d = (int(p) for p in str(groups["iso"]).split("-"))
                when = When(y, m, d)
            elif groups.get("last") or groups.get("ago") or groups.get("yesterday"):
                when = _relative(groups, anchor)
            else:
                year = int(groups["year"]) if groups.get("year") else None
                month = MONTHS[str(groups["month"])] if groups.get("month") else None
                day = int(groups["day"]) if groups.get("day") else None
                when = When(year, month, day)
            if when is None or not _valid(when):
                continue
            for i in range(match.start(), match.end()):
                taken[i] = True
            found.append(When(when.year, when.month, when.day, match.group(0).strip()))
    return found


def matches(when: When, record_date: str | None) -> bool:
    """Whether a record dated ``record_date`` falls in ``when`` (a record dated only by its year matches
    every time of that year; one with no date matches none)."""
    if not record_date:
        return False
    parts = [int(p) for p in record_date.split("-")]
    if when.year is not None and parts[0] != when.year:
        return False
    if when.month is not None and (len(parts) < 2 or parts[1] != when.month):
        return len(parts) < 2 and when.year is not None  # "2023" is in "May 2023", as far as it tells
    return when.day is None or len(parts) < 3 or parts[2] == when.day


TIME_BOOST = 0.5
"""A record dated in a time the question names gains ``TIME_BOOST`` × its BM25 score (size, not sign: BM25 with
rank-bm25's idf floor can score below 0 on tiny corpora). Dev: 0, 0.25, 0.5, 1, 2 gave recall@10 0.734, 0.738,
0.742, 0.742, 0.742 and recall@5 0.627, 0.627, 0.632, 0.632, 0.632."""


class RecordDates:
    """Every slot's date as numbers (0: unknown), and the newest full date: what relative times read against."""

    def __init__(self, dates: Sequence[str | None]) -> None:
        parts = np.zeros((len(dates), 3), dtype=np.int32)
        newest = ""
        for slot, when in enumerate(dates):
            if when:
                fields = when.split("-")
                parts[slot, : len(fields)] = [int(f) for f in fields]
                if len(when) == 10 and when > newest:
                    newest = when
        self.year, self.month, self.day = parts[:, 0], parts[:, 1], parts[:, 2]
        self.anchor = date.fromisoformat(newest) if newest else None

    def mask(self, slots: npt.NDArray[np.int64], whens: Sequence[When]) -> npt.NDArray[np.bool_]:
        """Which of ``slots`` fall in one of ``whens`` (the vector form of :func:`matches`)."""
        year, month, day = self.year[slots], self.month[slots], self.day[slots]
        hit = np.zeros(len(slots), dtype=bool)
        for when in whens:
            inside = year > 0
            if when.year is not None:
                inside &= year == when.year
            if when.month is not None:
                inside &= (month == when.month) | ((month == 0) & (when.year is not None))
            if when.day is not None:
                inside &= (day == when.day) | (day == 0)
            hit |= inside
        return hit

    def boost(
        self, slots: npt.NDArray[np.int64], scores: npt.NDArray[np.float64], whens: Sequence[When], by: float
    ) -> npt.NDArray[np.float64]:
        if not whens or not by or not len(slots):
            return scores
        return np.where(self.mask(slots, whens), scores + by * np.abs(scores), scores)  # up, even from below 0
