"""The Memory reading transform: every case spec 09 names, and sanitization."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scriptorium.web.markdown import render_memory_markdown as render
from scriptorium.workspace.blocks import scan_blocks


def sups(html: str) -> list[str]:
    return re.findall(r'<sup class="footnote-ref"><a [^>]*>(\[\d+\])</a></sup>', html)


def footnote_items(html: str) -> list[str]:
    return re.findall(r'<li id="fn\d+" class="footnote-item"><p>(.*?) <a href="#fnref', html, re.S)


def test_named_footnotes_become_sequential_superscripts_in_order_of_first_use() -> None:
    html = render("B first[^e-zz] then A[^a] then B again[^e-zz].\n\n[^a]: alpha\n[^e-zz]: zeta\n")
    assert sups(html) == ["[1]", "[2]", "[1]"]  # the repeated reference reuses its number
    assert footnote_items(html) == ["zeta", "alpha"]  # the end list follows first occurrence
    assert "e-zz" not in html.split('<hr class="footnotes-sep">')[0]  # no evidence ID in the prose


def test_two_space_continuation_lines_belong_to_the_footnote() -> None:
    html = render("Fact.[^n]\n\n[^n]: first line\n  second line\n\nAfter.\n")
    assert footnote_items(html) == ["first line\nsecond line"]
    assert "<p>After.</p>" in html


def test_inline_footnotes_are_numbered_with_the_named_ones() -> None:
    html = render("One[^x] two^[inline words] three.\n\n[^x]: named\n")
    assert sups(html) == ["[1]", "[2]"]
    assert footnote_items(html) == ["named", "inline words"]


def test_block_ids_become_invisible_anchors() -> None:
    html = render("A record. ^m-0mx3otj1u005 ^m-0mx3otj1u006\n\nstandalone\n\n^legacy-id\n")
    prose = re.sub(r"<[^>]+>", "", html)
    assert "^" not in prose and "m-0mx3" not in prose
    assert 'id="block-m-0mx3otj1u005"' in html and 'id="block-m-0mx3otj1u006"' in html
    assert 'id="block-legacy-id"' in html
    assert "<p>A record.<span" in html


@pytest.mark.parametrize(
    ("source", "literal"),
    [
        ("Inline `[^n] ^id` code.[^n]\n\n[^n]: x\n", "<code>[^n] ^id</code>"),
        ("```\n[^n] and ^id\n```\n", "<pre><code>[^n] and ^id\n</code></pre>"),
        ("- item\n\n  ```\n  [^n] ^id\n  ```\n", "<pre><code>[^n] ^id\n</code></pre>"),
        ("    [^n] indented ^id\n", "<pre><code>[^n] indented ^id\n</code></pre>"),
        ("Escaped \\[^n] stays.\n\n[^n]: x\n", "Escaped [^n] stays."),
        ("Escaped id \\^keep\n", "Escaped id ^keep"),
        ("Undefined [^missing] stays.\n", "Undefined [^missing] stays."),
    ],
)
def test_code_escapes_and_undefined_references_stay_literal(source: str, literal: str) -> None:
    assert literal in render(source)


def test_no_input_collides_with_internal_markers() -> None:
    # The transform never substitutes text placeholders, so marker-looking input is plain text.
    for tricky in ("\x00FN0\x00", "@@FOOTNOTE_1@@", "%%BLOCK%%", "{{fn:1}}", "\ue000footnote\ue001"):
        html = render(f"Text {tricky} here.[^a]\n\n[^a]: def\n")
        assert tricky.replace("\x00", "\ufffd") in html or tricky in html
        assert sups(html) == ["[1]"] and footnote_items(html) == ["def"]


def test_links_keep_their_urls_and_pass_the_sanitizer() -> None:
    html = render("See[^s].\n\n[^s]: [talk](../sources/p/t/m.md#source-m) and [x](https://example.org/a)\n")
    assert 'href="https://example.org/a"' in html
    # A citation's archive link opens the page's source view (its archive path, encoded) ...
    assert 'href="/memory?section=sources&amp;item=sources/p/t/m.md"' in html
    # ... unless asked to keep it as written.
    kept = render("[talk](../../sources/p/t/m.md#source-m)", source_view=None)
    assert 'href="../../sources/p/t/m.md#source-m"' in kept
    odd = render("[t](../../sources/a b/t/m.md) [u](../sources/x/y/z.txt)")
    assert "section=sources" not in odd  # not an archive link: left alone


@pytest.mark.parametrize(
    "attack",
    [
        "<script>alert(1)</script>",
        "<img src=x onerror=alert(1)>",
        "<svg onload=alert(1)><circle/></svg>",
        "[click](javascript:alert(1))",
        "[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
        "![img](javascript:alert(1))",
        '<a href="javascript:alert(1)">x</a>',
        "<iframe src=https://example.com></iframe>",
        "[x](JaVaScRiPt:alert(1))",
        "Fact.[^j]\n\n[^j]: [evil](javascript:alert(1))",
        '<div style="background:url(javascript:alert(1))">x</div>',
    ],
)
def test_rendered_memory_can_never_run_script(attack: str) -> None:
    html = render(attack).lower()
    tags = re.findall(r"<[a-z][^>]*>", html)  # real tags only: escaped text starts with &lt;
    assert not [t for t in tags if t.startswith(("<script", "<svg", "<iframe", "<div", '<img src="x'))]
    urls = "".join(re.findall(r'(?:href|src)="[^"]*"', "".join(tags)))
    assert "javascript:" not in urls and "data:" not in urls
    assert not [t for t in tags if re.search(r"\son\w+=|\sstyle=", t)]  # no handler or style attribute


def test_a_record_from_a_left_branch_is_marked_as_the_option_not_taken() -> None:
    text = "Atlas runs on FastAPI. ^m-0000000000b4\n\nAtlas runs on Flask. ^m-0000000000a4\n\nPlain paragraph.\n"
    html = render(text, frozenset({"m-0000000000a4"}))
    fastapi, flask = html.split("</p>")[:2]
    assert 'class="alternative"' in flask and "option not taken" in flask
    assert "alternative" not in fastapi and "option not taken" not in fastapi
    assert render(text).count("alternative") == 0


def test_a_record_says_where_its_session_came_from() -> None:
    html = render(
        "A subagent's finding. ^m-000000000001\n\nOther. ^m-000000000002\n",
        origins={"m-000000000001": "spawned by main<x>"},
    )
    first, second = html.split("</p>")[:2]
    assert '<span class="origin-label">spawned by main&lt;x&gt;</span>' in first, "escaped, and on that record only"
    assert "origin-label" not in second


_ID = st.text(alphabet="abcXYZ019_-", min_size=1, max_size=8)
_PROSE = st.text(alphabet="ab _*^\\`", max_size=12).map(lambda s: "Fact " + s)


@settings(max_examples=300, deadline=None)
@given(prose=_PROSE, ids=st.lists(_ID, min_size=1, max_size=3), separator=st.sampled_from([" ", "\t", "\n"]))
def test_the_page_anchors_exactly_the_ids_the_workspace_reads(prose: str, ids: list[str], separator: str) -> None:
    """One block-ID grammar: every ID the workspace reads off a record's last line (``^my_id`` included)
    is an anchor on the page and never visible text, and nothing else becomes one."""
    source = prose + separator + " ".join(f"^{i}" for i in ids)
    splits: dict[int, tuple[str, tuple[str, ...]]] = {}
    lines = source.split("\n")
    blocks = scan_blocks(lines, splits)
    workspace_ids = [i for block in blocks if block.kind == "record" for i in splits[block.start][1]]
    html = render(source + "\n")
    assert re.findall(r'<span class="block-anchor" id="block-([^"]*)"></span>', html) == workspace_ids
    visible = re.sub(r"<[^>]+>", "", html)
    assert visible.count("^") == source.count("^") - len(workspace_ids)  # an ID never shows; other carets do


def test_an_underscore_id_is_an_anchor_not_text() -> None:
    html = render("A record. ^my_id\n\nAnother. ^_a_\n")
    assert 'id="block-my_id"' in html and 'id="block-_a_"' in html
    assert "^" not in re.sub(r"<[^>]+>", "", html) and "<em>" not in html


def test_a_superseded_record_is_struck_through_and_links_its_successor() -> None:
    text = "Run make check. ^m-000000000old\n\nRun uv run pytest. ^m-000000000new\n"
    html = render(text, superseded={"m-000000000old": ("m-000000000new", "topics/dev tools.md")})
    old, new = html.split("</p>")[:2]
    assert 'class="superseded"' in old and "superseded by" in old
    assert 'href="/memory?section=topics&amp;item=topics/dev%20tools.md#block-m-000000000new"' in old
    assert "superseded" not in new
    assert "superseded" not in render(text)
