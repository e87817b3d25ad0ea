"""The owner token: a secret in ``<state>/owner-token`` (0600), generated on first use."""

from __future__ import annotations

import secrets
from pathlib import Path

from scriptorium.fsutil import atomic_write


def owner_token(state: Path) -> tuple[str, bool]:
    """The owner token, generated on first use; returns (token, created)."""
    path = state / "owner-token"
    if path.exists():
        return path.read_text().strip(), False
    state.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    while token.startswith("-"):  # one in 64 would: a command line would read it as an option (`--token -x…`)
        token = secrets.token_urlsafe(32)
    atomic_write(path, token.encode(), mode=0o600)
    return token, True
