"""Every byte a server keeps under its state folder, to show that a refused request changed none."""

from __future__ import annotations

from pathlib import Path

VOLATILE = ("tokens.json", "tokens.lock")
"""Rewritten by any request, whatever it asks: a token's ``last_used`` (at most once a minute)."""


def stored(state: Path) -> dict[str, bytes]:
    """Every file under ``state`` — the memory and its git objects, the runtime folder, the session store
    with its WAL, proposals, quota ledgers — but the :data:`VOLATILE` ones and empty lock files."""
    out: dict[str, bytes] = {}
    for path in sorted(state.rglob("*")):
        if not path.is_file() or path.name in VOLATILE or (path.suffix == ".lock" and not path.stat().st_size):
            continue
        out[path.relative_to(state).as_posix()] = path.read_bytes()
    return out


def changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The files that appeared, disappeared or changed between two :func:`stored` readings."""
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
