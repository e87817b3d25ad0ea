"""No test skips except through tests/requirements.py, and under CI every requirement holds."""

from __future__ import annotations

import ast
import contextlib
import io
import sys
from pathlib import Path

import pytest

from tests.requirements import REQUIREMENTS, under_ci

TESTS = Path(__file__).resolve().parent
SKIPPERS = {"skip", "skipif", "importorskip", "skipIf", "skipUnless", "SkipTest"}


def _skip_calls(path: Path) -> list[str]:
    """Uses of ``pytest.skip``, ``pytest.mark.skipif``, ``pytest.importorskip`` and unittest's skips."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in SKIPPERS:
            found.append(f"{path.name}:{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("pytest", "unittest"):
            found += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names if a.name in SKIPPERS]
    return found


def _test_sources() -> list[Path]:
    """The project's Python under tests/, not the runtimes' npm installs beside it (node_modules)."""
    return [path for path in sorted(TESTS.rglob("*.py")) if "node_modules" not in path.relative_to(TESTS).parts]


def test_every_skip_goes_through_the_requirements_module() -> None:
    allowed = {TESTS / "requirements.py"}
    offenders = [hit for path in _test_sources() if path not in allowed for hit in _skip_calls(path)]
    assert offenders == [], "skip only through tests.requirements.require(): " + "; ".join(offenders)


def test_the_scan_sees_every_way_to_skip(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import pytest, unittest\nfrom unittest import skipIf\n"
        "pytestmark = pytest.mark.skipif(True, reason='x')\n"
        "mod = pytest.importorskip('nope')\n"
        "def test_a():\n    pytest.skip('x')\n"
        "@unittest.skip('x')\ndef test_b(): pass\n"
    )
    hits = [hit.rsplit(": ", 1)[1] for hit in _skip_calls(sample)]
    assert hits.count(".skip") == 2 and ".skipif" in hits and ".importorskip" in hits and "import skipIf" in hits


@pytest.mark.parametrize("name", sorted(REQUIREMENTS))
def test_each_requirement_says_how_to_get_it_and_holds_under_ci(name: str) -> None:
    """A skip names what is missing and the command (or folder) that provides it; under CI=true nothing is
    missing, so no test may skip there."""
    needed = REQUIREMENTS[name]
    commands = ("apt-get install", "pip install", "npm ci", "start it with", "../shared")
    assert any(how in needed.missing for how in commands)
    if under_ci():
        assert needed.available(), f"{name}: {needed.missing}"


def _pytest_in_process(folder: Path, ci: str, *args: str) -> tuple[int, str]:
    """``pytest ARGS`` run in ``folder`` with ``CI=ci``, in this process: its exit code and what it printed.
    The modules it imported (the folder's conftest and tests) and its ``sys.path`` entries are dropped after,
    so each run imports them afresh as a process of its own would."""
    modules, path, printed = set(sys.modules), list(sys.path), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.chdir(folder)
        patch.setenv("CI", ci)
        try:
            code = pytest.main(list(args))
        finally:
            for name in set(sys.modules) - modules:
                del sys.modules[name]
            sys.path[:] = path
    return int(code), printed.getvalue()


def test_a_skip_under_ci_fails_the_run(tmp_path: Path) -> None:
    """The conftest hook turns a skip (in a test, or at module level) into a failure under CI=true."""
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS.parent)!r})\n"
        "from tests.conftest import pytest_runtest_makereport, "
        "pytest_make_collect_report\n"
    )
    (tmp_path / "test_inner.py").write_text("import pytest\ndef test_x():\n    pytest.skip('no server')\n")
    (tmp_path / "test_module.py").write_text(
        "import pytest\npytest.skip('no browser', allow_module_level=True)\ndef test_y():\n    pass\n"
    )
    # Both files in one run per setting (a module-level failure must not stop the other file's test).
    run = ["-q", "-p", "no:cacheprovider", "--continue-on-collection-errors", "-rA", "test_inner.py", "test_module.py"]
    code, out = _pytest_in_process(tmp_path, "true", *run)
    assert code == 1, out
    for name, reason in (("test_inner.py", "no server"), ("test_module.py", "no browser")):
        failed = [line for line in out.splitlines() if line.startswith(("FAILED", "ERROR")) and name in line]
        assert failed and "skipped under CI=true" in out and reason in out, out
    code, out = _pytest_in_process(tmp_path, "false", *run)
    assert code == 0 and "2 skipped" in out, out
