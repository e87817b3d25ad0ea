"""Project-wide contracts: the import graph (no circle, no upward import), the error tree, offline tokens."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from scriptorium import errors
from scriptorium.errors import PermanentError, ReasonCode, ScriptoriumError, TransientError
from tests.helpers.package import MODULES, PACKAGE

EDGES = (
    "scriptorium.cli",
    "scriptorium.runtimes",
    "scriptorium.web",
    "scriptorium.workers",
    "scriptorium.producers",
    "scriptorium.schemas",
    "scriptorium.settings",
    "scriptorium.composition",
    "scriptorium.access.requests",
    "scriptorium.__main__",
)
"""What translates between the outside world and core calls: the core imports none of it."""
FORBIDDEN = {"celery", "redis", "fastapi", "starlette", "click", "typer", "pydantic", "pydantic_settings", "kombu"}


def _within(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(f"{p}.") for p in prefixes)


def imported_modules(source: str, module: str, is_package: bool = False, known: Iterable[str] = ()) -> set[str]:
    """Every module ``source`` imports, as absolute dotted names (relative imports resolved), wherever the
    import stands: inside functions and under ``TYPE_CHECKING`` included.

    ``from a import b`` imports ``a.b`` when that is a module (``known``), else ``a`` itself.
    """
    known = set(known)
    parts = module.split(".")
    package = parts if is_package else parts[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known else target)
    return found


def import_graph(modules: Mapping[str, Path] = MODULES) -> dict[str, set[str]]:
    """Module → the project modules it imports."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = imported_modules(path.read_text(), name, path.name == "__init__.py", modules)
        graph[name] = {m for m in imported if m in modules and m != name}
    return graph


def circles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every import circle: the strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_installed_packages_have_no_import_circle() -> None:
    assert len(MODULES) > 100, "the walk found the package's modules, the mapped folders included"
    assert {"scriptorium.workers.tasks", "scriptorium.producers.ingest", "scriptorium.schemas.events"} <= set(MODULES)
    assert circles(import_graph()) == []


def test_the_circle_finder_sees_circles_of_every_kind() -> None:
    sources = {
        "pkg.a": "from pkg.b import thing\n",
        "pkg.b": "def f():\n    from pkg import c\n",  # lazily, inside a function
        "pkg.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\n",  # type-only
        "pkg.d": "import json\n",
    }
    known = set(sources)
    graph = {name: imported_modules(text, name, known=known) & known for name, text in sources.items()}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    graph["pkg.c"] = set()
    assert circles(graph) == []


def _core_modules() -> list[str]:
    return sorted(name for name in MODULES if not _within(name, EDGES))


def _edge_hits(imported: set[str]) -> set[str]:
    forbidden = {name for name in imported if name.split(".")[0] in FORBIDDEN}
    return forbidden | {name for name in imported if _within(name, EDGES)}


@pytest.mark.parametrize("module", _core_modules())
def test_the_core_imports_no_edge_framework(module: str) -> None:
    path = MODULES[module]
    imported = imported_modules(path.read_text(), module, path.name == "__init__.py", MODULES)
    assert not _edge_hits(imported), f"{module} imports an edge or an edge framework: {_edge_hits(imported)}"


def test_the_workspace_and_recall_layers_are_core() -> None:
    core = set(_core_modules())
    layers = [m for m in MODULES if _within(m, ("scriptorium.workspace", "scriptorium.recall"))]
    assert len(layers) > 20 and set(layers) <= core


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(m, ("scriptorium.workspace",))))
def test_the_workspace_core_does_not_import_the_layers_built_on_it(module: str) -> None:
    """Structured changes, recall and writing build on the workspace; it imports none of them (no cycle)."""
    path = MODULES[module]
    imported = imported_modules(path.read_text(), module, path.name == "__init__.py", MODULES)
    above = ("changes", "recall", "writing", "writers", "sessions", "access", "provider")
    assert not {name for name in imported if _within(name, (f"scriptorium.{a}" for a in above))}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _within(m, ("scriptorium.producers",))))
def test_the_producers_import_nothing_from_the_workers(module: str) -> None:
    """What a runtime embeds must not load the worker side (nor Celery's task modules with it)."""
    path = MODULES[module]
    imported = imported_modules(path.read_text(), module, path.name == "__init__.py", MODULES)
    assert not {name for name in imported if _within(name, ("scriptorium.workers",))}


