"""Schema versions of the JSON files Scriptorium keeps (the workspace's ``.scriptorium/`` runtime folder,
proposals, tokens): each carries ``"version"``, and its reader goes through :func:`read_versioned`.

A file without ``"version"`` was written before versions and is version 1. A file of an older version is
brought to the current one by the format's migration steps, in order (``steps[n - 1]`` takes version ``n`` to
``n + 1``); a file of a newer version is refused with ``SCHEMA_TOO_NEW`` rather than read as a layout it is
not (what a newer release keeps there could be lost). Caches are different: one of another version is
rebuilt, never refused (:mod:`scriptorium.recall.cache`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from scriptorium.errors import InvalidArgument, SchemaTooNew

VERSION_KEY = "version"

Step = Callable[[dict[str, Any]], dict[str, Any]]


def read_versioned(data: object, current: int, what: str, steps: Sequence[Step] = ()) -> dict[str, Any]:
    """``data`` (a parsed JSON document) at version ``current``, ``"version"`` included; ``what`` names the
    file in errors. ``steps`` must hold ``current - 1`` migrations."""
    if len(steps) != current - 1:
        raise ValueError(f"{what}: version {current} needs {current - 1} migration steps, not {len(steps)}")
    if not isinstance(data, dict):
        raise InvalidArgument(f"{what} is not a JSON object", path=what)
    version = data.get(VERSION_KEY, 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidArgument(f"{what}: 'version' is {version!r}, not a positive whole number", path=what)
    if version > current:
        raise SchemaTooNew(
            f"{what} has schema version {version}; this release reads up to {current}",
            guidance="a newer Scriptorium wrote it: upgrade to read it",
            path=what,
        )
    for step in steps[version - 1 :]:
        data = step(data)
    return {**data, VERSION_KEY: current}


def versioned(data: dict[str, Any], current: int) -> dict[str, Any]:
    """``data`` as written: its version first."""
    return {VERSION_KEY: current, **data}
