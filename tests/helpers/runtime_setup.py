"""``scriptorium setup`` as the tests run it (in this process, HOME its own folder), and a home whose runtimes hold
settings of their own that setup must keep."""

from __future__ import annotations

import json
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


def setup(home: Path, state: Path, *args: str, cwd: Path | None = None) -> dict[str, object]:
    """``scriptorium setup ARGS --state STATE --json`` in this process, ``home`` as HOME (and no CODEX_HOME), in
    ``cwd`` (default ``home``): its JSON answer (asserting it succeeded)."""
    out = console(
        ["setup", *args, "--state", str(state), "--json"],
        env={"HOME": str(home)},
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
