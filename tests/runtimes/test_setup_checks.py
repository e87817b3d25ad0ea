"""``scriptorium setup`` checks before it writes (issue 59): it asks the runtime its version and refuses, changing
nothing, when the runtime is missing, hung or older than the settings it writes need; it says what it wrote,
where memory lives and the one next step; and ``--uninstall`` removes the folders setup made, never one that was
there before or holds anything else."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from scriptorium.runtimes.catalog import runtime
from scriptorium.runtimes.setup import installed
from scriptorium.runtimes.setup.installed import parse_version
from tests.helpers.edge import console
from tests.helpers.runtime_setup import ANSWERS, on_path, runtimes_path, setup, stand_in_runtimes
from tests.requirements import OPENCLAW, OPENCLAW_NODE, cli, require

COMMANDS = {"claude-code": "claude", "codex": "codex", "pi": "pi", "openclaw": "openclaw"}
OLDER = {
    "claude-code": ("2.1.117 (Claude Code)", "2.1.117", "2.1.118", "@anthropic-ai/claude-code"),
    "codex": ("codex-cli 0.154.2", "0.154.2", "0.155.0", "@openai/codex"),
    "pi": ("0.72.9", "0.72.9", "0.73.0", "@mariozechner/pi-coding-agent"),
    "openclaw": ("OpenClaw 2026.9.5 (0000000)", "2026.9.5", "2026.9.6", "openclaw"),
}
"""Per runtime: a stand-in's answer one release below what setup needs, that release, the minimum, the package."""


