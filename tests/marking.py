"""Markers by what a test needs, read off its calls to :func:`tests.requirements.require`.

Nobody types a marker on a test: the conftest hook gives each collected test the marker of every requirement
it can reach — called in the test itself, at its module's top level, in a fixture it uses (pytest's own
resolution says which fixture function that is), or in a helper either of them calls, however deep. A
fixture that requires something only for one of its params (``if request.param == "postgres":``) marks
only the tests run with that param. Everything under ``tests/cluster`` is marked ``cluster`` as well.

The reading is static (the source's syntax tree), so a requirement named through a variable is not seen;
``tests/test_marking.py`` checks that every ``require`` call in the tests names its requirement literally.
"""

from __future__ import annotations

import ast
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.requirements import REQUIREMENTS

TESTS = Path(__file__).resolve().parent
DIRECTORY_MARKERS = {"cluster": "cluster"}
"""Folders under tests/ whose every test carries a marker whatever it requires."""

Key = tuple[Path, str]
"""A function as (file, name); methods share their class's file."""


@dataclass
class _Function:
    requires: set[str] = field(default_factory=set)
    when_param: set[tuple[str, str, bool]] = field(default_factory=set)
    """(requirement, param, equal): required only when the fixture's ``request.param`` is (equal) or is not
    that param."""
    calls: set[str] = field(default_factory=set)
    """Plain names called (resolved in the file: its own functions, then what it imports from tests)."""
    method_calls: set[str] = field(default_factory=set)
    """Attribute names called (``machine.openclaw_argv(...)``): matched against methods of test classes."""


@dataclass
class _Index:
    functions: dict[Key, _Function] = field(default_factory=dict)
    methods: dict[str, set[Key]] = field(default_factory=dict)
    imports: dict[Path, dict[str, Key]] = field(default_factory=dict)
    module_requires: dict[Path, set[str]] = field(default_factory=dict)


def _required_names(call: ast.Call) -> set[str]:
    """The requirement names a ``require(...)`` call can pass: every string literal in its first argument
    that names one (both sides of ``"a" if x else "b"``)."""
    if not call.args:
        return set()
    return {
        node.value
        for node in ast.walk(call.args[0])
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in REQUIREMENTS
    }


def _param_value(test: ast.expr) -> str | None:
    """``"x"`` for ``request.param == "x"`` (either way round), else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return None
    sides = [test.left, test.comparators[0]]
    is_param = [isinstance(s, ast.Attribute) and s.attr == "param" for s in sides]
    values = [s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
    return values[0] if any(is_param) and values else None


def _scan(body: list[ast.stmt], into: _Function, param: tuple[str, bool] | None = None) -> None:
    """Record ``body``'s require() calls and calls; under ``param`` (value, equal) they hold only when
    ``request.param`` equals (or, False, differs from) that value: inside ``if request.param == "x":``, or
    after such an ``if`` whose body returns."""
    for at, stmt in enumerate(body):
        if isinstance(stmt, ast.If) and (value := _param_value(stmt.test)) is not None:
            _scan(stmt.body, into, (value, True))
            _scan(stmt.orelse, into, (value, False) if param is None else param)
            if param is None and not stmt.orelse and stmt.body and isinstance(stmt.body[-1], ast.Return):
                _scan(body[at + 1 :], into, (value, False))
                return
            continue
        for node in ast.walk(stmt):
            if not isinstance(node, ast.Call):
                continue
            if isinstance(node.func, ast.Name) and node.func.id == "require":
                names = _required_names(node)
                if param is None:
                    into.requires |= names
                else:
                    into.when_param |= {(n, *param) for n in names}
            elif isinstance(node.func, ast.Name):
                into.calls.add(node.func.id)
            elif isinstance(node.func, ast.Attribute):
                into.method_calls.add(node.func.attr)


def _module_path(module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != "tests":
        return None
    base = TESTS.parent.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate.resolve()
    return None


def sources() -> list[Path]:
    """The project's Python under tests/, not the runtimes' npm installs beside it (node_modules, not walked:
    tens of thousands of files)."""
    found = []
    for folder, folders, files in os.walk(TESTS):
        folders[:] = [name for name in folders if name != "node_modules"]
        found += [Path(folder, name) for name in files if name.endswith(".py")]
    return [p.resolve() for p in sorted(found)]


@functools.cache
def _index() -> _Index:
    index = _Index()
    for path in sources():
        tree = ast.parse(path.read_text(), str(path))
        top = _Function()
        _scan([s for s in tree.body if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)], top)
        index.module_requires[path] = top.requires
        index.imports[path] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and (source := _module_path(node.module)):
                index.imports[path].update({a.asname or a.name: (source, a.name) for a in node.names})
        for node in tree.body:
            defs = [(node, False)] if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else []
            if isinstance(node, ast.ClassDef):
                defs = [(n, True) for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
            for fn, is_method in defs:
                found = index.functions.setdefault((path, fn.name), _Function())
                _scan(fn.body, found)
                if is_method:
                    index.methods.setdefault(fn.name, set()).add((path, fn.name))
    return index


def _resolve(index: _Index, path: Path, name: str, seen: frozenset[Key] = frozenset()) -> Key | None:
    if (path, name) in index.functions:
        return (path, name)
    target = index.imports.get(path, {}).get(name)
    if target is None or target in seen:
        return None
    return _resolve(index, target[0], target[1], seen | {target})


@functools.cache
def needs(key: Key) -> frozenset[str]:
    """Every requirement function ``key`` reaches unconditionally, through the helpers it calls."""
    index = _index()
    reached: set[str] = set()
    stack, seen = [key], {key}
    while stack:
        current = stack.pop()
        function = index.functions.get(current)
        if function is None:
            continue
        reached |= function.requires
        callees = {_resolve(index, current[0], n) for n in function.calls}
        callees |= {m for n in function.method_calls for m in index.methods.get(n, ())}
        for callee in callees - seen - {None}:
            assert callee is not None
            seen.add(callee)
            stack.append(callee)
    return frozenset(reached)


@functools.cache
def _resolved(path: str) -> Path:
    """``path`` resolved, once per path: every test asks for its file and each of its fixtures' files."""
    return Path(path).resolve()


