"""What ``pip install .`` puts into site-packages: one top-level name, ``scriptorium``, holding every module."""

from __future__ import annotations

import ast
import email
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.helpers.package import MODULES, ROOT

DISTRIBUTION = "scriptorium-memory"
"""The name on the package index: ``scriptorium`` there is an unrelated project (a Multimarkdown/LaTeX framework)."""
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
    (found,) = out.glob("scriptorium_memory-*.whl")
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
        "scriptorium/runtimes/mcp/listing.json",
    } <= recorded


def test_the_installed_package_imports_from_site_packages_alone(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheel))
    assert {p.name for p in target.iterdir() if p.name != "bin" and not p.name.endswith(".dist-info")} == {
        "scriptorium"
    }
    script = (
        "import scriptorium, scriptorium.workers.tasks, scriptorium.producers.ingest, scriptorium.schemas.events\n"
        "import scriptorium.cli.main, scriptorium.runtimes.hooks.command\n"
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
    """fcntl locks and Unix sockets: the classifiers and the README say POSIX, and nothing says Windows (nor
    the pages of docs/)."""
    assert "Operating System :: POSIX" in _metadata(wheel).get_all("Classifier", [])
    readme = (ROOT / "README.md").read_text()
    assert "POSIX" in readme and "Windows" not in readme
    for page in sorted((ROOT / "docs").rglob("*.md")):
        assert "Windows" not in page.read_text(), page


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


def test_the_distribution_has_a_name_of_its_own(wheel: Path) -> None:
    """Installed as ``scriptorium-memory``, imported and run as ``scriptorium``; whatever tells a user what to
    install names it so, never the index's other ``scriptorium``."""
    metadata = _metadata(wheel)
    assert metadata["Name"] == DISTRIBUTION
    assert any(r.startswith(f"{DISTRIBUTION}[") and 'extra == "test"' in r for r in metadata.get_all("Requires-Dist"))
    told = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    assert len(told) > 2, "the docs pages are read too"
    told += [*(ROOT / "integrations").rglob("*.json"), *(ROOT / ".claude-plugin").rglob("*.json")]
    told += [p for folder in SOURCES[3:] for p in (ROOT / folder).rglob("*.py")]
    for path in told:
        text = path.read_text(encoding="utf-8")
        assert "scriptorium[" not in text.replace(f"{DISTRIBUTION}[", ""), path
        for line in text.splitlines():
            for said in line.split("pip install ")[1:]:
                assert not said.strip("'\"`").startswith("scriptorium") or said.strip("'\"`").startswith(
                    DISTRIBUTION
                ), (path, line)
    plugin = json.loads((ROOT / "integrations/claude-code/.claude-plugin/plugin.json").read_text())
    assert f"pip install {DISTRIBUTION}" in plugin["description"]


def test_the_wheel_installed_into_a_fresh_venv_has_its_files_and_runs(wheel: Path, tmp_path: Path) -> None:
    """``pip install`` of the built wheel works as the checkout does: a venv of its own, the wheel installed
    into it offline, the dependencies this environment's (its site-packages seen through a ``.pth``: the
    checkout's own editable install there is not loaded, a ``.pth`` in a folder a ``.pth`` adds is not run)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    # The wheel first, into a venv that sees nothing else: with this environment's site-packages already in
    # view, pip would find the distribution installed there (CI installs it so) and install nothing here.
    pip("--python", str(python), "install", "--no-deps", "--no-index", str(wheel))
    deps = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(purelib, "_test_dependencies.pth").write_text("".join(f"{d}\n" for d in sorted(deps)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SCRIPTORIUM_"))}
    env["HOME"] = str(tmp_path / "home")
    script = (
        "import json, scriptorium\n"
        "from importlib.resources import files\n"
        "from importlib.metadata import distribution\n"
        "root = files('scriptorium')\n"
        "wanted = ['py.typed', 'writers/prompts/writer.md', 'writers/prompts/organizer.md',\n"
        "  'writers/prompts/agent_writer.md', 'writers/prompts/agent_organizer.md',\n"
        "  'web/templates/memory.html', 'web/templates/login.html', 'web/static/memory.css',\n"
        "  'runtimes/mcp/listing.json', 'runtimes/pi_extension/index.ts', 'runtimes/pi_extension/package.json',\n"
        "  'runtimes/openclaw_plugin/index.ts', 'runtimes/openclaw_plugin/package.json',\n"
        "  'runtimes/openclaw_plugin/openclaw.plugin.json']\n"
        "missing = [w for w in wanted if not root.joinpath(w).is_file()]\n"
        "print(json.dumps({'file': scriptorium.__file__, 'missing': missing,\n"
        "  'version': distribution('scriptorium-memory').version}))\n"
    )
    run = subprocess.run([python, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout)
    assert Path(found["file"]).is_relative_to(Path(purelib)) and found["missing"] == []
    command = venv / "bin" / "scriptorium"
    helped = subprocess.run([command, "--help"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert helped.returncode == 0 and "usage: scriptorium" in helped.stdout, helped.stderr
    state = tmp_path / "state"
    made = subprocess.run(
        [command, "memory", "init", "--state", str(state)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert made.returncode == 0 and (state / "memory" / "core.md").is_file(), made.stderr