def files(root: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``root`` (a folder as None), by its path."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def run_setup(home: Path, state: Path, path: str, *args: str) -> tuple[int, dict[str, object], str]:
    """``scriptorium setup ARGS --json`` with ``path`` as PATH: exit code, the JSON answer or refusal, stdout."""
    out = console(
        ["setup", *args, "--state", str(state), "--json", "--no-writer"],
        env={"HOME": str(home), "PATH": path},
        unset=("CODEX_HOME", "OPENCLAW_STATE_DIR", "OPENCLAW_CONFIG_PATH"),
        cwd=home,
    )
    text = out.stdout if out.returncode == 0 else out.stderr
    return out.returncode, json.loads(text), out.stdout


@pytest.mark.parametrize("name", sorted(OLDER))
def test_a_runtime_older_than_the_settings_need_is_refused_and_nothing_changes(
    home: Path, tmp_path: Path, name: str
) -> None:
    """One release below the minimum (Claude Code 2.1.117 rejects a whole settings.json holding an ``mcp_tool``
    hook): RUNTIME_TOO_OLD, exit 3, naming the version found, the one needed and the upgrade command; every
    file as it was, no memory made."""
    answer, found, needed, package = OLDER[name]
    bin_dir = stand_in_runtimes(tmp_path / "old-bin", {COMMANDS[name]: answer})
    before = files(tmp_path)
    code, refusal, _ = run_setup(home, tmp_path / "state", on_path(bin_dir)["PATH"], name)
    assert code == 3 and refusal["reason"] == "RUNTIME_TOO_OLD", refusal
    message, guidance = str(refusal["message"]), str(refusal["guidance"])
    assert f"{found} " in message and f"older than {needed}" in message and str(bin_dir) in message, message
    assert f"npm install -g {package}@latest" in guidance and "--skip-runtime-check" in guidance, guidance
    assert files(tmp_path) == before, "nothing written, nothing made"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_runtime_not_on_path_is_refused_with_its_install_command_and_nothing_changes(
    home: Path, tmp_path: Path, name: str
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    before = files(tmp_path)
    code, refusal, _ = run_setup(home, tmp_path / "state", str(empty), name)
    assert code == 3 and refusal["reason"] == "RUNTIME_MISSING", refusal
    assert f"no `{COMMANDS[name]}` on PATH" in str(refusal["message"]), refusal
    requirement = runtime(name).requirement
    assert requirement is not None and requirement.install in str(refusal["guidance"])
    assert files(tmp_path) == before


def test_a_hung_version_query_is_bounded_and_refused(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``claude --version`` that never answers (and a child of it holding the pipe) is killed after the
    bound: RUNTIME_MISSING saying so, within seconds, nothing written."""
    monkeypatch.setattr(installed, "VERSION_TIMEOUT_S", 1.0)
    bin_dir = stand_in_runtimes(tmp_path / "hung-bin", script="sleep 60 & sleep 60")
    before = files(tmp_path)
    started = time.monotonic()
    code, refusal, _ = run_setup(home, tmp_path / "state", on_path(bin_dir)["PATH"], "claude-code")
    assert time.monotonic() - started < 15, "bounded by the timeout, not by the hung command"
    assert code == 3 and refusal["reason"] == "RUNTIME_MISSING", refusal
    assert "did not answer within 1 s" in str(refusal["message"]), refusal
    assert files(tmp_path) == before


@pytest.mark.parametrize(
    ("answer", "says"),
    [("Claude Code, a build of its own", "answered no version"), ("", "answered no version")],
)
def test_an_answer_without_a_version_is_refused(home: Path, tmp_path: Path, answer: str, says: str) -> None:
    bin_dir = stand_in_runtimes(tmp_path / "odd-bin", {"claude": answer})
    code, refusal, _ = run_setup(home, tmp_path / "state", on_path(bin_dir)["PATH"], "claude-code")
    assert code == 3 and refusal["reason"] == "RUNTIME_MISSING" and says in str(refusal["message"]), refusal


def test_skip_runtime_check_writes_for_an_older_runtime(home: Path, tmp_path: Path) -> None:
    """For those who know better (a runtime installed after setup, elsewhere than PATH): the settings are written."""
    bin_dir = stand_in_runtimes(tmp_path / "old-bin", {"claude": OLDER["claude-code"][0]})
    code, done, _ = run_setup(home, tmp_path / "state", on_path(bin_dir)["PATH"], "claude-code", "--skip-runtime-check")
    assert code == 0 and done["runtime_version"] is None, done
    assert "scriptorium" in json.loads((home / ".claude.json").read_text())["mcpServers"]


@pytest.mark.parametrize(
    ("name", "next_step"),
    [
        ("claude-code", "start a new Claude Code session (`claude`)"),
        ("codex", "trust the new hooks: `scriptorium setup codex --trust-hooks`"),
        ("pi", "start a new pi session (`pi`)"),
        ("openclaw", "start a new OpenClaw session (`openclaw`)"),
    ],
)
def test_setup_says_what_it_wrote_the_version_it_found_where_memory_lives_and_the_next_step(
    home: Path, tmp_path: Path, name: str, next_step: str
) -> None:
    state = tmp_path / "state"
    out = console(
        ["setup", name, "--state", str(state), "--no-writer"],
        env={"HOME": str(home), "PATH": runtimes_path(home)},
        unset=("CODEX_HOME", "OPENCLAW_STATE_DIR", "OPENCLAW_CONFIG_PATH"),
        cwd=home,
    )
    assert out.returncode == 0, out.stderr
    version = parse_version(ANSWERS[COMMANDS[name]])
    assert version is not None
    assert f"runtime  {name} {'.'.join(map(str, version))} (" in out.stdout, out.stdout
    assert f"memory  {state.resolve()}" in out.stdout and f"next  {next_step}" in out.stdout, out.stdout
    assert any(line.split()[0] in ("created", "updated") for line in out.stdout.splitlines()), out.stdout
    answer = setup(home, state, name)
    assert answer["runtime_version"] == ".".join(map(str, version)) and next_step in str(answer["next"]), answer


def test_the_version_is_the_first_dotted_triple_of_each_released_answer() -> None:
    assert parse_version("2.1.332 (Claude Code)") == (2, 1, 332)
    assert parse_version("codex-cli 0.171.0") == (0, 171, 0)
    assert parse_version("0.73.1\n") == (0, 73, 1)
    assert parse_version("OpenClaw 2026.9.6 (eb377ac)") == (2026, 9, 6)
    assert parse_version("v1.2") is None and parse_version("1.2.3.4") == (1, 2, 3)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_uninstall_removes_the_folders_setup_made(tmp_path: Path, name: str) -> None:
    """On a machine where the runtime never ran, setup makes its folders (``~/.claude``, ``~/.codex``,
    ``~/.pi/agent/…``, ``~/.openclaw/…``); uninstall leaves the home as it found it."""
    home = tmp_path / "home"
    home.mkdir()
    setup(home, tmp_path / "state", name)
    assert list(home.iterdir()), "setup wrote into the home"
    setup(home, tmp_path / "state", name, "--uninstall")
    assert files(home) == {}, "every file and folder setup made is gone"


@pytest.mark.parametrize(
    ("name", "there"),
    [("claude-code", ".claude"), ("codex", ".codex"), ("pi", ".pi/agent"), ("openclaw", ".openclaw")],
)
def test_uninstall_keeps_a_folder_that_was_there_before_or_holds_something_else(
    tmp_path: Path, name: str, there: str
) -> None:
    home = tmp_path / "home"
    (home / there).mkdir(parents=True)
    setup(home, tmp_path / "state", name)
    setup(home, tmp_path / "state", name, "--uninstall")
    assert files(home) == {p: None for p in ([".pi", ".pi/agent"] if name == "pi" else [there])}, "empty, kept"

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    setup(fresh, tmp_path / "state", name)
    made = fresh / there.split("/")[0]
    (made / "sessions").mkdir()  # the runtime ran since, and keeps something there
    (made / "sessions" / "one.jsonl").write_text("{}\n")
    setup(fresh, tmp_path / "state", name, "--uninstall")
    assert (made / "sessions" / "one.jsonl").read_text() == "{}\n"


def test_project_scope_uninstall_removes_the_claude_folder_it_made(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    setup(home, tmp_path / "state", "claude-code", "--scope", "project", cwd=project)
    setup(home, tmp_path / "state", "claude-code", "--scope", "project", "--uninstall", cwd=project)
    assert sorted(p.name for p in project.iterdir()) == ["src"]


def test_the_pinned_runtime_clis_pass_the_check() -> None:
    """The released CLIs the real-runtime tests drive answer ``--version`` with a release setup accepts (only
    ``--version`` is run: cheap)."""
    require("runtime-clis")
    from scriptorium.runtimes.setup.command import check_runtime

    for name in ("claude-code", "codex", "pi"):
        found = check_runtime(name, str(cli(COMMANDS[name])))
        requirement = runtime(name).requirement
        assert found is not None and requirement is not None and found.version >= requirement.minimum, name


def test_the_pinned_openclaw_passes_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    require("openclaw")
    from scriptorium.runtimes.setup.command import check_runtime

    monkeypatch.setenv("PATH", f"{OPENCLAW_NODE}{os.pathsep}{os.environ['PATH']}")  # the Node it needs
    found = check_runtime("openclaw", str(OPENCLAW / "node_modules" / ".bin" / "openclaw"))
    assert found is not None and found.version >= (2026, 9, 6), found
