"""Staged topics without secrets: what a transaction installs passes the workspace's redactor first, whoever
wrote it (a writer, a person on the page, a REST or MCP change, a proposal approved)."""

from __future__ import annotations

import re

from scriptorium.workspace.results import TextRedactor

_LINK_TARGET = re.compile(r"\]\(([^()\s]+)\)")
"""A Markdown link's target (a citation's source path, a record's link): a secret there is redacted as a name,
so the link still names the source archived under the redacted name."""


def redact_topic(text: str, redactor: TextRedactor) -> str:
    """A topic's text with every secret replaced: in link targets by a name's placeholder, elsewhere by text's."""
    text = _LINK_TARGET.sub(lambda m: f"]({redactor.name(m[1])})", text) if "](" in text else text
    return redactor.text(text)


def redact_staged(raw: dict[str, bytes | None], redactor: TextRedactor | None) -> dict[str, bytes | None]:
    """Staged changes (path → bytes, None deletes) with every written topic's text and path redacted. Bytes
    that are not UTF-8 are left for validation to refuse; a deletion keeps its path (the installed file's)."""
    if redactor is None:
        return raw
    out: dict[str, bytes | None] = {}
    for path, data in raw.items():
        if data is None:
            out.setdefault(path, None)
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            out[path] = data
            continue
        out[redactor.name(path)] = redact_topic(text, redactor).encode("utf-8")
    return out
