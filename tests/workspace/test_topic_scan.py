"""The topic scanner's fast path (plain lines skip the block patterns) parses exactly as the patterns alone do."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scriptorium.workspace import blocks, topics

LINES = st.sampled_from(
    [
        "# H", "## Sub #", "#nospace", "2025-01-02: a record [k](../sources/p/t/m.md) ^m-000000000001",
        "para line", "  indented", "\t tab", "\u00a0no-break space", "```", "~~~", "- item", "* * *", "---",
        "___", "<!-- c -->", "<!--", "-->", "[^e1]: [k](../sources/p/t/m.md#source-m)", "  continuation", "",
        " ", "[link](x) ^a-b", "`code`", "~tilde", "[^x]", "text ^id ^id2", "> quote", "_under_", "*star*",
        "[[t#^m-1]] ^q", "see [x](a.md#^b1) ^c",
    ]
)  # fmt: skip


class _Everything:
    def __contains__(self, item: object) -> bool:
        return True


def shape(topic: topics.ParsedTopic) -> object:
    return (topic.blocks, topic.records, topic.footnotes, topic.edges, topic.duplicate_footnotes)


@settings(max_examples=400, deadline=None)
@given(st.lists(LINES, max_size=30), st.booleans())
def test_the_fast_path_never_changes_a_parse(lines: list[str], newline: bool) -> None:
    text = "\n".join(lines) + ("\n" if newline else "")
    fast = topics._parse_topic("topics/x.md", text)
    with pytest.MonkeyPatch.context() as patch:  # every first character may open a block: patterns only
        patch.setattr(blocks, "_MAY_OPEN_BLOCK", _Everything())
        patch.setattr(blocks, "_MAY_END_PARAGRAPH", _Everything())
        slow = topics._parse_topic("topics/x.md", text)
    assert shape(fast) == shape(slow)
