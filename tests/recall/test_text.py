"""A record's display text: the fast path (patterns only where their markers are) equals the patterns alone."""

from __future__ import annotations

import re

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
