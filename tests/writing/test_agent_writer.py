"""Claude Code and Codex as writer backends, against stand-in executables first on PATH.

The stand-ins honour the documented headless argv and output formats and edit their working folder as a
model with file tools would; each run records the argv, working directory, environment and stdin it got.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from scriptorium.errors import ReasonCode
from scriptorium.sessions import SessionStore
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.staging import STAGING_PREFIX
from scriptorium.workspace.writer_history import WriterHistory
from scriptorium.writers.agent import COMMON_ENV, agent_writer
from scriptorium.writers.agent_cli import AgentConfig
from scriptorium.writing.outcomes import Failed, Pending, Written
from scriptorium.writing.service import WriteService, WriteSettings
from tests.agent_fixtures import StandIns, standins
from tests.conftest import tree_bytes
from tests.sessions_fixtures import chain

__all__ = ["standins"]  # the fixture; sessions and ws are the conftests'

PERSONA = {"claude-code": "claude", "codex": "codex"}


def service(ws: MemoryWorkspace, store: SessionStore, backend: str, **config: Any) -> WriteService:
    settings = AgentConfig(**{"model": "writer-model-1", "timeout_s": 20.0, "max_turns": 12, **config})
    writer, organizer = agent_writer(backend, lambda: settings)
    return WriteService(ws, store, writer, organizer, WriteSettings(trigger_tokens=0, organize_batches=99))


def cited(ws: MemoryWorkspace, path: str) -> list[list[str]]:
    """The archive paths each record of the installed topic cites (parsed, in record order)."""
    topic = ws.snapshot().topics[path]
    return [topic.cited_paths(record) for record in topic.records]


def marked(ws: MemoryWorkspace, store: SessionStore) -> list[bool]:
    return [store.get_node("s1", n).written_for(ws.key) for n in ("u1", "a1", "u2", "a2")]  # type: ignore[union-attr]


def expected_env(backend: str) -> dict[str, str]:
    own = {"claude-code": ("ANTHROPIC_API_KEY",), "codex": ("CODEX_HOME", "OPENAI_API_KEY")}[backend]
    env = {name: os.environ[name] for name in (*COMMON_ENV, *own) if name in os.environ}
    if backend == "claude-code":
        env |= {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
    return env | {"SCRIPTORIUM_WRITER_RUN": "1"}


def expected_argv(backend: str, bins: StandIns, cwd: str, system: str) -> list[str]:
    if backend == "claude-code":
        return [
            str(bins.bin / "claude"),
            "-p",
            "--output-format",
            "json",
            "--model",
            "writer-model-1",
            "--max-turns",
            "12",
            "--tools",
            "Read,Write,Edit,Glob",
            "--allowedTools",
            f"Read(/{cwd}/**),Edit(/{cwd}/topics/**)",
            "--permission-mode",
            "dontAsk",
            "--strict-mcp-config",
            "--settings",
            '{"disableAllHooks":true}',
            "--no-session-persistence",
            "--append-system-prompt",
            system,
        ]
    return [
        str(bins.bin / "codex"),
        "-c",
        'approval_policy="never"',
        "-c",
        "sandbox_workspace_write.network_access=false",
        "-c",
        "sandbox_workspace_write.exclude_slash_tmp=true",
        "-c",
        "sandbox_workspace_write.exclude_tmpdir_env_var=true",
        "-c",
        'web_search="disabled"',
        "exec",
        "--json",
        "--color",
        "never",
        "--ephemeral",
        "--skip-git-repo-check",
        "--ignore-user-config",
        "--ignore-rules",
        "--sandbox",
        "workspace-write",
        "--cd",
        cwd,
        "--model",
        "writer-model-1",
        "-",
    ]


@pytest.mark.parametrize("backend", ["claude-code", "codex"])
def test_the_agent_edits_the_staging_folder_and_its_edit_is_installed(
    backend: str, ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns
) -> None:
    persona = PERSONA[backend]
    standins.scenario(persona, "valid")
    outcome = service(ws, sessions, backend).write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.records_created == 4, outcome
    assert cited(ws, "topics/agent/s1.md") == [[f"sources/test/64/s1/{n}.md"] for n in ("u1", "a1", "u2", "a2")]
    assert all(marked(ws, sessions))
    (call,) = standins.calls(persona)
    cwd = Path(call["cwd"])
    assert cwd.name.startswith(f"{STAGING_PREFIX}{ws.id}-{os.getpid()}-") and not cwd.exists()
    system = call["argv"][-1] if backend == "claude-code" else ""
    assert call["argv"] == expected_argv(backend, standins, str(cwd), system)
    assert call["env"] == expected_env(backend), "exactly the login's and locale's variables, and the marker"
    assert "sk-owner-secret" not in str(call["env"]) and "PGPASSWORD" not in call["env"]
    prompt = call["stdin"] if backend == "codex" else system + call["stdin"]
    assert "never in `topics/core.md`" in prompt and "Edit files under\n  `topics/` only" in prompt
    assert "[test/s1/u1] user at" in call["stdin"] and "commit_edits" not in prompt
    (entry,) = WriterHistory(ws.root / ".scriptorium").recent(1)
    assert entry["writer"] == backend and entry["outcome"] == "written"


def test_the_agent_sees_existing_topics_as_files_and_extends_them(
    ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns
) -> None:
    standins.scenario("claude", "valid")
    pass_ = service(ws, sessions, "claude-code")
    first = pass_.write("s1", force=True)
    assert isinstance(first, Written)
    before = (ws.root / "topics/agent/s1.md").read_text()
    ids = re.findall(r"\^m-[0-9a-z]+", before)
    sessions.add_nodes(chain("s1", ["u3", "a3"], parent="a2"), head="a3")
    second = pass_.write("s1", force=True)
    assert isinstance(second, Written) and second.records_created == 2
    after = (ws.root / "topics/agent/s1.md").read_text()
    assert all(line in after.splitlines() for line in before.splitlines()), "every installed line kept"
    assert len(ids) == 4 and all(i in after for i in ids)
    assert "(test/s1/u3)" not in after and "sources/test/64/s1.md#source-u3" in after


@pytest.mark.parametrize(
    ("first", "reason", "telltale"),
    [
        ("uncited", "INVALID_TOPIC_FORMAT", "A claim with no citation"),
        ("outside", "INVALID_PATH", "notes.md"),
        ("touch_source", "SOURCES_MODIFIED", "sources/test/64/s1.md"),
        ("denied", "INVALID_PATH", "Edit /etc/hosts"),
    ],
)
def test_a_rejected_edit_gets_one_repair_run_with_the_rules_guidance(
    first: str, reason: str, telltale: str, ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns
) -> None:
    standins.scenario("claude", first, "valid")
    outcome = service(ws, sessions, "claude-code").write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.records_created == 4
    calls = standins.calls("claude")
    assert len(calls) == 2 and calls[0]["cwd"] != calls[1]["cwd"], "the repair stages afresh"
    repair = calls[1]["stdin"]
    assert "previous edit was rejected" in repair and reason in repair and telltale in repair
    assert not (ws.root / "notes.md").exists() and not (ws.root / "topics/agent/uncited.md").exists()
    assert all(marked(ws, sessions))


@pytest.mark.parametrize("step", ["uncited", "outside"])
def test_a_second_rejection_is_commit_rejected_and_changes_nothing(
    step: str, ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns
) -> None:
    standins.scenario("codex", step)
    before, revision = tree_bytes(ws.root), ws.revision
    outcome = service(ws, sessions, "codex").write("s1", force=True)
    assert isinstance(outcome, Failed) and outcome.reason == ReasonCode.COMMIT_REJECTED and not outcome.retryable
    assert len(standins.calls("codex")) == 2
    assert ws.revision == revision and not any(marked(ws, sessions))
    assert {p: b for p, b in tree_bytes(ws.root).items() if not p.startswith("sources/")} == {
        p: b for p, b in before.items() if not p.startswith("sources/")
    }, "topics and views keep every byte (the batch's sources are archived before the writer runs)"


@pytest.mark.parametrize("backend", ["claude-code", "codex"])
def test_a_hung_agent_is_killed_at_the_timeout_and_the_turns_stay_pending(
    backend: str, ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns
) -> None:
    persona = PERSONA[backend]
    standins.scenario(persona, "hang")
    outcome = service(ws, sessions, backend, timeout_s=1.5).write("s1", force=True)
    assert isinstance(outcome, Pending) and outcome.reason == ReasonCode.WRITER_TIMEOUT and outcome.retryable
    assert outcome.pending_nodes == 4 and not any(marked(ws, sessions))
    (call,) = standins.calls(persona)
    assert not Path(call["cwd"]).exists(), "its staging folder is removed"
    assert not _running(persona, standins), "the agent's process group was killed"


def _running(persona: str, bins: StandIns) -> bool:
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if str(bins.bin / persona).encode() in cmdline:
            return True
    return False


@pytest.mark.parametrize(
    ("backend", "step", "reason", "message"),
    [
        ("claude-code", "crash", ReasonCode.WRITER_FAILED, "exit status 3"),
        ("codex", "crash", ReasonCode.WRITER_FAILED, "stand-in crashed"),
        ("claude-code", "garbage", ReasonCode.WRITER_FAILED, "gave no JSON result"),
        ("codex", "garbage", ReasonCode.WRITER_FAILED, "gave no JSON events"),
        ("claude-code", "max_turns", ReasonCode.WRITER_FAILED, "turn limit (12)"),
        ("claude-code", "logged_out", ReasonCode.WRITER_START_FAILED, "not logged in"),
        ("codex", "logged_out", ReasonCode.WRITER_START_FAILED, "not logged in"),
        ("claude-code", "overloaded", ReasonCode.MODEL_UNREACHABLE, "overloaded_error"),
        ("codex", "overloaded", ReasonCode.MODEL_UNREACHABLE, "429 Too Many Requests"),
        ("claude-code", "old", ReasonCode.WRITER_START_FAILED, "lacks --tools"),
        ("codex", "old", ReasonCode.WRITER_START_FAILED, "lacks --ephemeral"),
    ],
)
def test_agent_failures_map_to_the_closed_reason_codes(
    backend: str,
    step: str,
    reason: ReasonCode,
    message: str,
    ws: MemoryWorkspace,
    sessions: SessionStore,
    standins: StandIns,
) -> None:
    standins.scenario(PERSONA[backend], step)
    before = tree_bytes(ws.root)
    outcome = service(ws, sessions, backend).write("s1", force=True)
    assert isinstance(outcome, Pending | Failed) and outcome.reason == reason, outcome
    assert message in outcome.message
    assert outcome.retryable == (reason in (ReasonCode.WRITER_START_FAILED, ReasonCode.MODEL_UNREACHABLE))
    assert not any(marked(ws, sessions))
    assert {p for p in tree_bytes(ws.root) if not p.startswith("sources/")} == {
        p for p in before if not p.startswith("sources/")
    }


def test_an_agent_that_is_not_installed_is_a_start_failure_with_guidance(
    ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns
) -> None:
    outcome = service(ws, sessions, "claude-code", command="claude-not-here").write("s1", force=True)
    assert isinstance(outcome, Pending) and outcome.reason == ReasonCode.WRITER_START_FAILED
    assert "not installed or not on PATH" in outcome.message
    assert standins.calls("claude") == []


@pytest.mark.parametrize("backend", ["claude-code", "codex"])
def test_the_organizer_works_on_a_copy_of_the_topics_without_sources(
    backend: str, ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns
) -> None:
    persona = PERSONA[backend]
    standins.scenario(persona, "valid", "organize")
    pass_ = service(ws, sessions, backend)
    assert isinstance(pass_.write("s1", force=True), Written)
    ids = sorted(re.findall(r"\^m-[0-9a-z]+", (ws.root / "topics/agent/s1.md").read_text()))
    outcome = pass_.reorganize()
    assert isinstance(outcome, Written) and outcome.organized
    assert not (ws.root / "topics/agent/s1.md").exists()
    moved = (ws.root / "topics/organized/agent/s1.md").read_text()
    assert sorted(re.findall(r"\^m-[0-9a-z]+", moved)) == ids
    assert sorted(cited(ws, "topics/organized/agent/s1.md")) == sorted(
        [f"sources/test/64/s1/{n}.md"] for n in ("u1", "a1", "u2", "a2")
    ), "each record keeps its citation through the move"
    organize = standins.calls(persona)[1]
    folder = Path(organize["cwd"])
    assert folder.name.startswith(f"{STAGING_PREFIX}organizer-{os.getpid()}-") and not folder.exists()
    assert "You organize" in (organize["argv"][-1] if backend == "claude-code" else organize["stdin"])


def test_an_organizer_that_writes_beside_the_topics_changes_nothing(
    ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns
) -> None:
    standins.scenario("claude", "valid", "outside")
    pass_ = service(ws, sessions, "claude-code")
    assert isinstance(pass_.write("s1", force=True), Written)
    before, revision = tree_bytes(ws.root), ws.revision
    outcome = pass_.reorganize()
    assert isinstance(outcome, Failed) and outcome.reason == ReasonCode.INVALID_PATH
    assert "notes.md" in outcome.message
    assert ws.revision == revision and tree_bytes(ws.root) == before


def test_a_run_that_finds_nothing_worth_keeping_archives_the_turns_and_marks_them(
    ws: MemoryWorkspace, sessions: SessionStore, standins: StandIns
) -> None:
    standins.scenario("claude", "nothing")
    outcome = service(ws, sessions, "claude-code").write("s1", force=True)
    assert isinstance(outcome, Written) and outcome.records_created == 0 and outcome.sources_archived == 4
    assert all(marked(ws, sessions)) and ws.snapshot().topics == {}


def test_the_codex_writer_keeps_the_users_model_provider_and_nothing_else_of_its_config(tmp_path: Path) -> None:
    """`--ignore-user-config` drops the user's MCP servers, hooks and instructions; the provider their login
    goes to is passed on as `-c` settings, however config.toml spells it, with the variable of its key."""
    from scriptorium.writers.agent import agent_env
    from scriptorium.writers.agent_cli import CODEX, AgentConfig

    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "local-7b"\n'
        'model_provider = "lab"\n'
        'model_providers.lab.name = "Lab"\n'  # dotted keys, as some users write them
        'model_providers.lab.base_url = "http://127.0.0.1:9/v1"\n'
        'model_providers.lab.http_headers = { X-Team = "memory" }\n'
        'model_providers.lab.env_key = "LAB_KEY"\n'
        "[mcp_servers.other]\n"
        'command = "other-server"\n'
    )
    environ = {"CODEX_HOME": str(home), "LAB_KEY": "k", "PATH": "/usr/bin"}
    provider = CODEX.user_provider(environ)
    assert provider.overrides == (
        'model_provider="lab"',
        'model_providers.lab.name="Lab"',
        'model_providers.lab.base_url="http://127.0.0.1:9/v1"',
        'model_providers.lab.http_headers={"X-Team" = "memory"}',
        'model_providers.lab.env_key="LAB_KEY"',
        'model="local-7b"',
    )
    assert agent_env(CODEX, AgentConfig(), environ, extra=provider.env)["LAB_KEY"] == "k"
    argv = CODEX.argv("codex", AgentConfig(), tmp_path, "system", provider)
    assert argv[argv.index("exec") :].count("-c") == 0, "every setting comes before the subcommand"
    assert 'model_provider="lab"' in argv and "other-server" not in " ".join(argv)
    (home / "config.toml").write_text('model_provider = "ollama"\nmodel = "qwen"\n')  # built in: no table
    assert CODEX.user_provider(environ).overrides == ('model_provider="ollama"', 'model="qwen"')
    (home / "config.toml").write_text(
        'model_provider = "lab"\n[model_providers.lab]\nbase_url = "http://x"\nenv_key = "SCRIPTORIUM_TOKEN"\n'
    )
    assert CODEX.user_provider(environ).env == (), "Scriptorium's own tokens never reach the agent"
    (home / "config.toml").write_text("model_provider = [broken")
    assert CODEX.user_provider(environ).overrides == ()
    assert CODEX.user_provider({"HOME": str(tmp_path / "nobody")}).overrides == ()
