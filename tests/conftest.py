"""Shared fixtures: a fresh workspace on a temporary folder, and byte-level snapshots."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange
from tests.helpers.reports import REPORTS
from tests.marking import mark
from tests.requirements import under_ci

pytest_plugins = ["tests.sessions_fixtures", "tests.timing"]

# Under CI=true every property test draws the same examples each run (derandomize: a failure is the code's,
# not the seed's, and reruns find it again), nothing fails for its time on a loaded machine (no deadline, no
# too_slow health check), and a failure prints the blob that reproduces it (@reproduce_failure).
settings.register_profile(
    "ci", derandomize=True, deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
if under_ci():
    settings.load_profile("ci")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers by what each test needs (``pytest -m 'not cluster'``), read off its require() calls. First:
    pytest-xdist's own hook puts a test's ``xdist_group`` into its ID, where ``--dist loadgroup`` reads it, so
    the ``netns`` group added here must be there before it runs."""
    mark(items)


# Under CI=true nothing may skip: every requirement of tests/requirements.py holds there, so a
# skip means a test found a way around them. Test and collection (module-level) skips both fail.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    _fail_skips_under_ci(report)
    item.stash.setdefault(REPORTS, {})[report.when] = report


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _fail_skips_under_ci(outcome.get_result())  # type: ignore[attr-defined]


def _fail_skips_under_ci(report: pytest.TestReport | pytest.CollectReport) -> None:
    if under_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true, where nothing may skip: {reason}"


@pytest.fixture(autouse=True)
def user_folders(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own per-user data and config folders (where a command without ``--state`` finds
    the memory), so no test reads or writes the real user's memory or config."""
    base = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("XDG_DATA_HOME", str(base / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.delenv("SCRIPTORIUM_STATE", raising=False)


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every installed file's bytes (runtime state and git excluded). The two excluded folders are not walked
    at all: .git holds a loose object per blob, tree and commit, and most callers take this before and after
    every change."""
    out: dict[str, bytes] = {}
    top = [path for path in root.glob("*") if path.name not in (".git", ".scriptorium")]
    inner = [path for folder in top if folder.is_dir() and not folder.is_symlink() for path in folder.rglob("*")]
    for path in sorted([*top, *inner]):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def git_log(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(root), "log", "--format=%H %T %s", "main"], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def git_tree_of_files(root: Path) -> str:
    """The git tree hash of the installed files, computed independently by the git CLI."""
    index = root / ".scriptorium" / "verify-index"
    index.unlink(missing_ok=True)
    env = {"GIT_INDEX_FILE": str(index), "PATH": "/usr/bin:/bin"}
    git = ["git", f"--git-dir={root / '.git'}", f"--work-tree={root}"]
    paths = [
        p for p in ("topics", "sources", "timeline", "core.md", "recent.md", "relations.json") if (root / p).exists()
    ]
    subprocess.run([*git, "add", "--", *paths], check=True, env=env, capture_output=True)
    tree = subprocess.run([*git, "write-tree"], check=True, env=env, capture_output=True, text=True).stdout.strip()
    index.unlink()
    return tree


def message(n: int, text: str | None = None, thread: str = "t1", trust: str = "trusted") -> SourceMessage:
    return SourceMessage(
        "test",
        thread,
        f"m{n}",
        "user" if n % 2 else "assistant",
        f"2026-11-{1 + n % 28:02d}T10:00:00Z",
        text or f"message number {n}",
        trust=trust,  # type: ignore[arg-type]
    )


class State:
    """Everything a rejection must leave unchanged."""

    def __init__(self, ws: MemoryWorkspace) -> None:
        self.files = tree_bytes(ws.root)
        self.revision = ws.revision
        self.log = git_log(ws.root)

    def assert_unchanged(self, ws: MemoryWorkspace) -> None:
        assert ws.revision == self.revision
        assert git_log(ws.root) == self.log
        assert tree_bytes(ws.root) == self.files


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[MemoryWorkspace]:
    workspace = MemoryWorkspace.init(tmp_path / "memory")
    yield workspace
    workspace.close()


@pytest.fixture
def seeded(ws: MemoryWorkspace) -> MemoryWorkspace:
    """A workspace with ten archived sources (test/t1/m0..m9), committed."""
    with ws.lock():
        paths = ws.archive_sources([message(n) for n in range(10)])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    return ws


WORLD_CORE = "# Core\n\nThe user is called Sam [k](test/t1/m1).\n\nThe user owns a yacht [k](test/web/m2).\n"


def trusted_and_pending_world(memory: Path) -> None:
    """A workspace whose core and topics hold records of both trusts.

    ``test/t1/m1`` is trusted, ``test/web/m2`` (a forum post) pending: the core cites
    both, ``topics/deploy.md`` the trusted one and ``topics/boats.md`` the pending one.
    """
    ws = MemoryWorkspace.init(memory)
    with ws.lock():
        paths = ws.archive_sources([message(1), message(2, "a forum post", thread="web", trust="pending")])
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    ws.apply_changes(
        [
            TopicChange("topics/core.md", "create", WORLD_CORE),
            TopicChange("topics/deploy.md", "create", "# Deploy\n\nReleases ship on Thursdays [k](test/t1/m1).\n"),
            TopicChange("topics/boats.md", "create", "# Boats\n\nThe yacht is moored in Kiel [k](test/web/m2).\n"),
        ],
        message="seed",
    )
    ws.close()
