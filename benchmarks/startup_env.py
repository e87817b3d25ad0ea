"""Child Python processes that run from bytecode, as an installed package's do.

A wheel's modules are compiled when it is installed; an editable checkout's are compiled on first import and
cached in ``__pycache__`` — unless ``PYTHONDONTWRITEBYTECODE`` is set, when every process compiles every
module it imports again (for the command line, a few hundred milliseconds). A benchmark that times a command
times its start-up, not compilation: when the caller's environment forbids bytecode files, its children write
theirs once into a scratch cache of their own (``PYTHONPYCACHEPREFIX``) and read it from then on; otherwise
they use the usual ``__pycache__`` folders (so a benchmark's smoke run in the test suite compiles nothing the
suite's processes have compiled already).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def from_bytecode(env: Mapping[str, str], cache: Path) -> dict[str, str]:
    """``env`` for children that compile each module once (into ``cache`` when ``env`` sets
    ``PYTHONDONTWRITEBYTECODE``) and run from it afterwards."""
    if "PYTHONDONTWRITEBYTECODE" not in env:
        return dict(env)
    kept = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return kept | {"PYTHONPYCACHEPREFIX": str(cache)}
