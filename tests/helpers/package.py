"""The repository and the modules of the installed package (what the boundary and packaging tests read)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "scriptorium"


def installed_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the installed package by dotted name, the folders mapped into it included (in a
    checkout they are symlinks: ``scriptorium/workers`` → ``workers/``)."""
    modules: dict[str, Path] = {}
    for folder, _dirs, files in os.walk(package, followlinks=True):
        base = Path(folder).relative_to(package.parent).parts
        if "__init__.py" not in files:
            continue
        for name in files:
            if name.endswith(".py"):
                parts = base if name == "__init__.py" else (*base, name.removesuffix(".py"))
                modules[".".join(parts)] = Path(folder) / name
    return modules


MODULES = installed_modules()
