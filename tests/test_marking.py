"""Markers by what a test needs: registered, derived from the require() calls, and selectable with -m."""

from __future__ import annotations

import ast
import tomllib

import pytest

from tests.marking import TESTS, needs, sources
from tests.requirements import MARKERS, REQUIREMENTS

ROOT = TESTS.parent


class _Selected:
    """A plugin keeping the IDs of the tests a session selected (what ``--collect-only -q`` lists)."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.ids = [item.nodeid for item in session.items]


def _collected(*args: str) -> list[str]:
    """The tests ``pytest --collect-only ARGS`` selects, run in this process (pytest's own collection, the
    conftest's marking hook and ``-m``'s deselection, on modules this process has imported already)."""
    selected = _Selected()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *args], plugins=[selected])
    assert code == pytest.ExitCode.OK, (code, args)
    return selected.ids


def test_every_requirement_marker_is_registered_in_pyproject() -> None:
    registered = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    described = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in registered}
    assert {r.marker for r in REQUIREMENTS.values()} - {None} == set(MARKERS)
    assert {name: described.get(name) for name in MARKERS} == MARKERS


def test_every_require_call_names_its_requirement_literally() -> None:
    """The markers are read from the source: a name built at run time would go unseen. A choice between
    literals (``a if x else b``) marks the test with every one of them."""
    unread = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "require":
                parts = list(ast.walk(node.args[0]))
                named = [n for n in parts if isinstance(n, ast.Constant) and n.value in REQUIREMENTS]
                if not named or any(isinstance(n, ast.JoinedStr) for n in parts):
                    unread.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert unread == []


def test_a_helper_passes_its_requirement_to_whoever_calls_it() -> None:
    real = (TESTS / "runtimes" / "real.py").resolve()
    assert needs((real, "machine")) == {"runtime-clis"}
    assert needs((real, "Machine")) == frozenset()
    typescript = (TESTS / "test_typescript.py").resolve()
    assert needs((typescript, "test_the_openclaw_plugin_type_checks_against_the_pinned_openclaw")) == {
        "runtime-clis",
        "openclaw",
    }


def test_a_marker_selects_the_tests_that_need_it_and_nothing_else() -> None:
    """Through a helper (machine), through a fixture only for one of its params (store's postgres), and
    through a fixture two levels down (cluster -> redis_server)."""
    files = ["tests/runtimes/test_real_pi.py", "tests/runtimes/test_setup.py", "tests/sessions/test_store.py"]
    everything = _collected(*files)
    real = _collected("-m", "real_cli", *files)
    assert real and all(t.startswith("tests/runtimes/test_real_pi.py::") for t in real)
    assert {t for t in everything if t.startswith("tests/runtimes/test_real_pi.py::")} == set(real)
    postgres = _collected("-m", "postgres", *files)
    assert postgres and all("[postgres" in t for t in postgres)
    assert {t for t in everything if "[postgres" in t} == set(postgres)
    assert len(_collected("-m", "not real_cli and not postgres", *files)) == len(everything) - len(real) - len(postgres)
    cluster = _collected("-m", "cluster", "tests/cluster/test_fencing.py", "tests/runtimes/test_setup.py")
    assert cluster and all(t.startswith("tests/cluster/") for t in cluster)
