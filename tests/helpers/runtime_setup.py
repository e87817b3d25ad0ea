"""``scriptorium setup`` as the tests run it (in this process, HOME its own folder, stand-ins for the runtimes on
PATH), and a home whose runtimes hold settings of their own that setup must keep."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from tests.helpers.edge import console

CLAUDE_SETTINGS = """{
    "model": "opus",
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit-bash"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-done", "timeout": 3}]}]
    },
    "permissions": {"allow": ["Read"]}
}
"""


CLAUDE_JSON = '{"numStartups": 7, "mcpServers": {"github": {"command": "gh-mcp", "args": []}}}\n'


CODEX_CONFIG = """# my Codex settings
model = "gpt-5"

[mcp_servers.docs]  # the docs server
command = "docs-mcp"
args = ["--port", "9"]
"""


CODEX_HOOKS = '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}'


ANSWERS = {
    "claude": "2.1.332 (Claude Code)",
    "codex": "codex-cli 0.171.0",
    "pi": "0.73.1",
    "openclaw": "OpenClaw 2026.9.6 (eb377ac)",
}
"""What the pinned releases (tests/runtimes/clis, tests/runtimes/openclaw) answer to ``--version``."""


def stand_in_runtimes(folder: Path, answers: Mapping[str, str] | None = None, script: str = "") -> Path:
    """``folder`` holding a stand-in executable per runtime command that prints its ``--version`` answer
    (``answers``, default the pinned releases' :data:`ANSWERS`) and exits 0; ``script``: shell lines each runs
    first (a ``sleep`` for a hung one). Setup asks nothing else of them."""
    folder.mkdir(parents=True, exist_ok=True)
    for command, answer in {**ANSWERS, **(answers or {})}.items():
        path = folder / command
        path.write_text(f"#!/bin/sh\n{script}\necho '{answer}'\n")
        path.chmod(0o755)
    return folder


def on_path(folder: Path, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default this process's environment) with ``folder`` first on its PATH."""
    base = dict(os.environ if env is None else env)
    return {**base, "PATH": f"{folder}{os.pathsep}{base.get('PATH', '')}"}


def runtimes_path(home: Path) -> str:
    """PATH with stand-ins of the pinned runtimes first (in a folder beside ``home``)."""
    return on_path(stand_in_runtimes(home.parent / "runtime-bin"))["PATH"]


def setup(home: Path, state: Path, *args: str, cwd: Path | None = None) -> dict[str, object]:
    """``scriptorium setup ARGS --state STATE --json`` in this process, ``home`` as HOME (and no CODEX_HOME), the
    pinned runtimes' stand-ins on PATH, in ``cwd`` (default ``home``): its JSON answer (asserting it succeeded)."""
    out = console(
        ["setup", *args, "--state", str(state), "--json"],
        env={"HOME": str(home), "PATH": runtimes_path(home)},
        unset=("CODEX_HOME",),
        cwd=cwd or home,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def make_home(tmp_path: Path) -> Path:
    """``tmp_path/home`` with Claude Code's and Codex's own settings, hooks and MCP servers in it."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(CLAUDE_SETTINGS)
    (home / ".claude.json").write_text(CLAUDE_JSON)
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(CODEX_CONFIG)
    (home / ".codex" / "hooks.json").write_text(CODEX_HOOKS)
    return home
