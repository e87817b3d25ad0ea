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
        st.tuples(st.sampled_from(["", "User: ", "Assistant: ", "User: Melanie: "]), st.lists(WORDS, max_size=12)).map(
            lambda labelled: labelled[0] + " ".join(labelled[1])
        ),
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


def test_a_turn_with_an_agent_is_found_by_its_own_words_not_its_sessions_title() -> None:
    """Every turn of an agent session shares the session's title: its words are left out of the turn's
    terms. A transcript of named people, and a record a model wrote, keep their headings'."""
    title = ("Add GitHub option for repository backend",)

    def terms(body: str) -> Counter[str]:
        return text.record_terms(Record(("m-1",), None, body, (), title, "topics/t.md", 0, ()), body)

    assert "backend" not in terms("Assistant: Tool call timed out after 10s (read file)")
    assert "backend" not in terms("User: read the file from disk")
    assert "backend" in terms("User: Melanie: read the file from disk")
    assert "backend" in terms("The default backend reads tasks.md.")
    assert text.indexed_headings(title, "Assistant: ok") == ()
    assert text.indexed_headings(title, "Assistant: Matt: ok") == title
