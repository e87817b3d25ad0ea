"""Tokens for the API tests, made as the owner makes them (``scriptorium token create``), in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.cli import run


def scoped_token(state: Path, scope: str, *extra: str) -> str:
    """A new token of ``scope`` made by ``scriptorium token create`` (the last word it prints)."""
    out = run("token", "create", "--scope", scope, "--state", str(state), *extra)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1].split()[-1]


def requester_token(state: Path, scope: str, requester: str) -> str:
    """A new token of ``scope`` for ``requester``."""
    return scoped_token(state, scope, "--requester", requester)


def runtime_token(state: Path, *extra: str) -> str:
    """A new runtime token (``--requester NAME`` and the like in ``extra``)."""
    return scoped_token(state, "runtime", *extra)


def nodes(session: str, count: int, start: int = 0) -> dict[str, Any]:
    """A body for ``POST /api/sessions/SESSION/nodes``: ``count`` turns n<start>… in a chain, the last the head."""
    return {
        "nodes": [
            {
                "id": f"n{i}",
                "parent_id": f"n{i - 1}" if i else None,
                "kind": "user" if i % 2 == 0 else "assistant",
                "content": f"turn {i}: the release train leaves on Thursdays",
                "created_at": "2026-11-05T10:00:00Z",
            }
            for i in range(start, start + count)
        ],
        "head": f"n{start + count - 1}",
        "title": "Release planning",
    }