def _key(function: Any) -> Key | None:
    code = getattr(getattr(function, "__wrapped__", function), "__code__", None)
    return None if code is None else (_resolved(code.co_filename), code.co_name)


def item_needs(item: pytest.Item) -> set[str]:
    """The requirements a collected test reaches: its module, its function and its fixtures."""
    index = _index()
    path = _resolved(str(item.path))
    found = set(index.module_requires.get(path, ()))
    function = getattr(item, "function", None)
    if function is not None and (key := _key(function)) is not None:
        found |= needs(key)
    info = getattr(item, "_fixtureinfo", None)
    params = getattr(getattr(item, "callspec", None), "params", {})
    for name, definitions in info.name2fixturedefs.items() if info is not None else ():
        # The last definition is the one used (a conftest's or module's override); an earlier one only when
        # the later asks for its own name (extends it).
        for definition in reversed(definitions):
            key = _key(definition.func)
            if key is not None and key in index.functions:
                found |= needs(key)
                conditions = index.functions[key].when_param
                found |= {r for r, value, equal in conditions if name in params and (params[name] == value) == equal}
            if name not in definition.argnames:
                break
    return found


def markers_of(item: pytest.Item) -> set[str]:
    found = {m for r in item_needs(item) if (m := REQUIREMENTS[r].marker) is not None}
    relative = _resolved(str(item.path)).relative_to(TESTS)
    if len(relative.parts) > 1 and relative.parts[0] in DIRECTORY_MARKERS:
        found.add(DIRECTORY_MARKERS[relative.parts[0]])
    return found


def shares_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture of the tests (a world, a server, a browser, a wheel that
    the module's tests share): pytest builds one per module in each worker process that runs such a test."""
    info = getattr(item, "_fixtureinfo", None)
    for definitions in info.name2fixturedefs.values() if info is not None else ():
        for definition in definitions:
            key = _key(definition.func)
            if definition.scope == "module" and key is not None and key[0].is_relative_to(TESTS):
                return True
    return False


def mark(items: list[pytest.Item]) -> None:
    """Add each test's markers; a test that needs network namespaces joins the ``netns`` xdist group (run
    with ``--dist loadgroup``, one worker runs them all: their links and addresses are per process). The tests
    of a module that share a module-scoped fixture join a group of that module's (unless they have a group
    already), so the fixture is built once, not in each of the workers the tests would be spread over."""
    for item in items:
        found = markers_of(item)
        for name in sorted(found):
            item.add_marker(name)
        if "netns" in found:
            item.add_marker(pytest.mark.xdist_group("netns"))
        elif item.get_closest_marker("xdist_group") is None and shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))
