"""The two agent CLIs' headless interfaces: how to call Claude Code and Codex, and how to read what they say.

One adapter per runtime (its argv, the environment its login reads, its output format, its failure
words), kept apart from running them as writers (:mod:`scriptorium.writers.agent`). The argv follows the
runtimes' own references: Claude Code's CLI reference (``claude -p``), and ``codex-rs/exec`` (``codex
exec``). A release is checked against ``required_flags`` before its first run.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from scriptorium.errors import InvalidPath, ReasonCode, ScriptoriumError, WriterFailed, WriterUnavailable

TRANSIENT_FAILURE = re.compile(
    r"overloaded|rate.?limit|too many requests|status:? (429|5\d\d)|api error: (429|5\d\d)|timed out"
    r"|connection (error|refused|reset)|econnreset|enotfound|stream disconnected",
    re.I,
)
"""What the agents print when their model is out of reach for now: retrying the batch later can help."""


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """How to run the agent (``memory.writer.*``), read on every pass."""

    command: str = ""
    """The executable (a name on ``PATH`` or a path); empty: the backend's own (``claude``, ``codex``)."""
    model: str = ""
    """The writer model; empty: the agent's own default."""
    timeout_s: float = 300.0
    max_turns: int = 30
    pass_env: tuple[str, ...] = ()
    """More variable names the agent may see (``SCRIPTORIUM_WRITER_AGENT_ENV``)."""


ConfigSource = Callable[[], AgentConfig]


@dataclass(frozen=True, slots=True)
class AgentReport:
    """What one headless run said about itself."""

    text: str
    turns: int | None = None
    cost_usd: float | None = None
    tokens: int | None = None
    """The tokens it reported (:meth:`Backend.tokens`); None when it reported none."""


@dataclass(frozen=True, slots=True)
class UserProvider:
    """What a run keeps of the user's own agent configuration, which it otherwise ignores: the model
    provider the user's login goes to (a custom endpoint, a proxy, a local model)."""

    overrides: tuple[str, ...] = ()
    """``key=value`` settings (TOML values) that name it."""
    env: tuple[str, ...] = ()
    """Variables it reads its key from."""


@dataclass(frozen=True, slots=True)
class Backend:
    """One agent CLI: how to call it headless, which environment it reads, how to read its output."""

    name: str
    default_command: str
    env: tuple[str, ...]
    """Variables of its own login and configuration, passed through when set."""
    required_flags: tuple[str, ...]
    """Flags the help text must list: an older release that lacks one is refused before it runs."""
    help_args: tuple[str, ...]
    supported: str
    """The release range, for the refusal's guidance."""
    install_hint: str
    login_hint: str
    login_failure: re.Pattern[str]
    fixed_env: Mapping[str, str] = field(default_factory=dict)

    def argv(
        self, executable: str, config: AgentConfig, workdir: Path, system: str, provider: UserProvider | None = None
    ) -> list[str]:
        raise NotImplementedError

    def user_provider(self, environ: Mapping[str, str]) -> UserProvider:
        """The model provider of the user's own configuration that the run keeps (none: the agent's default)."""
        return UserProvider()

    def stdin(self, system: str, user: str) -> str:
        raise NotImplementedError

    def parse(self, stdout: str, config: AgentConfig) -> AgentReport:
        """The run's report; raises WriterFailed (or WriterUnavailable for a login failure)."""
        raise NotImplementedError

    def tokens(self, stdout: str) -> int | None:
        """The tokens a run's output reports its model used, read whether or not the run succeeded (a failed
        run costs too); None when it reports none."""
        raise NotImplementedError

    def failure(self, message: str) -> ScriptoriumError:
        """A failed run: not logged in → ``WRITER_START_FAILED``, the model overloaded or unreachable →
        ``MODEL_UNREACHABLE`` (both retryable), anything else ``WRITER_FAILED``."""
        if self.login_failure.search(message):
            return WriterUnavailable(
                f"{self.name} is not logged in: {_tail(message)}",
                reason=ReasonCode.WRITER_START_FAILED,
                guidance=self.login_hint,
            )
        if TRANSIENT_FAILURE.search(message):
            return WriterUnavailable(
                f"{self.name} could not reach its model: {_tail(message)}", reason=ReasonCode.MODEL_UNREACHABLE
            )
        return WriterFailed(f"{self.name} failed: {_tail(message)}")


