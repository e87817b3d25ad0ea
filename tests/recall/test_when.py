"""Time in a question: real phrasings parsed, records' dates matched, and the boost in the index."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from scriptorium.recall.index import RecallIndex
from scriptorium.recall.when import RecordDates, When, matches, time_expressions
from scriptorium.workspace import MemoryWorkspace, TopicChange

ANCHOR = date(2023, 10, 22)
TABLE = [  # question phrasings as LoCoMo and agent users write them → the times they name
    ("When did Melanie go camping in June?", ["????-06"]),
    ("How many times has Melanie gone to the beach in 2023?", ["2023"]),
    ("What did Mel and her kids paint in their latest project in July 2023?", ["2023-07"]),
    ("What setback did Melanie face in October 2023?", ["2023-10"]),
    ("What painting did Melanie show to Caroline on October 13, 2023?", ["2023-10-13"]),
    ("What did Gina find for her clothing store on 1 February, 2023?", ["2023-02-01"]),
    ("What kind of experience did Gina get accepted for on May 23, 2023?", ["2023-05-23"]),
    ("what did we decide on 2023-05-08 about the release", ["2023-05-08"]),
    ("the 3rd of March 2024 standup", ["2024-03-03"]),
    ("Sept. 2022 outage", ["2022-09"]),
    ("what broke in mid-March", ["????-03"]),
    ("Where did Caroline move from 4 years ago?", ["2019"]),
    ("What did they see on their camping trip last year?", ["2022"]),
    ("what did we ship last month", ["2023-09"]),
    ("three months ago we changed the retries", ["2023-07"]),
    ("what happened yesterday", ["2023-10-21"]),
    ("two weeks after the move", []),  # after what the question names: not a calendar time
    ("may I ask what the plan is", []),  # "may" is a verb here
    ("a long march through the tests", []),
    ("On Saturday we went hiking", []),  # weekdays are the date words' job
    ("between May 2023 and June 2023", ["2023-05", "2023-06"]),
]


@pytest.mark.parametrize(("query", "expected"), TABLE)
def test_time_expressions_on_real_question_phrasings(query: str, expected: list[str]) -> None:
    assert [str(w) for w in time_expressions(query, ANCHOR)] == expected


def test_relative_times_need_an_anchor() -> None:
    assert time_expressions("last year", None) == [] and time_expressions("in June", None) != []


@pytest.mark.parametrize(
    ("when", "record_date", "expected"),
    [
        (When(2023, 6), "2023-06-27", True),
        (When(2023, 6), "2024-06-27", False),
        (When(None, 6), "2024-06-27", True),
        (When(2023, 6), "2023", True),  # a record dated only by its year may be in May 2023
        (When(2023, 6, 27), "2023-06", True),
        (When(2023, 6, 27), "2023-06-26", False),
        (When(2023), "2023-01-01", True),
        (When(None, 6), "2023", False),
        (When(2023), None, False),
    ],
)
def test_a_records_date_falls_in_a_time_or_not(when: When, record_date: str | None, expected: bool) -> None:
    assert matches(when, record_date) is expected
    dates = RecordDates([record_date])
    assert bool(dates.mask(np.array([0]), [when])[0]) is expected, "the vector form agrees"


def test_a_record_dated_in_the_named_month_gains_the_boost(seeded: MemoryWorkspace) -> None:
    lines = ["# Trips", ""]
    lines += [f"2023-08-{n + 1:02d}: Pottery class number {n} [k](test/t1/m{n % 5}).\n" for n in range(6)]
    lines += [
        "2023-05-14: We went camping by the lake [k](test/t1/m1).\n",
        "2023-06-20: We went camping by the lake [k](test/t1/m2).\n",
    ]
    seeded.apply_changes([TopicChange("topics/trips.md", "create", "\n".join(lines))], message="trips")
    index = RecallIndex(seeded.root)
    index.ranking.neighbour_weight = 0.0
    index.ranking.time_boost = 0.0  # the words alone: "june" is one of the June record's date words already
    plain = {h.date: h.score for h in index.search("camping lake in June", 2)}
    assert plain["2023-06-20"] > plain["2023-05-14"] > 0
    index.ranking.time_boost = 0.5
    boosted = {h.date: h.score for h in index.search("camping lake in June", 2)}
    assert boosted["2023-06-20"] == pytest.approx(1.5 * plain["2023-06-20"])
    assert boosted["2023-05-14"] == pytest.approx(plain["2023-05-14"]), "dated elsewhere: no boost"
    assert [h.date for h in index.search("camping lake in May 2023", 2)] == ["2023-05-14", "2023-06-20"]
