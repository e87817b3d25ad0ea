"""One memory per user: setup records it, every command finds it, nobody else can read it.

``HOME``, ``XDG_DATA_HOME`` and ``XDG_CONFIG_HOME`` are the test's own (the conftest points the XDG folders
at a temporary folder for every test); the commands run as the runtime starts them, under umask 022.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.runtime_setup import runtimes_path
from tests.helpers.transcripts import cc

SCRIPT = Path(sys.executable).with_name("scriptorium")


@pytest.fixture
def user(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A user's environment: a home with Claude Code's files (``~/.claude.json`` 0600, as Claude Code makes
    it), their own XDG folders, and umask 022 for every command started."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text('{"model": "opus"}\n')
    os.chmod(home / ".claude" / "settings.json", 0o644)
    (home / ".claude.json").write_text('{"numStartups": 3}\n')
    os.chmod(home / ".claude.json", 0o600)
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "SCRIPTORIUM_WATCH": "false",
        "SCRIPTORIUM_HOOK_DAEMON_IDLE_S": "0",
        "SCRIPTORIUM_HOOK_WRITES": "inline",
        "SCRIPTORIUM_TRIGGER_TOKENS": "0",
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "PATH": runtimes_path(home),
    }
    env.pop("SCRIPTORIUM_STATE", None)
    old = os.umask(0o022)
    try:
        yield env
    finally:
        os.umask(old)


def run(env: dict[str, str], *args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], input=stdin, capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def hook_command(settings_file: Path) -> list[str]:
    """The command setup wrote for the hooks that run one (SubagentStop's: the same for every event, which
    the payload names), split as the runtime's shell would."""
    hooks = json.loads(settings_file.read_text())["hooks"]
    return shlex.split(hooks["SubagentStop"][-1]["hooks"][0]["command"])


def stop_payload(home: Path, session: str, cwd: Path) -> str:
    folder = home / ".claude" / "projects" / "-work-app"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{session}.jsonl"
    path.write_text(
        "".join(
            cc(n, f"e{n - 1}" if n else None, "user" if n % 2 == 0 else "assistant").replace("inc-session", session)
            + "\n"
            for n in range(4)
        )
    )
    payload = {"session_id": session, "transcript_path": str(path), "cwd": str(cwd), "hook_event_name": "Stop"}
    return json.dumps(payload)


def open_to_others(root: Path) -> list[str]:
    """Every folder and file under ``root`` (``root`` included) that its group or others may use."""
    found = []
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        if not stat.S_ISLNK(mode) and mode & 0o077:
            found.append(f"{path.relative_to(root.parent)} {stat.filemode(mode)}")
    return found


def test_user_scope_setup_puts_one_memory_where_every_command_finds_it(user: dict[str, str], tmp_path: Path) -> None:
    home = Path(user["HOME"])
    project = tmp_path / "some-project"
    project.mkdir()
    done = run(user, "setup", "claude-code", "--no-writer", cwd=project)
    assert done.returncode == 0, done.stderr
    state = tmp_path / "data" / "scriptorium"
    assert f"memory  {state}" in done.stdout, "setup says where the memory lives"
    assert not (project / ".scriptorium").exists(), "never the folder setup ran in"
    assert json.loads((tmp_path / "config" / "scriptorium" / "config.json").read_text()) == {"state": str(state)}

    stop = hook_command(home / ".claude" / "settings.json")
    assert stop[-2:] == ["--state", str(state)]
    other = tmp_path / "another-project"
    other.mkdir()
    hooked = subprocess.run(
        stop, input=stop_payload(home, "s-1", other), capture_output=True, text=True, env=user, cwd=other
    )
    assert hooked.returncode == 0 and hooked.stdout == "", hooked.stderr

    elsewhere = tmp_path / "unrelated"
    elsewhere.mkdir()
    status = run(user, "memory", "status", "--json", cwd=elsewhere)
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert shown["memory"] == str(state / "memory") and shown["records"] >= 4
    assert not (elsewhere / ".scriptorium").exists()


