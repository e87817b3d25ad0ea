"""Project-wide contracts: the import layers (import-linter's, declared in ``pyproject.toml``), the error
tree, offline tokens."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scriptorium import errors
from scriptorium.errors import PermanentError, ReasonCode, ScriptoriumError, TransientError
from tests.helpers.package import MODULES, PACKAGE

ROOT = PACKAGE.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path, package_parent: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the contracts of ``root/pyproject.toml``, the package imported from ``package_parent``
    (no cache: a copy edited a moment ago is read as it is)."""
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=package_parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_the_package_keeps_its_import_contracts() -> None:
    """The layers, the core free of edges, the workspace free of what is built on it, the producers free of the
    workers, and no import circle: what ``pyproject.toml`` declares and CI checks."""
    out = lint_imports(ROOT, ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 5 kept, 0 broken." in out.stdout, out.stdout


def _copy_with(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the package (the mapped folders resolved) with ``line`` added to ``module``'s source."""
    copy = tmp_path / "tree"
    shutil.copytree(PACKAGE, copy / "scriptorium", ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / Path(*module.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + "\n" + line + "\n")
    return copy


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # The writer interfaces' neutral home undone: writers/ imports writing/ again (the package cycle of
        # issue 56), the import written at the top of the module.
        (
            "scriptorium.writers.verbatim",
            "from scriptorium.writing.batch import cut_batch",
            "The layers, top to bottom",
        ),
        # recall/branches.py back on the write pass, inside a function.
        (
            "scriptorium.recall.branches",
            "def _batch():\n    from scriptorium.writing import batch",
            "The layers, top to bottom",
        ),
        # changes/forget.py back on writing's history, for types only.
        (
            "scriptorium.changes.forget",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import scriptorium.writing.history",
            "The layers, top to bottom",
        ),
        # The hold queue's store back on access (issue 56: access and changes imported each other).
        ("scriptorium.changes.proposals", "from scriptorium.access import scope", "The layers, top to bottom"),
        # Who-may-see back above recall.
        ("scriptorium.audience", "import scriptorium.recall.records", "The layers, top to bottom"),
        ("scriptorium.workspace.paths", "import scriptorium.recall.text", "The workspace imports none of the layers"),
        ("scriptorium.recall.text", "from fastapi import FastAPI", "The core imports no edge"),
        ("scriptorium.access.scope", "from ..settings import Settings", "The core imports no edge"),
        ("scriptorium.producers.ingest", "from scriptorium.workers import tasks", "loads nothing of the worker side"),
        # A circle inside one package: writing's outcomes importing its history, which imports them.
        ("scriptorium.writing.outcomes", "from . import history", "No import circle"),
    ],
)
def test_an_import_against_a_contract_breaks_it(tmp_path: Path, module: str, line: str, contract: str) -> None:
    copy = _copy_with(tmp_path, module, line)
    out = lint_imports(ROOT, copy)
    assert out.returncode != 0, out.stdout
    broken = out.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken, out.stdout


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
        ReasonCode.WRITER_BUDGET_SPENT,
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


def test_the_docs_document_every_reason_code_with_its_retryability() -> None:
    reference = (PACKAGE.parent / "docs" / "workspace.md").read_text()
    for code in ReasonCode:
        row = next((line for line in reference.splitlines() if line.startswith(f"| `{code}` |")), None)
        assert row is not None, f"{code} is missing from the reason-code table in docs/workspace.md"
        assert row.split("|")[2].strip() == ("yes" if code.retryable else "no"), code
