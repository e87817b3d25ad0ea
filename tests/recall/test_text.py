"""A record's display text: the fast path (patterns only where their markers are) equals the patterns alone."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from scriptorium.recall import text
from scriptorium.workspace.topics import Record

BITS = st.sampled_from(
    ["word", " ", "  ", "\n", "\t", "[^e1]", "[k](a/b/c)", "![img](x.png)", ".", ",", " .", " ;", "\u00a0",
     "\u2003", "\x1c", "[^", "](", "\\[^x]", "Ünïcode"]
)  # fmt: skip


@given(st.lists(BITS, max_size=20).map("".join))
def test_display_text_is_the_three_substitutions(body: str) -> None:
    expected = text._FOOTNOTE_REF.sub("", body)
    expected = text._LINK.sub(lambda m: m.group(1), expected)
    expected = text._SPACE_BEFORE_PUNCT.sub(r"\1", re.sub(r"\s+", " ", expected)).strip()
    assert text.display_text(Record(("m-1",), None, body, (), (), "topics/t.md", 0, ())) == expected


WORDS = st.sampled_from(["the", "Running", "runs", "Ünïcode", "2025", "cafés", "a", "of", "user's", "x_y", ""])
RECORDS = st.lists(
    st.tuples(
        st.lists(WORDS, max_size=12).map(" ".join),
        st.lists(WORDS, max_size=2).map(tuple),
        st.sampled_from([None, "2024", "2025-03", "2025-03-14"]),
    ),
    max_size=8,
)


@given(RECORDS)
def test_a_topics_terms_at_once_are_each_records_terms(rows: list[tuple[str, tuple[str, ...], str | None]]) -> None:
    """The build tokenizes a topic's records with one stemmer call; each record gets what it gets alone."""
    records = [
        Record(("m-1",), date, body, (), heads, "topics/t.md", n, ()) for n, (body, heads, date) in enumerate(rows)
    ]
    texts = [record.text for record in records]
    together = [Counter(terms) for terms in text.records_terms(records, texts)]
    assert together == [text.record_terms(r, t) for r, t in zip(records, texts, strict=True)]
    assert all(text.tokenize(t) == terms for t, terms in zip(texts, text.tokenize_many(texts), strict=True))