def test_nothing_under_the_state_is_open_to_group_or_others_whatever_the_umask(
    user: dict[str, str], tmp_path: Path
) -> None:
    home = Path(user["HOME"])
    assert run(user, "setup", "claude-code", "--no-writer", cwd=tmp_path).returncode == 0
    stop = hook_command(home / ".claude" / "settings.json")
    subprocess.run(
        stop, input=stop_payload(home, "s-1", tmp_path), capture_output=True, text=True, env=user, check=True
    )
    assert run(user, "token", "create", "--scope", "runtime", cwd=tmp_path).returncode == 0
    state = tmp_path / "data" / "scriptorium"
    assert (state / "sessions" / "sessions.db").is_file() and (state / "memory" / ".git").is_dir()
    assert open_to_others(state) == []
    sources = [p for p in (state / "memory" / "sources").rglob("*.md")]
    assert sources and {stat.S_IMODE(p.stat().st_mode) for p in sources} == {0o400}, "sources: read-only, the user's"


def test_an_existing_state_left_open_by_an_earlier_release_is_closed(user: dict[str, str], tmp_path: Path) -> None:
    state = tmp_path / "old-state"
    assert run(user, "memory", "init", "--state", str(state), cwd=tmp_path).returncode == 0
    os.chmod(state, 0o755)  # as an earlier release, under umask 022, made it
    assert run(user, "memory", "status", "--state", str(state), cwd=tmp_path).returncode == 0
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_setup_never_changes_the_mode_of_a_runtimes_file(user: dict[str, str], tmp_path: Path) -> None:
    home = Path(user["HOME"])
    claude_json, settings = home / ".claude.json", home / ".claude" / "settings.json"
    assert run(user, "setup", "claude-code", "--no-writer", cwd=tmp_path).returncode == 0
    assert stat.S_IMODE(claude_json.stat().st_mode) == 0o600 and "scriptorium" in claude_json.read_text()
    assert stat.S_IMODE(settings.stat().st_mode) == 0o644
    backup = claude_json.with_name(".claude.json.scriptorium-backup")
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600, "the backup keeps the original's mode"
    assert run(user, "setup", "claude-code", "--uninstall", cwd=tmp_path).returncode == 0
    assert claude_json.read_text() == '{"numStartups": 3}\n'
    assert stat.S_IMODE(claude_json.stat().st_mode) == 0o600 and stat.S_IMODE(settings.stat().st_mode) == 0o644


def test_project_scope_keeps_its_memory_out_of_the_projects_git(user: dict[str, str], tmp_path: Path) -> None:
    home = Path(user["HOME"])
    project = tmp_path / "project"
    project.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q", str(project)], check=True)
    (project / "app.py").write_text("print('hi')\n")
    subprocess.run([*git, "-C", str(project), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(project), "commit", "-qm", "app"], check=True)
    done = run(user, "setup", "claude-code", "--scope", "project", "--no-writer", cwd=project)
    assert done.returncode == 0, done.stderr
    state = project / ".scriptorium"
    assert f"memory  {state}" in done.stdout
    assert (state / ".gitignore").read_text().splitlines()[-1] == "*"
    stop = hook_command(project / ".claude" / "settings.json")
    assert stop[-2:] == ["--state", str(state)]
    subprocess.run(stop, input=stop_payload(home, "s-1", project), capture_output=True, text=True, env=user, check=True)
    assert (state / "sessions" / "sessions.db").is_file()
    porcelain = subprocess.run(
        ["git", "-C", str(project), "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True
    ).stdout.splitlines()
    assert not [line for line in porcelain if ".scriptorium/" in line], porcelain
    assert not (tmp_path / "config" / "scriptorium" / "config.json").exists(), "project scope records no user state"


def test_a_missing_memory_names_the_state_it_looked_in(user: dict[str, str], tmp_path: Path) -> None:
    out = run(user, "memory", "status", cwd=tmp_path)
    state = tmp_path / "data" / "scriptorium"
    assert out.returncode != 0 and "WORKSPACE_NOT_INITIALIZED" in out.stderr
    assert str(state) in out.stderr and f"--state {state}" in out.stderr, out.stderr
    assert not (tmp_path / ".scriptorium").exists()


def test_a_folder_that_holds_no_state_is_never_closed(user: dict[str, str], tmp_path: Path) -> None:
    """``--state .`` in a project, or ``--state ~``: the folder is the user's own business, not the memory's."""
    project = tmp_path / "project"
    project.mkdir(mode=0o755)
    os.chmod(project, 0o755)
    run(user, "memory", "status", "--state", str(project), cwd=tmp_path)
    assert stat.S_IMODE(project.stat().st_mode) == 0o755
