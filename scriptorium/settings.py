"""Settings for composition roots (CLI, workers, web): the only place that reads the environment.

An edge module: the domain core never imports it; entry points build core
configuration objects from it and pass them down.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from scriptorium.defaults import (
    DEFAULT_BACKLOG,
    DEFAULT_BATCH_TOKENS,
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_CORE_TOKEN_BUDGET,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_HOOK_DAEMON_IDLE_S,
    DEFAULT_IDLE_AFTER_S,
    DEFAULT_KEEP_ALIVE_S,
    DEFAULT_LOCK_TIMEOUT_S,
    DEFAULT_MAX_CLIENT_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_RECENT_LIMIT,
    DEFAULT_REPACK_LOOSE_OBJECTS,
    DEFAULT_RUNTIME_QUOTA_BYTES,
    DEFAULT_SCAN_INTERVAL_S,
    DEFAULT_SIGNIN_ATTEMPTS,
    DEFAULT_SIGNIN_WINDOW_S,
    DEFAULT_TRIGGER_TOKENS,
    DEFAULT_WRITE_QUOTA_BYTES,
    DEFAULT_WRITER_DAILY_RUNS,
    DEFAULT_WRITER_DAILY_TOKENS,
)
from scriptorium.errors import InvalidArgument, ReasonCode, WriterUnavailable
from scriptorium.locations import default_state
from scriptorium.redaction import Redactor, redactor_for

WriterBackend = Literal["verbatim", "llm", "claude-code", "codex"]
WRITER_BACKENDS: tuple[WriterBackend, ...] = ("verbatim", "llm", "claude-code", "codex")

WRITER_FILE_VERSION = 1
"""The newest ``writer.json`` layout this code reads (a file without ``version`` is version 1)."""


class WriterFile(BaseModel):
    """``<state>/writer.json``: the writer's settings, written by ``scriptorium setup … --writer`` and by hand.
    Every key is optional; each one set overrides the environment's setting on the next pass. Keys this
    version does not know are ignored (a file shared with a newer release keeps working), a file that says
    it is a newer layout is refused."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    version: int = Field(default=1, ge=1, le=WRITER_FILE_VERSION)
    backend: WriterBackend | None = None
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    """The LLM writer's per-request timeout, or an agent writer's time for one run."""
    command: str | None = None
    max_turns: int | None = Field(default=None, ge=1)

    def overrides(self, *keys: str) -> dict[str, Any]:
        """The values the file sets among ``keys``."""
        set_here = self.model_dump(exclude_unset=True, exclude_none=True)  # null: the environment's value
        return {key: value for key, value in set_here.items() if key in keys}


if TYPE_CHECKING:  # imported where used: a hook that only reads settings must not load git
    from scriptorium.sessions import SessionStore
    from scriptorium.workspace import WorkspaceConfig
    from scriptorium.writers.agent_cli import AgentConfig
    from scriptorium.writers.llm import LLMConfig
    from scriptorium.writing.budget import BudgetLimits
    from scriptorium.writing.service import WriteSettings


ENV_PREFIX = "SCRIPTORIUM_"
"""Each setting's environment variable: this prefix and its name (any case, ``SCRIPTORIUM_RECENT_LIMIT``)."""


def environment_values(fields: Mapping[str, FieldInfo], environ: Mapping[str, str]) -> dict[str, Any]:
    """The fields ``environ`` sets, by name: the text as it stands for pydantic to check and convert, a list or
    mapping decoded from JSON first (``SCRIPTORIUM_REDACT_PATTERNS='["tok-[0-9]+"]'``; text that is not
    JSON is left for pydantic to refuse with the variable and its value)."""
    names = {f"{ENV_PREFIX}{name}".upper(): name for name in fields}
    values: dict[str, Any] = {}
    for variable, text in environ.items():
        name = names.get(variable.upper())
        if name is None:
            continue
        value: Any = text
        if get_origin(fields[name].annotation) in (list, dict, set, tuple):
            with contextlib.suppress(ValueError):
                value = json.loads(text)
        values[name] = value
    return values


