"""Memory's reading view: Obsidian-flavoured Markdown (what topics are written in) to safe HTML.

* Named ``[^id]`` footnotes and inline ``^[…]`` footnotes become sequential
  ``[1]`` superscripts in order of first occurrence; a repeated reference
  reuses its number; definitions form an ordered list at the end; two-space
  continuation lines belong to the preceding definition.
* A paragraph-end or standalone ``^block-id`` becomes an invisible anchor; the
  ID never shows in the prose. Which trailing tokens are IDs is the workspace's
  own rule (:func:`scriptorium.workspace.blocks.split_record_line`), read from the
  paragraph's source before inline parsing, so every record the workspace sees
  gets its anchor (``^my_id`` included, and ``^_a_`` is an ID, not emphasis).
* Inline, fenced, list-fenced and four-space-indented code, and
  backslash-escaped footnote syntax, stay literal; undefined references stay
  visible as written.
* The transform works on markdown-it's token tree, not on text with
  placeholders, so no input can collide with an internal marker.
* Raw HTML in memory is shown as text, never interpreted; the result then
  passes nh3 (an allow-list sanitizer), generated links and anchors included.

The editable source is never changed: this renders a copy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence, Set
from html import escape as html_escape
from typing import Any
from urllib.parse import quote, unquote

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin

from scriptorium.workspace.blocks import split_record_line
from scriptorium.workspace.paths import is_conversation_file, key_of_link

ALLOWED_TAGS = {
    "a", "p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li", "sup", "section",
    "span", "del", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "img",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "p": {"class"},
    "a": {"href", "id", "class", "title"},
    "sup": {"class"},
    "section": {"class"},
    "ol": {"class", "start"},
    "li": {"id", "class"},
    "hr": {"class"},
    "span": {"id", "class"},
    "code": {"class"},
    "img": {"src", "alt", "title"},
}


def _caption(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """``[n]`` for every reference, repeated ones included (no ``[n:1]``)."""
    return f"[{tokens[idx].meta['id'] + 1}]"


def _split_block_ids(state: StateCore) -> None:
    """Take a paragraph's trailing ``^id`` tokens off its source, before inline parsing sees them."""
    tokens = state.tokens
    for index, token in enumerate(tokens):
        if token.type != "inline" or index == 0 or tokens[index - 1].type != "paragraph_open":
            continue
        head, newline, last = token.content.rpartition("\n")
        text, ids = split_record_line(last)
        if ids:
            token.content = head + newline + text if text else head.rstrip()
            token.meta = {**(token.meta or {}), "block_ids": ids}


def _block_ids(state: StateCore) -> None:
    """Turn the IDs :func:`_split_block_ids` took off a paragraph into invisible anchors."""
    tokens = state.tokens
    for index, token in enumerate(tokens):
        ids = (token.meta or {}).get("block_ids") if token.type == "inline" else None
        if not ids:
            continue
        if token.children is None:
            token.children = []
        if ids and ids[0] in state.env.get("alternatives", ()):  # a record from a branch the conversation left
            tokens[index - 1].attrSet("class", "alternative")
            label = Token("html_inline", "", 0)
            label.content = '<span class="branch-label">option not taken</span> '
            token.children.insert(0, label)
        if ids and (newer := state.env.get("superseded", {}).get(ids[0])):  # a newer record replaces it
            paragraph = tokens[index - 1]
            paragraph.attrSet("class", f"{paragraph.attrGet('class') or ''} superseded".strip())
            successor, topic = newer
            label = Token("html_inline", "", 0)
            href = f"/memory?section=topics&amp;item={quote(topic, safe='/')}#block-{html_escape(successor)}"
            label.content = (
                f'<span class="superseded-label">superseded by <a href="{href}">^{html_escape(successor)}</a></span> '
            )
            token.children.insert(0, label)
        if ids and (origin := state.env.get("origins", {}).get(ids[0])):  # "spawned by …", "continued from …"
            note = Token("html_inline", "", 0)
            note.content = f' <span class="origin-label">{html_escape(origin)}</span>'
            token.children.append(note)
        for block_id in ids:
            anchor = Token("html_inline", "", 0)
            anchor.content = f'<span class="block-anchor" id="block-{block_id}"></span>'
            token.children.append(anchor)


_ARCHIVE_LINK = re.compile(r"^(?:\.\./)*(sources/[^#?]+\.md)(?:#(source-[^#?]*))?$")


def _source_links(state: StateCore) -> None:
    """A citation's link to its archive file (``../../sources/….md#source-…``: the message's own file, or its
    conversation's) opens the page's source view of the message."""
    viewer = state.env.get("source_view")
    if not viewer:
        return
    for token in state.tokens:
        for child in token.children or ():
            if child.type == "link_open" and (match := _ARCHIVE_LINK.match(str(child.attrGet("href") or ""))):
                path = unquote(match.group(1))
                key = key_of_link(path, unquote(match.group(2) or "")) if is_conversation_file(path) else None
                child.attrSet("href", viewer + quote(key or match.group(1), safe="/"))


def _build() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table").use(footnote_plugin)
    md.add_render_rule("footnote_caption", _caption)
    md.core.ruler.push("memory_source_links", _source_links)
    md.core.ruler.before("inline", "memory_split_block_ids", _split_block_ids)
    md.core.ruler.before("text_join", "memory_block_ids", _block_ids)
    return md


_MD = _build()


SOURCE_VIEW = "/memory?section=sources&item="
"""Where a citation's archive link points on the page (the source view)."""


def render_memory_markdown(
    text: str,
    alternatives: Set[str] = frozenset(),
    origins: Mapping[str, str] | None = None,
    source_view: str | None = SOURCE_VIEW,
    superseded: Mapping[str, tuple[str, str]] | None = None,
) -> str:
    """Sanitized HTML of one memory document (topic, core preview, timeline day); records whose memory ID
    is in ``alternatives`` (from a branch the conversation left) are marked as the option not taken, and
    ``origins`` (memory ID → "spawned by …" / "continued from …") say where a record's session came from.
    Citation links to archived sources open ``source_view`` + the archive path (None: left as written).
    ``superseded`` (memory ID → the newer record's memory ID and topic) strikes a replaced record through and
    links it to its successor."""
    env = {
        "alternatives": alternatives,
        "origins": origins or {},
        "source_view": source_view,
        "superseded": superseded or {},
    }
    html = _MD.render(text, env)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer",
        strip_comments=True,
    )
