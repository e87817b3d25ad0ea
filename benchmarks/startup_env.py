"""Child Python processes that run from bytecode, as an installed package's do.

A wheel's modules are compiled when it is installed; an editable checkout's are compiled on first import and
cached in ``__pycache__`` — unless ``PYTHONDONTWRITEBYTECODE`` is set, when every process compiles every
module it imports again (for the command line, a few hundred milliseconds). A benchmark that times a command
times its start-up, not compilation: its children write their bytecode once into a scratch cache of their
own (``PYTHONPYCACHEPREFIX``), whatever the caller's environment says, and read it from then on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def from_bytecode(env: Mapping[str, str], cache: Path) -> dict[str, str]:
    """``env`` for children that compile each module once, into ``cache``, and run from it afterwards."""
    kept = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return kept | {"PYTHONPYCACHEPREFIX": str(cache)}