class Settings(BaseModel):
    """``SCRIPTORIUM_*`` environment variables (e.g. ``SCRIPTORIUM_STATE``, ``SCRIPTORIUM_RECENT_LIMIT``).

    ``Settings(**values)``: the values given, then the environment's (:func:`environment_values`), then the
    defaults. This is what pydantic-settings' ``BaseSettings`` did with ``env_prefix``, the one feature of it
    used here; it is not used because importing it cost every command a tenth of a second (it loads asyncio
    and its many settings sources), a fifth of ``memory status``."""

    model_config = ConfigDict(extra="ignore", validate_default=True)

    def __init__(self, **values: Any) -> None:
        super().__init__(**{**environment_values(type(self).model_fields, os.environ), **values})

    state: Path = Field(
        default_factory=default_state,
        description="State folder; memory lives at <state>/memory (default: the one user-scope setup recorded, "
        "else the per-user data folder: scriptorium.locations)",
    )
    recent_limit: int = Field(default=DEFAULT_RECENT_LIMIT, ge=1, description="memory.recent.limit")
    backend: Literal["scriptorium", "none"] = Field(
        default="scriptorium", description="memory.backend: 'none' disables memory (CLI verbs and API refuse)"
    )
    core_inject: bool = Field(default=True, description="memory.core.inject: inject core.md at session start")
    search_mode: Literal["bm25", "embedding", "hybrid"] = Field(
        default="bm25", description="memory.search.backend: bm25 | embedding | hybrid (embedding needs [embeddings])"
    )
    core_budget: int = Field(default=DEFAULT_CORE_TOKEN_BUDGET, ge=1, description="Resident block token budget.")
    lock_timeout: float = Field(default=DEFAULT_LOCK_TIMEOUT_S, gt=0, description="Workspace lock budget (s).")
    repack_loose_objects: int = Field(
        default=DEFAULT_REPACK_LOOSE_OBJECTS,
        ge=0,
        description="Loose git objects (estimated as git's gc.auto does) past which an install starts a "
        "background repack of the memory's history; 0: never",
    )
    log_level: str = Field(default="WARNING", description="structlog level for CLI runs.")
    sessions_url: str | None = Field(
        default=None, description="Session store URL; default sqlite:///<state>/sessions/sessions.db."
    )
    writer: WriterBackend = Field(
        default="verbatim",
        description="memory.writer.backend: verbatim | llm | claude-code | codex (default: writer.json's "
        "'backend', else verbatim)",
    )
    writer_model: str = Field(
        default="", description="memory.writer.model (LLM writer; agents: their default if empty)"
    )
    writer_base_url: str = Field(default="http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint")
    writer_api_key: str = Field(default="not-needed", description="API key for the writer endpoint")
    writer_timeout_s: float = Field(default=120.0, gt=0, description="Per-request timeout of the LLM writer")
    writer_command: str = Field(default="", description="Agent writers: the CLI to run (default claude / codex)")
    writer_agent_timeout_s: float = Field(default=300.0, gt=0, description="Agent writers: time for one headless run")
    writer_max_turns: int = Field(default=30, ge=1, description="Claude Code writer: --max-turns of one run")
    writer_agent_env: str = Field(
        default="", description="Agent writers: more variable names (comma-separated) the agent may see"
    )
    writer_daily_runs: int = Field(
        default=DEFAULT_WRITER_DAILY_RUNS,
        ge=0,
        description="Runs the LLM or an agent writer may make per UTC day and workspace, organize and repair "
        "runs included (default 100: a heavy day takes a few dozen, an import of a year's transcripts "
        "thousands); past it SCRIPTORIUM_WRITER_OVER_BUDGET decides; 0: no cap. The verbatim writer is "
        "never counted",
    )
    writer_daily_tokens: int = Field(
        default=DEFAULT_WRITER_DAILY_TOKENS,
        ge=0,
        description="Tokens the LLM or an agent writer's model may report per UTC day and workspace (input, "
        "cached input and output); default 0, no cap: the backends count unlike things (Claude Code every "
        "cached read), so the runs cap is the one that always holds",
    )
    writer_over_budget: Literal["wait", "verbatim"] = Field(
        default="wait",
        description="Past the day's writer budget: 'wait' (the pass is refused WRITER_BUDGET_SPENT, retryable; "
        "its turns stay pending for the writer you chose, after 00:00 UTC) or 'verbatim' (the verbatim writer "
        "writes them meanwhile, at no cost)",
    )
    broker_url: str | None = Field(default=None, description="Redis URL of the cluster; unset = embedded mode")
    result_backend: str | None = Field(default=None, description="Celery result backend (default: broker_url)")
    redis_prefix: str = Field(default="scriptorium:", description="Prefix of every Redis key the cluster owns")
    worker_host: str = Field(
        default="",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$|^$",
        description="This worker's host in a cluster of several (SCRIPTORIUM_WORKER_HOST): it consumes its own "
        "queue, scriptorium.host.<name>, holds the workspaces placed on it, and beats; unset: one host",
    )
    replica_send_interval_s: float = Field(
        default=10.0,
        ge=0,
        description="At most one send to a workspace's replica per this many seconds: a pass an interval after "
        "the last send is sent at once with every commit since, one within it waits for the next such pass or "
        "the sweep (what a dead holder installed and had not sent is written again on promotion, never lost)",
    )
    timezone: str = Field(default="UTC", description="Timezone of the 03:00 nightly reorganize")
    task_soft_time_limit_s: int = Field(default=540, ge=1, description="Soft limit around a pass (LLM call)")
    task_hard_time_limit_s: int = Field(default=600, ge=2, description="Hard limit: the pool child is killed")
    retry_base_s: float = Field(default=5.0, gt=0, description="Longest first retry delay (doubles; full jitter)")
    retry_max_delay_s: float = Field(default=300.0, gt=0, description="Longest retry delay")
    max_retries: int = Field(default=6, ge=0, description="Retries before the sweep takes over")
    quarantine_after: int = Field(default=3, ge=1, description="Deliveries that killed a worker before quarantine")
    lock_ttl_s: float = Field(default=30.0, gt=0, description="Redis workspace-lock TTL (a watchdog extends it)")
    idle_minutes: float = Field(
        default=DEFAULT_IDLE_AFTER_S / 60,
        gt=0,
        description="Minutes without a new message after which a session with unwritten turns gets the forced "
        "write, whether or not its runtime said it ended (a decimal: 0.05 is three seconds)",
    )
    sweep_interval_s: float = Field(
        default=DEFAULT_SCAN_INTERVAL_S, gt=0, description="How often the session watcher (and the beat's sweep) scans"
    )
    watch: bool = Field(
        default=True,
        description="memory.session_watcher: sweep for sessions that went idle unwritten (SessionStart starts a "
        "sweep at most once per interval; the hook daemon and `scriptorium serve` sweep every interval)",
    )
    visibility_margin_s: float = Field(default=300.0, ge=0, description="Visibility timeout beyond limit + retry")
    unacked_restore_interval_s: int = Field(
        default=10, ge=1, description="How often a worker looks for unacknowledged messages past the visibility timeout"
    )
    task_events: bool = Field(default=False, description="Send Celery task events (on for Flower dashboards)")
    pending_bound_s: float = Field(
        default=2 * 3600, gt=0, description="Unwritten turns older than this are re-enqueued"
    )
    hook_search_budget_ms: float = Field(
        default=1500, gt=0, description="UserPromptSubmit recall budget; past it the prompt goes on without context"
    )
    hook_cold_search_budget_ms: float = Field(
        default=4_000,
        gt=0,
        description="The recall budget of a prompt answered by a process that has not loaded the index yet (the "
        "first prompt after the hook daemon exited): covers loading the index's disk cache, which grows with the "
        "memory (about 2 s at a heavy user's year), so that prompt keeps its recall; within the 5 s setup gives "
        "the prompt hook, past which the runtime stops waiting",
    )
    hook_daemon_idle_s: float = Field(
        default=DEFAULT_HOOK_DAEMON_IDLE_S,
        ge=0,
        description="Idle seconds before the hook daemon exits; 0: never start one",
    )
    hook_writes: Literal["background", "inline"] = Field(
        default="background",
        description="Where the writing hooks (Stop, SubagentStop, PreCompact, SessionEnd) import and write: in "
        "the background, so that a turn never waits for them, or inline, before the hook returns",
    )
    hook_write_settle_s: float = Field(
        default=1.0,
        ge=0,
        description="Seconds without a writing hook before a resident process (or a detached one) starts the "
        "writes handed to it: the runtime finishes its turn first, and writes after (at most 30 s late)",
    )
    hook_workspace: str = Field(default="default", description="Workspace the hooks feed (events name it)")
    token: str | None = Field(
        default=None,
        description="A propose or write token `scriptorium mcp` (stdio) speaks for; unset: the local owner",
    )
    write_quota_bytes: int = Field(
        default=DEFAULT_WRITE_QUOTA_BYTES,
        ge=0,
        description="Bytes a write token's requester may commit per day (UTC): every file its changes put in "
        "the tree; over it QUOTA_EXCEEDED (429); 0: no quota (scriptorium.access.quota)",
    )
    runtime_quota_bytes: int = Field(
        default=DEFAULT_RUNTIME_QUOTA_BYTES,
        ge=0,
        description="Bytes of session nodes a runtime token's requester may post per day (UTC); over it "
        "QUOTA_EXCEEDED (429); 0: no quota (scriptorium.access.quota)",
    )
    hook_audience: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$",
        description="The requester the hooks' sessions belong to, and whose records their recall may show "
        "(with the shared ones); unset: shared sessions, shared records",
    )
    hook_transcript_roots: str = Field(
        default="",
        description="Folders (os.pathsep-separated) whose transcripts POST /api/hooks may import; "
        "default: the runtimes' own folders",
    )
    redact: bool = Field(
        default=True,
        description="Take secrets out of every conversation before it is stored (scriptorium.redaction); "
        "off: stored verbatim",
    )
    redact_patterns: list[str] = Field(
        default_factory=list,
        description="More secrets to redact: regular expressions, as a JSON list (SCRIPTORIUM_REDACT_PATTERNS)",
    )
    max_connections: int = Field(
        default=DEFAULT_MAX_CONNECTIONS,
        ge=1,
        description="serve: connections held at once (at most half the file-descriptor limit); one more is "
        "refused as it arrives (503 RATE_LIMITED)",
    )
    max_client_connections: int = Field(
        default=DEFAULT_MAX_CLIENT_CONNECTIONS,
        ge=1,
        description="serve: connections one client address (an IPv6 client's /64) holds at once; one more is "
        "refused as it arrives (429 RATE_LIMITED); a trusted proxy's (forwarded_allow_ips) are not counted so",
    )
    backlog: int = Field(
        default=DEFAULT_BACKLOG,
        ge=1,
        description="serve: connections waiting to be accepted, and accepted at one go (at most a sixteenth of "
        "the file-descriptor limit)",
    )
    header_timeout_s: float = Field(
        default=DEFAULT_HEADER_TIMEOUT_S,
        gt=0,
        description="serve: seconds a connection has to send a whole request head (else 408 REQUEST_TIMEOUT)",
    )
    body_timeout_s: float = Field(
        default=DEFAULT_BODY_TIMEOUT_S,
        gt=0,
        description="serve: seconds a request has to send its whole body once it is read (else 408 REQUEST_TIMEOUT)",
    )
    keep_alive_s: int = Field(
        default=DEFAULT_KEEP_ALIVE_S, ge=1, description="serve: seconds an idle kept-alive connection stays open"
    )
    signin_attempts: int = Field(
        default=DEFAULT_SIGNIN_ATTEMPTS,
        ge=1,
        description="Memory page: failed sign-ins one client may make in a row before it waits (429 RATE_LIMITED)",
    )
    signin_window_s: float = Field(
        default=DEFAULT_SIGNIN_WINDOW_S,
        gt=0,
        description="Memory page: seconds over which a client's failed sign-ins come back, evenly",
    )
    forwarded_allow_ips: str = Field(
        default="",
        description="serve: proxies (comma-separated addresses or networks, or *) whose X-Forwarded-For and "
        "X-Forwarded-Proto are believed (`serve --forwarded-allow-ips`); default none",
    )
    batch_tokens: int = Field(
        default=DEFAULT_BATCH_TOKENS, ge=100, description="Write pass: tokens of conversation per batch the writer gets"
    )
    trigger_tokens: int = Field(
        default=DEFAULT_TRIGGER_TOKENS,
        ge=0,
        description="Write pass: unwritten tokens below which an unforced pass (a turn's end) writes nothing yet",
    )

    @property
    def idle_after_s(self) -> float:
        return self.idle_minutes * 60

    @property
    def memory_dir(self) -> Path:
        return self.state / "memory"

    def workspace_state(self, workspace: str) -> Path:
        """State folder of a named workspace: ``default`` is ``<state>``, others ``<state>/workspaces/<name>``."""
        return self.state if workspace == "default" else self.state / "workspaces" / workspace

    def workspace_names(self) -> list[str]:
        """Workspaces that exist under the state folder."""
        names = ["default"] if (self.state / "memory" / ".git").is_dir() else []
        root = self.state / "workspaces"
        if root.is_dir():
            names += sorted(p.name for p in root.iterdir() if (p / "memory" / ".git").is_dir())
        return names

    @property
    def visibility_timeout_s(self) -> int:
        """Longer than the hard time limit plus the longest retry delay, so a running or
        delayed task is never redelivered while it is still owned."""
        return int(self.task_hard_time_limit_s + self.retry_max_delay_s + self.visibility_margin_s)

    def redactor(self) -> Redactor | None:
        """What takes secrets out of conversations before they are stored (None: ``SCRIPTORIUM_REDACT=off``)."""
        return redactor_for(self.state, self.redact, self.redact_patterns)

    def session_store(self) -> SessionStore:
        """The session store behind the redactor: nothing it keeps holds a secret (:mod:`.redaction_store`)."""
        from scriptorium.redaction_store import redacting
        from scriptorium.sessions import open_store

        return redacting(open_store(self.session_store_url), self.redactor())

    @property
    def session_store_url(self) -> str:
        return self.sessions_url or f"sqlite:///{(self.state / 'sessions' / 'sessions.db').resolve()}"

    @property
    def writer_file(self) -> Path:
        """``<state>/writer.json``: the writer's settings, read on every pass (no restart needed)."""
        return self.state / "writer.json"

    def _writer_overrides(self) -> WriterFile:
        """writer.json as read now; WRITER_START_FAILED (retryable: the file is read again next pass) when it
        is unreadable or holds a value of the wrong kind."""
        try:
            raw = self.writer_file.read_bytes()
        except FileNotFoundError:
            return WriterFile()
        except OSError as exc:
            raise WriterUnavailable(
                f"{self.writer_file} is not readable: {exc}", reason=ReasonCode.WRITER_START_FAILED
            ) from exc
        try:
            return WriterFile.model_validate_json(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, error['loc'])) or 'the file'}: {error['msg']}" for error in exc.errors()
            )
            raise WriterUnavailable(
                f"{self.writer_file}: {problems}", reason=ReasonCode.WRITER_START_FAILED, path=str(self.writer_file)
            ) from exc

    def writer_backend(self) -> WriterBackend:
        """The writer this process runs: ``SCRIPTORIUM_WRITER`` when set, else writer.json's ``backend``
        (what ``scriptorium setup … --writer`` chose), else the verbatim writer."""
        if "writer" in self.model_fields_set:
            return self.writer
        try:
            chosen = self._writer_overrides().backend
        except WriterUnavailable as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and any(e["loc"][:1] == ("backend",) for e in cause.errors()):
                raise InvalidArgument(exc.message, path=str(self.writer_file)) from exc
            chosen = None  # the pass reports the broken file; the choice falls back to the default
        return self.writer if chosen is None else chosen

    def llm_config_source(self) -> Callable[[], LLMConfig]:
        """Writer settings read on every pass: ``<state>/writer.json`` overrides the environment.

        Editing that file switches model or endpoint on the next pass, without a restart.
        """
        from scriptorium.writers.llm import LLMConfig  # imports the model client only when used

        def load() -> LLMConfig:
            values: dict[str, Any] = {
                "model": self.writer_model,
                "base_url": self.writer_base_url,
                "api_key": self.writer_api_key,
                "timeout_s": self.writer_timeout_s,
            }
            values.update(self._writer_overrides().overrides(*values))
            if not values["model"]:
                raise WriterUnavailable(
                    "no writer model configured (SCRIPTORIUM_WRITER_MODEL or writer.json)",
                    reason=ReasonCode.WRITER_START_FAILED,
                )
            return LLMConfig(**values)

        return load

    def agent_config_source(self) -> Callable[[], AgentConfig]:
        """The agent writers' settings, read on every pass; writer.json's ``command``, ``model``,
        ``timeout_s``, ``max_turns`` override the environment."""
        from scriptorium.writers.agent_cli import AgentConfig

        def load() -> AgentConfig:
            values: dict[str, Any] = {
                "command": self.writer_command,
                "model": self.writer_model,
                "timeout_s": self.writer_agent_timeout_s,
                "max_turns": self.writer_max_turns,
            }
            values.update(self._writer_overrides().overrides(*values))
            names = tuple(name.strip() for name in self.writer_agent_env.split(",") if name.strip())
            return AgentConfig(**values, pass_env=names)

        return load

    def write_settings(self) -> WriteSettings:
        from scriptorium.writing.service import WriteSettings

        over_budget = None
        if self.writer_over_budget == "verbatim":
            from scriptorium.writers.organizer import OfflineOrganizer
            from scriptorium.writers.verbatim import VerbatimWriter

            over_budget = (VerbatimWriter(), OfflineOrganizer())
        return WriteSettings(
            batch_tokens=self.batch_tokens,
            trigger_tokens=self.trigger_tokens,
            budget=self.writer_budget(),
            over_budget=over_budget,
        )

    def writer_budget(self) -> BudgetLimits:
        """The costly writers' daily caps (``SCRIPTORIUM_WRITER_DAILY_RUNS``, ``…_TOKENS``)."""
        from scriptorium.writing.budget import BudgetLimits

        return BudgetLimits(runs=self.writer_daily_runs, tokens=self.writer_daily_tokens)

    def workspace_config(self) -> WorkspaceConfig:
        from scriptorium.workspace import WorkspaceConfig

        return WorkspaceConfig(
            recent_limit=self.recent_limit,
            core_budget=self.core_budget,
            lock_timeout=self.lock_timeout,
            repack_loose_objects=self.repack_loose_objects,
            write_quota_bytes=self.write_quota_bytes,
            redactor=self.redactor(),
        )
