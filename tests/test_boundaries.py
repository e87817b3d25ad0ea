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
    "settings.py",
    "composition.py",
    "tools.py",
    "web",
}
FORBIDDEN = {"celery", "redis", "fastapi", "starlette", "click", "typer", "pydantic", "pydantic_settings", "kombu"}


def _core_modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in EDGES]


@pytest.mark.parametrize("module", _core_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_core_imports_no_edge_framework(module: Path) -> None:
    tree = ast.parse(module.read_text())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scriptorium."):
            assert node.module.split(".")[1] not in {
                "cli",
                "cli_changes",
                "cli_cluster",
                "cli_output",
                "settings",
                "composition",
                "tools",
                "web",
            }, f"{module} imports an edge"
    assert not imported & FORBIDDEN


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
