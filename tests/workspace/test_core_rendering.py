"""The resident core block's budget: a core within the budget in bytes is rendered without loading the
token encoding (a cold prompt's core must not wait for it), and rendered exactly as counting would."""

from __future__ import annotations

import pytest

from scriptorium.workspace import views
from scriptorium.workspace.topics import parse_topic


def core(records: int, words: int = 6) -> str:
    facts = "".join(
        f"2026-11-0{1 + n % 9}: Rule {n}: {'lint ' * words}before committing [k](test/t/m{n}). ^r{n}\n\n"
        for n in range(records)
    )
    return f"# Core\n\n## Rules\n\n{facts}"


def counted_everywhere(monkeypatch: pytest.MonkeyPatch, text: str, budget: int) -> views.CoreRendering:
    """The rendering with the byte shortcut taken away: every piece counted in tokens."""
    with monkeypatch.context() as patched:
        patched.setattr(views, "_utf8_bytes", lambda _text: budget + 1)
        return views.render_core(parse_topic("topics/core.md", text), budget)


def test_a_core_within_the_budget_in_bytes_is_rendered_without_counting(monkeypatch: pytest.MonkeyPatch) -> None:
    text = core(5)
    budget = len(text.encode()) * 2
    expected = counted_everywhere(monkeypatch, text, budget)

    def refuse(_text: str) -> int:
        raise AssertionError("the token encoding was asked for")

    monkeypatch.setattr(views, "count_tokens", refuse)
    rendering = views.render_core(parse_topic("topics/core.md", text), budget)
    assert rendering == expected and len(rendering.included_ids) == 5 and rendering.omitted_ids == ()
    with pytest.raises(AssertionError, match="encoding"):
        rendering.tokens  # noqa: B018 - counted when asked, not before


def test_a_core_past_the_budget_in_bytes_is_clipped_by_its_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    text = core(40, words=20)
    budget = 300  # tokens: far fewer than the bytes, and fewer than the whole core's tokens
    rendering = views.render_core(parse_topic("topics/core.md", text), budget)
    assert rendering == counted_everywhere(monkeypatch, text, budget)
    assert rendering.omitted_ids and rendering.tokens <= budget
    assert len(rendering.text.encode()) > budget, "the bytes alone would have clipped more than the tokens do"