@pytest.mark.parametrize(
    "line",
    [
        "import scriptorium.cli.main",
        "import scriptorium.web.app as app",
        "from scriptorium import cli",
        "from scriptorium import settings as s",
        "from ..runtimes import tools",
        "from ..web import app",
        "from ..composition import build",
        "from scriptorium.workers.handling import TASK",
        "from ..access.requests import submit",
        "import celery",
        "from redis import Redis",
        "import pydantic.fields",
    ],
)
def test_the_boundary_check_sees_every_import_form(line: str) -> None:
    assert _edge_hits(imported_modules(line, "scriptorium.workspace.example", known=MODULES)), line


def test_the_boundary_check_allows_core_imports() -> None:
    source = (
        "from . import paths\nfrom ..errors import ReasonCode\nimport scriptorium.sessions\nimport json\n"
        "from scriptorium.access.audience import Viewer\n"
    )
    assert not _edge_hits(imported_modules(source, "scriptorium.workspace.example", known=MODULES))


def test_each_runtime_module_is_listed_once_in_the_catalog() -> None:
    """Adding a runtime is one module in ``scriptorium/runtimes/`` declaring ``RUNTIME``, listed in the
    catalog (and its importer in ``producers/``): nothing else names it."""
    from scriptorium.runtimes import catalog

    declared = sorted(
        name.rsplit(".", 1)[1]
        for name, path in MODULES.items()
        if name.startswith("scriptorium.runtimes.") and re.search(r"^RUNTIME = Runtime\(", path.read_text(), re.M)
    )
    assert declared == ["claude_code", "codex", "openclaw", "pi"]
    assert sorted(r.name.replace("-", "_") for r in catalog.RUNTIMES) == declared


def _error_classes() -> list[type[ScriptoriumError]]:
    return [
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type)
        and issubclass(obj, ScriptoriumError)
        and obj not in (ScriptoriumError, TransientError, PermanentError)
    ]


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_each_error_class_sits_under_the_root_its_reason_says(cls: type[ScriptoriumError]) -> None:
    expected = TransientError if cls.default_reason.retryable else PermanentError
    assert issubclass(cls, expected)
    instance = cls("boom")
    assert instance.to_dict()["reason"] == str(cls.default_reason)


def test_reason_codes_are_stable_strings() -> None:
    assert all(code.value == code.name for code in ReasonCode)
    assert {c for c in ReasonCode if c.retryable} == {
        ReasonCode.LOCK_HELD,
        ReasonCode.REVISION_CONFLICT,
        ReasonCode.PRE_INSTALL_FAILED,
        ReasonCode.INSTALL_FAILED,
        ReasonCode.GIT_COMMIT_FAILED,
        ReasonCode.MODEL_UNREACHABLE,
        ReasonCode.WRITER_START_FAILED,
        ReasonCode.WRITER_TIMEOUT,
        ReasonCode.LOCK_LOST,
        ReasonCode.REDIS_UNAVAILABLE,
        ReasonCode.VECTOR_BACKEND_UNAVAILABLE,
        ReasonCode.MOVE_FAILED,
        ReasonCode.RATE_LIMITED,
        ReasonCode.REQUEST_TIMEOUT,
    }
    for required in (
        "INVALID_TOPIC_FORMAT",
        "INVALID_ARGUMENT",
        "COMMIT_REJECTED",
        "INVALID_SOURCE",
        "INVALID_PATCH",
        "NOT_FOUND",
        "LOCK_HELD",
        "GIT_COMMIT_FAILED",
        "MODEL_UNREACHABLE",
        "WRITER_START_FAILED",
        "NO_SESSION_ID",
    ):
        assert ReasonCode(required)


def test_tokens_load_offline_from_the_installed_package(tmp_path: Path) -> None:
    script = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('network disabled in this test')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from scriptorium.tokencount import count_tokens\n"
        "print(count_tokens('hello world'), count_tokens('<|endoftext|>'))\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"), "DATA_GYM_CACHE_DIR": str(tmp_path / "x")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    plain, special = map(int, out.stdout.split())
    assert plain == 2 and special > 1


def test_the_readme_documents_every_reason_code_with_its_retryability() -> None:
    readme = (PACKAGE.parent / "README.md").read_text()
    for code in ReasonCode:
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{code}` |")), None)
        assert row is not None, f"{code} is missing from the README's reason-code table"
        assert row.split("|")[2].strip() == ("yes" if code.retryable else "no"), code
