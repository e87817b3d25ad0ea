"""What ``pip install .`` puts into site-packages: one top-level name, ``scriptorium``, holding every module."""

from __future__ import annotations

import ast
import email
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.package import MODULES, ROOT

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "scriptorium", "workers", "producers", "schemas")
"""What a build reads: copied, symlinks kept as they are, so the build leaves nothing in the checkout."""


def pip(*args: str) -> None:
    """Run pip offline, as the environment running the tests has it."""
    done = subprocess.run([sys.executable, "-m", "pip", *args, "-q"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree, out = tmp_path_factory.mktemp("tree"), tmp_path_factory.mktemp("dist")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tree / name)
    pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), str(tree))
    (found,) = out.glob("scriptorium-*.whl")
    return found


def _record(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (record,) = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
        return [line.split(",")[0] for line in archive.read(record).decode().splitlines() if line]


def test_the_wheel_installs_one_top_level_package(wheel: Path) -> None:
    tops = {path.split("/")[0] for path in _record(wheel)}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert len(dist_info) == 1 and tops - dist_info == {"scriptorium"}


def test_the_wheel_holds_every_module_of_the_tree(wheel: Path) -> None:
    """The folders mapped into the package (workers/, producers/, schemas/) included, and the data files."""
    recorded = set(_record(wheel))
    expected = {
        "/".join(name.split(".")) + ("/__init__.py" if p.name == "__init__.py" else ".py")
        for name, p in MODULES.items()
    }
    assert expected - recorded == set()
    assert {
        "scriptorium/workers/tasks.py",
        "scriptorium/producers/ingest.py",
        "scriptorium/schemas/events.py",
    } <= recorded
    assert {
        "scriptorium/py.typed",
        "scriptorium/writers/prompts/writer.md",
        "scriptorium/web/templates/memory.html",
        "scriptorium/runtimes/mcp_listing.json",
    } <= recorded


def test_the_installed_package_imports_from_site_packages_alone(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheel))
    assert {p.name for p in target.iterdir() if p.name != "bin" and not p.name.endswith(".dist-info")} == {
        "scriptorium"
    }
    script = (
        "import scriptorium, scriptorium.workers.tasks, scriptorium.producers.ingest, scriptorium.schemas.events\n"
        "import scriptorium.cli.main, scriptorium.runtimes.hooks\n"
        "print(scriptorium.workers.tasks.__file__)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert Path(run.stdout.strip()).is_relative_to(target)


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def test_the_wheel_carries_the_mit_license(wheel: Path) -> None:
    metadata = _metadata(wheel)
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert any(path.endswith(".dist-info/licenses/LICENSE") for path in _record(wheel))
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "Scriptorium contributors" in text


def test_the_wheel_says_posix_only(wheel: Path) -> None:
    """fcntl locks and Unix sockets: the classifiers and the README say POSIX, and nothing says Windows."""
    assert "Operating System :: POSIX" in _metadata(wheel).get_all("Classifier", [])
    readme = (ROOT / "README.md").read_text()
    assert "POSIX" in readme and "Windows" not in readme


def test_rank_bm25_is_no_runtime_dependency_and_the_package_never_imports_it(wheel: Path) -> None:
    """rank-bm25 is the reference recall's scores are checked against (tests, benchmarks): an extra only."""
    requires = _metadata(wheel).get_all("Requires-Dist", [])
    assert [r for r in requires if r.startswith("rank-bm25")]
    assert all("extra ==" in r for r in requires if r.startswith("rank-bm25"))
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith(".py"):
                for node in ast.walk(ast.parse(archive.read(name))):
                    if isinstance(node, ast.Import):
                        assert all(a.name.split(".")[0] != "rank_bm25" for a in node.names), name
                    elif isinstance(node, ast.ImportFrom):
                        assert (node.module or "").split(".")[0] != "rank_bm25", name
