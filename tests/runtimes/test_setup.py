"""``scriptorium setup claude-code|codex`` on settings files that already hold other hooks and servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from scriptorium.runtimes.base import is_our_hook
from tests.helpers.edge import console
from tests.helpers.runtime_setup import (
    CLAUDE_JSON,
    CLAUDE_SETTINGS,
    CODEX_CONFIG,
    CODEX_HOOKS,
    runtimes_path,
    setup,
)

SCRIPT = Path(sys.executable).with_name("scriptorium")


def our_hooks(settings: dict[str, object]) -> dict[str, list[Any]]:
    """Our hooks by event: a command's text, or an ``mcp_tool`` hook's whole entry."""
    hooks = settings["hooks"]
    assert isinstance(hooks, dict)
    return {
        event: [
            h if h.get("type") == "mcp_tool" else h["command"]
            for g in groups
            for h in g["hooks"]
            if h.get("server") == "scriptorium" or "scriptorium" in h.get("command", "")
        ]
        for event, groups in hooks.items()
    }


def test_claude_code_user_scope_merges_then_uninstalls_to_the_original_bytes(home: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = setup(home, state, "claude-code")
    assert [c["action"] for c in first["changes"]] == ["updated", "updated"]  # type: ignore[index]
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    read_rules = ["mcp__scriptorium__memory_status", "mcp__scriptorium__memory_get", "mcp__scriptorium__memory_search"]
    hidden = ["mcp__scriptorium__hook"]  # the hooks' tool: not offered to the model
    assert settings["model"] == "opus" and settings["permissions"] == {"allow": ["Read", *read_rules], "deny": hidden}
    ours = our_hooks(settings)
    events = ["PreToolUse", "Stop", "SessionStart", "UserPromptSubmit", "SubagentStop", "PreCompact", "SessionEnd"]
    assert sorted(ours) == sorted(events) and ours["PreToolUse"] == []
    commands = ["SessionStart", "SubagentStop", "PreCompact", "SessionEnd"]
    assert all(len(ours[e]) == 1 and f"hook --state {state.resolve()}" in ours[e][0] for e in commands)
    for event in ("UserPromptSubmit", "Stop"):  # every turn's hooks: our MCP server's hook tool, no process
        (call,) = ours[event]
        assert (call["server"], call["tool"], call["input"]["session_id"]) == ("scriptorium", "hook", "${session_id}")
    assert ours["UserPromptSubmit"][0]["input"]["core"] == "first-prompt", "the opening prompt asks for the core"
    (start,) = [g for g in settings["hooks"]["SessionStart"] if our_hooks({"hooks": {"SessionStart": [g]}})]
    assert start["matcher"] == "compact", "SessionStart starts a process only to give the core after a compaction"
    stop = [h.get("command") for g in settings["hooks"]["Stop"] for h in g["hooks"]]
    assert stop[0] == "notify-done", "the user's own Stop hook stays first"
    servers = json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert set(servers) == {"github", "scriptorium"} and servers["scriptorium"]["args"][-3:-2] == ["mcp"]
    assert servers["scriptorium"]["alwaysLoad"] is True, "its tools are in the first request, not behind tool search"
    assert (state / "memory" / ".git").is_dir(), "setup creates the workspace the hooks will use"
    again = setup(home, state, "claude-code")
    assert [c["action"] for c in again["changes"]] == ["unchanged", "unchanged"]  # type: ignore[index]
    gone = setup(home, state, "claude-code", "--uninstall")
    assert [c["action"] for c in gone["changes"]] == ["restored", "restored"]  # type: ignore[index]
    assert (home / ".claude" / "settings.json").read_text() == CLAUDE_SETTINGS
    assert (home / ".claude.json").read_text() == CLAUDE_JSON
    assert sorted(p.name for p in (home / ".claude").iterdir()) == ["settings.json"], "no backup left behind"


def test_an_edit_after_setup_keeps_the_edit_and_loses_only_our_entries(home: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    setup(home, state, "claude-code")
    path = home / ".claude" / "settings.json"
    edited = json.loads(path.read_text())
    edited["theme"] = "dark"
    path.write_text(json.dumps(edited))
    gone = setup(home, state, "claude-code", "--uninstall")
    assert gone["changes"][0]["action"] == "cleaned"  # type: ignore[index]
    expected = json.loads(CLAUDE_SETTINGS)
    assert json.loads(path.read_text()) == {**expected, "theme": "dark"}


def test_claude_code_project_scope_writes_the_project_files(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    state = tmp_path / "state"
    setup(home, state, "claude-code", "--scope", "project", cwd=project)
    assert our_hooks(json.loads((project / ".claude" / "settings.json").read_text()))["SessionStart"]
    assert "scriptorium" in json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert (home / ".claude" / "settings.json").read_text() == CLAUDE_SETTINGS, "the user scope is untouched"
    gone = setup(home, state, "claude-code", "--scope", "project", "--uninstall", cwd=project)
    changes = [(Path(c["path"]).name, c["action"]) for c in gone["changes"]]  # type: ignore[attr-defined]
    assert changes == [("settings.json", "removed"), (".mcp.json", "removed"), (".claude", "removed")]
    assert sorted(p.name for p in project.rglob("*")) == [], "files and the folder setup created are gone again"


def test_codex_keeps_the_users_toml_comments_and_servers(home: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    setup(home, state, "codex")
    text = (home / ".codex" / "config.toml").read_text()
    assert text.startswith(CODEX_CONFIG.rstrip("\n")), "the user's bytes stay as they were, comments included"
    config = tomllib.loads(text)
    assert config["model"] == "gpt-5" and set(config["mcp_servers"]) == {"docs", "scriptorium"}
    assert config["mcp_servers"]["scriptorium"]["args"][-2:] == ["--state", str(state.resolve())]
    assert "XDG_RUNTIME_DIR" in config["mcp_servers"]["scriptorium"]["env_vars"], "the hooks' daemon, reachable"
    hooks = json.loads((home / ".codex" / "hooks.json").read_text())
    stop = [h for g in hooks["hooks"]["Stop"] for h in g["hooks"]]
    assert our_hooks(hooks)["Stop"] and stop[0] == {"type": "command", "command": "say done"}
    # Every turn's hooks call the MCP server's hook tool (no process per hook); the rarer ones run the command.
    assert stop[1]["type"] == "mcp_tool" and (stop[1]["server"], stop[1]["tool"]) == ("scriptorium", "hook")
    assert stop[1]["input"]["transcript_path"] == "${transcript_path}"
    prompt = our_hooks(hooks)["UserPromptSubmit"][0]
    assert prompt["type"] == "mcp_tool" and prompt["input"]["prompt"] == "${prompt}"
    assert " hook --state " in our_hooks(hooks)["SessionEnd"][0]
    assert [c["action"] for c in setup(home, state, "codex")["changes"]] == ["unchanged", "unchanged"]  # type: ignore[index]
    setup(home, state, "codex", "--uninstall")
    assert (home / ".codex" / "config.toml").read_text() == CODEX_CONFIG
    assert (home / ".codex" / "hooks.json").read_text() == CODEX_HOOKS


def test_a_broken_settings_file_is_refused_and_left_alone(home: Path, tmp_path: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.write_text("{ not json")
    env = {**os.environ, "HOME": str(home), "PATH": runtimes_path(home)}
    out = subprocess.run(
        [str(SCRIPT), "setup", "claude-code", "--state", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 3 and "INVALID_ARGUMENT" in out.stderr
    assert path.read_text() == "{ not json" and not (home / ".claude" / "settings.json.scriptorium-backup").exists()


def test_setup_with_writer_selects_the_runtime_as_writer_and_uninstall_takes_it_back(
    home: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "writer.json").write_text('{"model": "sonnet"}')
    plain = setup(home, state, "claude-code")
    assert plain["writer"] == "verbatim" and len(plain["changes"]) == 2  # type: ignore[arg-type]
    chosen = setup(home, state, "claude-code", "--writer")
    assert chosen["writer"] == "claude-code"
    assert chosen["changes"][-1] == {"path": str(state / "writer.json"), "action": "updated"}  # type: ignore[index]
    assert json.loads((state / "writer.json").read_text()) == {"model": "sonnet", "backend": "claude-code"}
    env_wins = subprocess.run(
        [str(SCRIPT), "memory", "status", "--state", str(state), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SCRIPTORIUM_WRITER": "verbatim"},
    )
    assert json.loads(env_wins.stdout)["writer"] == "verbatim", "SCRIPTORIUM_WRITER takes precedence"
    gone = setup(home, state, "claude-code", "--uninstall")
    assert gone["writer"] == "verbatim" and gone["changes"][-1]["action"] == "updated"  # type: ignore[index]
    assert json.loads((state / "writer.json").read_text()) == {"model": "sonnet"}


def test_the_writer_choice_is_taken_back_only_from_the_runtime_that_made_it(tmp_path: Path) -> None:
    from scriptorium.runtimes.setup.command import deselect_writer, select_writer
    from scriptorium.settings import Settings

    assert select_writer(tmp_path, "codex").action == "created"
    assert Settings(state=tmp_path).writer_backend() == "codex"
    assert select_writer(tmp_path, "codex").action == "unchanged"
    assert deselect_writer(tmp_path, "claude-code").action == "unchanged", "claude-code did not choose it"
    assert deselect_writer(tmp_path, "codex").action == "removed" and not (tmp_path / "writer.json").exists()
    assert Settings(state=tmp_path).writer_backend() == "verbatim"


def test_at_a_terminal_setup_asks_before_making_the_runtime_the_writer(home: Path, tmp_path: Path) -> None:
    import pty

    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "SCRIPTORIUM_WRITER")}
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [str(SCRIPT), "setup", "claude-code", "--state", str(state)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**env, "HOME": str(home), "PATH": runtimes_path(home)},
        cwd=home,
    )
    os.close(slave)
    seen = b""
    while b"[y/N]" not in seen:
        seen += os.read(master, 4096)
    assert b"on your own login" in seen
    os.write(master, b"y\n")
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.wait(60) == 0, seen.decode(errors="replace")
    assert json.loads((state / "writer.json").read_text()) == {"backend": "claude-code"}
    assert b"writer  claude-code" in seen


def test_setup_writes_a_command_that_runs_without_the_console_script_or_site(tmp_path: Path) -> None:
    """The hooks setup writes start this installation's interpreter by absolute path, without the site
    module (``-S``: the hook's fast path needs none of site-packages), whether or not ``scriptorium`` is on
    PATH; what needs more loads site itself: the full hook without a daemon, the CLI's own help."""
    from scriptorium.runtimes.setup.entries import scriptorium_command

    command = scriptorium_command()
    assert command[:3] == [sys.executable, "-S", "-c"]
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != venv_bin)
    env = {"PATH": path, "HOME": str(tmp_path), "SCRIPTORIUM_HOOK_WRITES": "inline"}
    out = subprocess.run([*command, "hook", "--help"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0 and "scriptorium hook" in out.stdout, out.stderr
    state = tmp_path / "state"
    out = subprocess.run([*command, "memory", "init", "--state", str(state)], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and (state / "memory").is_dir(), out.stderr


def test_the_command_setup_writes_reaches_the_hook_daemon_the_console_script_reaches(tmp_path: Path) -> None:
    """Without site, ``sys.prefix`` is the base interpreter's, not the venv's: the daemon's socket, named by
    the environment, must come out the same either way, or every hook would miss the daemon and load all."""
    import scriptorium

    where = str(Path(scriptorium.__file__).resolve().parent.parent)
    probe = f"import sys; sys.path.append({where!r}); from scriptorium.runtimes.hooks.client import socket_path"
    probe += f"; print(socket_path({str(tmp_path)!r}))"
    paths = {
        subprocess.run([sys.executable, *flags, "-c", probe], capture_output=True, text=True, check=True).stdout
        for flags in ([], ["-S"])
    }
    assert len(paths) == 1 and paths != {"None\n"}, paths


def setup_pi(home: Path, state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``scriptorium setup pi`` in this process, ``home`` as HOME and the working folder."""
    return console(
        ["setup", "pi", "--state", str(state), *extra], env={"HOME": str(home), "PATH": runtimes_path(home)}, cwd=home
    )


def test_setup_pi_refuses_what_it_cannot_do_and_writes_nothing(home: Path, tmp_path: Path) -> None:
    """pi takes its extension at user scope only, without --server or --trust-hooks (INVALID_ARGUMENT, no
    state made); a folder of the extension's name holding another extension is neither overwritten nor, by
    uninstall, removed."""
    state = tmp_path / "s"
    for extra in (["--scope", "project"], ["--server", "http://127.0.0.1:8765"], ["--trust-hooks", "codex"]):
        out = setup_pi(home, state, *extra)
        assert out.returncode != 0 and "INVALID_ARGUMENT" in out.stderr, (extra, out.stderr)
        assert not state.exists() and not (home / ".pi").exists(), extra

    theirs = home / ".pi" / "agent" / "extensions" / "scriptorium"
    theirs.mkdir(parents=True)
    (theirs / "index.ts").write_text("export default function () {}\n")
    for extra in ([], ["--uninstall"]):
        out = setup_pi(home, state, *extra)
        assert out.returncode != 0 and "another extension" in out.stderr, out.stderr
        assert [p.name for p in theirs.iterdir()] == ["index.ts"] and not state.exists()


def test_setup_pi_for_a_requester_wires_its_token_and_refuses_the_owners_or_none(home: Path, tmp_path: Path) -> None:
    """``--token``: a requester's token of this memory goes into the extension's wiring (0600) with its
    requester's name; an owner's token, a token that is not one, or ``--token`` for a runtime wired by
    settings files is refused before anything is installed."""
    state = tmp_path / "s"
    subprocess.run([str(SCRIPT), "memory", "init", "--state", str(state)], check=True, capture_output=True)
    made = subprocess.run(
        [str(SCRIPT), "token", "create", "--scope", "propose", "--requester", "bob", "--state", str(state)],
        check=True,
        capture_output=True,
        text=True,
    )
    token = made.stdout.split()[-1]
    from scriptorium.access.owner import owner_token

    owner = owner_token(state)[0]
    for bad, reason in ((owner, "not the owner's"), ("not-a-token", "FORBIDDEN")):
        out = setup_pi(home, state, "--token", bad)
        assert out.returncode != 0 and reason in out.stderr, out.stderr
        assert not (home / ".pi").exists()
    claude_files = (home / ".claude" / "settings.json").read_bytes(), (home / ".claude.json").read_bytes()
    claude = subprocess.run(
        [str(SCRIPT), "setup", "claude-code", "--state", str(state), "--token", token],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home), "PATH": runtimes_path(home)},
        cwd=home,
    )
    assert claude.returncode != 0 and "INVALID_ARGUMENT" in claude.stderr
    assert ((home / ".claude" / "settings.json").read_bytes(), (home / ".claude.json").read_bytes()) == claude_files
    assert setup_pi(home, state, "--token", token).returncode == 0
    wiring = home / ".pi" / "agent" / "extensions" / "scriptorium" / "scriptorium.json"
    assert json.loads(wiring.read_text())["requester"] == {"name": "bob", "token": token}
    assert wiring.stat().st_mode & 0o077 == 0


READ_TOOLS = ["memory_status", "memory_get", "memory_search"]
UPDATE_TOOLS = ["memory_update", "memory_remember"]


def test_the_tools_setup_lets_run_unasked_are_the_servers_read_tools() -> None:
    from scriptorium.runtimes.base import READ_TOOLS as read
    from scriptorium.runtimes.base import UPDATE_TOOLS as update
    from scriptorium.runtimes.mcp.server import ANNOTATIONS
    from scriptorium.runtimes.mcp.tools import tool_definitions

    names = [d["function"]["name"] for d in tool_definitions()]
    assert sorted([*read, *update]) == sorted(names) and list(read) == READ_TOOLS
    assert all(ANNOTATIONS[n].read_only_hint for n in read) and not any(ANNOTATIONS[n].read_only_hint for n in update)


@pytest.mark.parametrize("updates", [False, True])
def test_claude_code_headless_may_call_the_read_tools_and_updates_only_when_allowed(
    home: Path, tmp_path: Path, updates: bool
) -> None:
    state = tmp_path / "state"
    setup(home, state, "claude-code", *(["--allow-updates"] if updates else []))
    allow = json.loads((home / ".claude" / "settings.json").read_text())["permissions"]["allow"]
    ours = [rule.removeprefix("mcp__scriptorium__") for rule in allow if rule.startswith("mcp__scriptorium__")]
    assert allow[0] == "Read" and ours == READ_TOOLS + (UPDATE_TOOLS if updates else [])
    setup(home, state, "claude-code")  # run again without: the update rule goes, nothing doubles
    allow = json.loads((home / ".claude" / "settings.json").read_text())["permissions"]["allow"]
    assert allow == ["Read", *(f"mcp__scriptorium__{tool}" for tool in READ_TOOLS)]


@pytest.mark.parametrize("updates", [False, True])
def test_codex_headless_may_call_the_read_tools_and_updates_only_when_allowed(
    home: Path, tmp_path: Path, updates: bool
) -> None:
    setup(home, tmp_path / "state", "codex", *(["--allow-updates"] if updates else []))
    server = tomllib.loads((home / ".codex" / "config.toml").read_text())["mcp_servers"]["scriptorium"]
    approved = [tool for tool, conf in server["tools"].items() if conf == {"approval_mode": "approve"}]
    assert approved == READ_TOOLS + (UPDATE_TOOLS if updates else [])


CODEX_LAYOUTS = {
    "dotted keys": 'model = "gpt-5"\nmcp_servers.other.command = "o"\nmcp_servers.other.args = ["a", "b"]\n\n'
    '[profiles.fast]\nmodel = "m"\n',
    "a [mcp_servers] table": '[mcp_servers]\nother.command = "o"\nother.args = ["a", "b"]\n',
    "an inline table": 'mcp_servers = { other = { command = "o", args = ["a", "b"] } }\n',
}


@pytest.mark.parametrize("layout", sorted(CODEX_LAYOUTS))
def test_codex_servers_written_in_any_layout_keep_every_key(home: Path, tmp_path: Path, layout: str) -> None:
    """A server written as dotted keys lost its args after setup: every layout now keeps the user's servers
    exactly as Codex reads them, through setup, a second setup and uninstall."""
    config = home / ".codex" / "config.toml"
    config.write_text(CODEX_LAYOUTS[layout])
    setup(home, tmp_path / "state", "codex")
    read = tomllib.loads(config.read_text())
    assert read["mcp_servers"]["other"] == {"command": "o", "args": ["a", "b"]}
    assert read["mcp_servers"]["scriptorium"]["args"][-3] == "mcp"
    assert {k: v for k, v in read.items() if k != "mcp_servers"} == {
        k: v for k, v in tomllib.loads(CODEX_LAYOUTS[layout]).items() if k != "mcp_servers"
    }
    again = setup(home, tmp_path / "state", "codex")
    assert [c["action"] for c in again["changes"]] == ["unchanged", "unchanged"]  # type: ignore[index]
    config.write_text(config.read_text() + "\n# the user's own note\n")  # edited since: only ours comes out
    setup(home, tmp_path / "state", "codex", "--uninstall")
    assert tomllib.loads(config.read_text()) == tomllib.loads(CODEX_LAYOUTS[layout])


def test_codex_hook_timeouts_are_within_what_codex_grants(home: Path, tmp_path: Path) -> None:
    """Codex clamps a SessionEnd hook's timeout to 3 s and warns on every run when asked for more."""
    setup(home, tmp_path / "state", "codex")
    hooks = json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]
    timeouts = {
        event: [h["timeout"] for g in groups for h in g["hooks"] if is_our_hook(h)] for event, groups in hooks.items()
    }
    assert timeouts["SessionEnd"] == [3] and timeouts["Stop"] == [60]


def test_codex_uninstall_takes_back_the_trust_codex_recorded_for_our_hooks_only(home: Path, tmp_path: Path) -> None:
    """Codex records trust per hook position (``[hooks.state."<hooks.json>:<event>:<group>:<hook>"]``); a trust
    left behind would let a later setup's hooks run without Codex asking again."""
    setup(home, tmp_path / "state", "codex")
    hooks_file = (home / ".codex" / "hooks.json").resolve()
    hooks = json.loads(hooks_file.read_text())["hooks"]
    ours = [
        f"{hooks_file}:{''.join('_' + c.lower() if c.isupper() else c for c in event).lstrip('_')}:{g}:{h}"
        for event, groups in hooks.items()
        for g, group in enumerate(groups)
        for h, hook in enumerate(group["hooks"])
        if is_our_hook(hook)
    ]
    assert len(ours) == 6 and f"{hooks_file}:stop:1:0" in ours, "the user's own Stop hook is group 0"
    users = f"{hooks_file}:stop:0:0"
    config = home / ".codex" / "config.toml"
    trust = "".join(f'\n[hooks.state."{key}"]\ntrusted_hash = "sha256:{n}"\n' for n, key in enumerate([users, *ours]))
    config.write_text(config.read_text() + trust)  # what the TUI writes once the user trusts the hooks
    setup(home, tmp_path / "state", "codex", "--uninstall")
    left = tomllib.loads(config.read_text())
    assert left["hooks"]["state"] == {users: {"trusted_hash": "sha256:0"}}
    assert "scriptorium" not in left.get("mcp_servers", {}) and left["mcp_servers"]["docs"]["command"] == "docs-mcp"


def test_setup_over_an_earlier_one_gives_its_session_start_the_compact_matcher(home: Path, tmp_path: Path) -> None:
    """Setups before the opening prompt carried the core ran SessionStart for every source; run again, ours
    is changed in place (the user's hooks around it as they were) and then stays as it is."""
    state = tmp_path / "state"
    setup(home, state, "claude-code")
    path = home / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    (ours,) = [g for g in settings["hooks"]["SessionStart"] if "matcher" in g]
    del ours["matcher"]
    settings["hooks"]["SessionStart"].append({"hooks": [{"type": "command", "command": "echo later"}]})
    path.write_text(json.dumps(settings))
    setup(home, state, "claude-code")
    groups = json.loads(path.read_text())["hooks"]["SessionStart"]
    assert [g.get("matcher") for g in groups][-2:] == ["compact", None], "ours in place, the user's after it"
    assert setup(home, state, "claude-code")["changes"][0]["action"] == "unchanged"  # type: ignore[index]
