"""Project-wide contracts: the core's imports, the error tree, offline tokens."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scriptorium import errors
from scriptorium.errors import PermanentError, ReasonCode, ScriptoriumError, TransientError

PACKAGE = Path(__file__).resolve().parents[1] / "scriptorium"
EDGES = {
    "cli.py",
    "cli_changes.py",
    "cli_cluster.py",
    "cli_output.py",
    "cli_recall.py",
    "cli_runtime.py",
    "settings.py",
    "composition.py",
    "tools.py",
    "hooks.py",
    "entry.py",
    "hook_daemon.py",
    "setup.py",
    "mcp_server.py",
    "requests.py",
    "web",
}
FORBIDDEN = {"celery", "redis", "fastapi", "starlette", "click", "typer", "pydantic", "pydantic_settings", "kombu"}


EDGE_MODULES = {name.removesuffix(".py") for name in EDGES}


def _core_modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in EDGES]


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module ``source`` imports, as absolute dotted names (relative imports resolved).

    ``from a import b`` counts both ``a`` and ``a.b`` (``b`` may be a module).
    """
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
            found.add(target)
            found |= {f"{target}.{alias.name}" for alias in node.names}
    return found


def _edge_hits(imported: set[str]) -> set[str]:
    forbidden = {name for name in imported if name.split(".")[0] in FORBIDDEN}
    edges = {name for name in imported if name.startswith("scriptorium.") and name.split(".")[1] in EDGE_MODULES}
    return forbidden | edges


@pytest.mark.parametrize("module", _core_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_core_imports_no_edge_framework(module: Path) -> None:
    rel = module.relative_to(PACKAGE.parent).with_suffix("")
    dotted = ".".join(rel.parts).removesuffix(".__init__")
    imported = imported_modules(module.read_text(), dotted, is_package=module.name == "__init__.py")
    assert not _edge_hits(imported), f"{module} imports an edge or an edge framework"


@pytest.mark.parametrize(
    "module", sorted((PACKAGE / "workspace").glob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_the_workspace_core_does_not_import_the_layers_built_on_it(module: Path) -> None:
    """Structured changes, recall and writing build on the workspace; it imports none of them (no cycle)."""
    imported = imported_modules(
        module.read_text(), f"scriptorium.workspace.{module.stem}", module.name == "__init__.py"
    )
    above = {"changes", "recall", "writing", "writers", "sessions"}
    assert not {name for name in imported if name.startswith("scriptorium.") and name.split(".")[1] in above}


@pytest.mark.parametrize(
    "line",
    [
        "import scriptorium.cli",
        "import scriptorium.web.app as app",
        "from scriptorium import cli",
        "from scriptorium import settings as s",
        "from .. import tools",
        "from ..web import app",
        "from ..composition import build",
        "import celery",
        "from redis import Redis",
        "import pydantic.fields",
    ],
)
def test_the_boundary_check_sees_every_import_form(line: str) -> None:
    assert _edge_hits(imported_modules(line, "scriptorium.workspace.example")), line


def test_the_boundary_check_allows_core_imports() -> None:
    source = "from . import paths\nfrom ..errors import ReasonCode\nimport scriptorium.sessions\nimport json\n"
    assert not _edge_hits(imported_modules(source, "scriptorium.workspace.example"))


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
        "from scriptorium.tokens import count_tokens\n"
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