_KEY = re.compile(r"[A-Za-z0-9_-]+")
"""A TOML bare key: a provider's name or one of its settings, as a ``-c`` dotted path can hold it."""


def _toml(value: object) -> str | None:
    """``value`` as a TOML value (a ``-c`` override's right-hand side); None for what a provider never holds."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, dict):
        pairs = [(json.dumps(str(k)), _toml(v)) for k, v in value.items()]
        if any(encoded is None for _, encoded in pairs):
            return None
        return "{" + ", ".join(f"{k} = {v}" for k, v in pairs) + "}"
    return None


def _tail(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else "…" + text[-limit:]


class ClaudeCode(Backend):
    """``claude -p`` with JSON output: one ``{"type": "result", …}`` object on stdout."""

    TOOLS = "Read,Write,Edit,Glob"
    SETTINGS = json.dumps({"disableAllHooks": True}, separators=(",", ":"))

    @staticmethod
    def allowed(workdir: Path) -> str:
        """Reads under the folder, edits under its ``topics/``: path rules exist for Read and Edit only (Edit's
        cover Write), and absolute ones (``//…``) match the absolute paths the tools use."""
        root = workdir.resolve().as_posix()
        return f"Read(/{root}/**),Edit(/{root}/topics/**)"

    def argv(
        self, executable: str, config: AgentConfig, workdir: Path, system: str, provider: UserProvider | None = None
    ) -> list[str]:
        argv = [executable, "-p", "--output-format", "json"]
        if config.model:
            argv += ["--model", config.model]
        return [
            *argv,
            "--max-turns",
            str(config.max_turns),
            "--tools",
            self.TOOLS,
            "--allowedTools",
            self.allowed(workdir),
            "--permission-mode",
            "dontAsk",
            "--strict-mcp-config",
            "--settings",
            self.SETTINGS,
            "--no-session-persistence",
            "--append-system-prompt",
            system,
        ]

    def stdin(self, system: str, user: str) -> str:
        return user  # the system prompt went in --append-system-prompt

    def parse(self, stdout: str, config: AgentConfig) -> AgentReport:
        result = _last_json(stdout)
        if not isinstance(result, dict) or result.get("type") != "result":
            raise WriterFailed(f"{self.name} gave no JSON result: {_tail(stdout) or '(no output)'}")
        text = str(result.get("result") or "")
        subtype = str(result.get("subtype") or "")
        if subtype == "error_max_turns":
            raise WriterFailed(f"{self.name} stopped at its turn limit ({config.max_turns}) before finishing")
        if result.get("is_error") or subtype != "success":
            raise self.failure(f"{subtype or 'error'}: {text}")
        denied = result.get("permission_denials")
        if isinstance(denied, list) and denied:  # it reached for something outside its folder's topics/
            asked = "; ".join(_denial(d) for d in denied[:5])
            raise InvalidPath(
                f"the agent asked for what it may not do: {asked}",
                path=asked,
                guidance="Read files in the working folder and edit files under topics/ only; nothing else.",
            )
        turns = result.get("num_turns")
        cost = result.get("total_cost_usd")
        return AgentReport(
            text,
            turns if isinstance(turns, int) else None,
            float(cost) if isinstance(cost, int | float) else None,
            self.tokens(stdout),
        )

    USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    """The result's ``usage``: input not cached, written to the cache, read from it, and output — all four
    are tokens the model processed (the cached reads are most of an agent's, each turn reading the context)."""

    def tokens(self, stdout: str) -> int | None:
        result = _last_json(stdout)
        usage = result.get("usage") if isinstance(result, dict) else None
        return _sum_usage(usage, self.USAGE_KEYS)


class Codex(Backend):
    """``codex exec --json``: JSON Lines events (``thread.started`` … ``turn.completed`` | ``turn.failed``)."""

    def user_provider(self, environ: Mapping[str, str]) -> UserProvider:
        """The ``model_provider`` of ``$CODEX_HOME/config.toml`` (default ``~/.codex``) and its
        ``[model_providers.<name>]`` table, with the user's ``model``: ``--ignore-user-config`` leaves the
        rest of that file (MCP servers, hooks, instructions) out of the writer's run, and would leave the
        provider out too."""
        home = environ.get("CODEX_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".codex")
        try:
            with open(Path(home) / "config.toml", "rb") as handle:
                found = tomllib.load(handle)
        except (OSError, tomllib.TOMLDecodeError):
            return UserProvider()  # none, or not one we can read: the agent's own default provider
        name, providers = found.get("model_provider"), found.get("model_providers")
        if not isinstance(name, str) or not _KEY.fullmatch(name):
            return UserProvider()  # the default provider
        overrides, env = [f"model_provider={_toml(name)}"], []
        table = providers.get(name) if isinstance(providers, dict) else None
        if isinstance(table, dict):  # a provider of the user's own (a built-in one, such as ollama, has none)
            for key, value in table.items():
                if _KEY.fullmatch(key) and (encoded := _toml(value)) is not None:
                    overrides.append(f"model_providers.{name}.{key}={encoded}")
            key_variable = table.get("env_key")
            if isinstance(key_variable, str) and not key_variable.startswith("SCRIPTORIUM_"):
                env.append(key_variable)  # never one of Scriptorium's own: its tokens stay out of the run
        if isinstance(found.get("model"), str):
            overrides.append(f"model={_toml(found['model'])}")
        return UserProvider(tuple(overrides), tuple(env))

    def argv(
        self, executable: str, config: AgentConfig, workdir: Path, system: str, provider: UserProvider | None = None
    ) -> list[str]:
        overrides = [
            *(provider.overrides if provider is not None else ()),
            'approval_policy="never"',
            "sandbox_workspace_write.network_access=false",
            "sandbox_workspace_write.exclude_slash_tmp=true",
            "sandbox_workspace_write.exclude_tmpdir_env_var=true",
            'web_search="disabled"',
        ]
        argv = [executable]
        for override in overrides:  # before the subcommand: they then take precedence over any profile
            argv += ["-c", override]
        argv += [
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
            str(workdir),
        ]
        if config.model:
            argv += ["--model", config.model]
        return [*argv, "-"]  # the prompt on stdin: a 16k-token batch is too long for one argument

    def stdin(self, system: str, user: str) -> str:
        return f"{system}\n\n{user}"

    def parse(self, stdout: str, config: AgentConfig) -> AgentReport:
        events = [_json_or_none(line) for line in stdout.splitlines() if line.strip()]
        if not events or any(not isinstance(event, dict) for event in events):
            raise WriterFailed(f"{self.name} gave no JSON events: {_tail(stdout) or '(no output)'}")
        text, completed, turns = "", False, 0
        for event in events:
            assert isinstance(event, dict)
            kind = event.get("type")
            if kind in ("turn.failed", "error"):
                error = event.get("error") if kind == "turn.failed" else event
                message = error.get("message") if isinstance(error, dict) else None
                raise self.failure(str(message or event))
            if kind == "turn.completed":
                completed, turns = True, turns + 1
            item = event.get("item")
            if kind == "item.completed" and isinstance(item, dict) and item.get("type") == "agent_message":
                text = str(item.get("text") or "")
        if not completed:
            raise WriterFailed(f"{self.name} ended without completing its turn: {_tail(stdout)}")
        return AgentReport(text, turns, tokens=self.tokens(stdout))

    USAGE_KEYS = ("input_tokens", "output_tokens")
    """A ``turn.completed`` event's ``usage``: input (its ``cached_input_tokens`` are counted in it) and output."""

    def tokens(self, stdout: str) -> int | None:
        found = [
            _sum_usage(event.get("usage"), self.USAGE_KEYS)
            for event in map(_json_or_none, stdout.splitlines())
            if isinstance(event, dict) and event.get("type") == "turn.completed"
        ]
        counted = [n for n in found if n is not None]
        return sum(counted) if counted else None


CLAUDE_CODE = ClaudeCode(
    name="claude-code",
    default_command="claude",
    env=(
        "CLAUDE_CONFIG_DIR",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "AWS_REGION",
        "AWS_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "ANTHROPIC_VERTEX_PROJECT_ID",
        "CLOUD_ML_REGION",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ),
    # --max-turns is passed but not required: Claude Code 2.1.332 still takes it and no longer lists it in
    # --help; a release without it refuses the run as an unknown option, and the batch fails saying so.
    required_flags=(
        "--output-format",
        "--tools",
        "--allowedTools",
        "--permission-mode",
        "--strict-mcp-config",
        "--settings",
        "--no-session-persistence",
        "--append-system-prompt",
    ),
    help_args=("--help",),
    supported="Claude Code 2.1 or newer",
    install_hint="Install Claude Code (npm install -g @anthropic-ai/claude-code) on the worker's PATH, "
    "or point SCRIPTORIUM_WRITER_COMMAND at it.",
    login_hint="Sign in once as the user the worker runs as: run `claude` in a terminal and use /login "
    "(or give the worker ANTHROPIC_API_KEY). The batch stays pending and is retried.",
    login_failure=re.compile(r"/login|not logged in|invalid api key|authenticat|oauth token", re.I),
    fixed_env={"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"},
)

CODEX = Codex(
    name="codex",
    default_command="codex",
    env=("CODEX_HOME", "OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL"),
    required_flags=(
        "--json",
        "--ephemeral",
        "--skip-git-repo-check",
        "--ignore-user-config",
        "--ignore-rules",
        "--sandbox",
        "--cd",
    ),
    help_args=("exec", "--help"),
    supported="Codex CLI releases whose `codex exec` has --ignore-user-config (spring 2026 on)",
    install_hint="Install the Codex CLI (npm install -g @openai/codex) on the worker's PATH, "
    "or point SCRIPTORIUM_WRITER_COMMAND at it.",
    login_hint="Sign in once as the user the worker runs as: run `codex login` (or give the worker "
    "CODEX_API_KEY). The batch stays pending and is retried.",
    login_failure=re.compile(r"not logged in|codex login|unauthori[sz]ed|status:? 401|authenticat", re.I),
)

BACKENDS = {backend.name: backend for backend in (CLAUDE_CODE, CODEX)}


def _denial(entry: object) -> str:
    if not isinstance(entry, dict):
        return str(entry)[:200]
    tool = entry.get("tool_name", "?")
    args = entry.get("tool_input")
    target = args.get("file_path") or args.get("path") or args.get("pattern") if isinstance(args, dict) else None
    return f"{tool} {target or ''}".strip()[:200]


def _sum_usage(usage: object, keys: tuple[str, ...]) -> int | None:
    """The sum of ``usage``'s whole-number ``keys`` (None: no such object, or none of them in it)."""
    if not isinstance(usage, dict):
        return None
    counts = [usage[key] for key in keys if isinstance(usage.get(key), int) and not isinstance(usage[key], bool)]
    return sum(max(0, n) for n in counts) if counts else None


def _json_or_none(line: str) -> object:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _last_json(stdout: str) -> object:
    for line in reversed(stdout.strip().splitlines()):
        if line.strip():
            return _json_or_none(line)
    return None
