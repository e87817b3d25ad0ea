"""Writers on the user's own login: Claude Code and Codex in headless mode, so writing needs no API key.

The pass stages as for every writer — ``topics/`` writable, this batch's sources
read-only (0444) — and runs the agent's headless mode with the staging folder as
its working directory. What the agent changed there is the edit: the transaction
normalizes and validates it as for every writer, and a rejection gives the agent
one repair run with the rule's guidance. The organizer runs the same way in a
folder of its own that holds only a copy of the topics (a restricted phase: no
sources in sight); what it changed there is written back through the topic API.

What the agent can reach:

* its working directory is the staging copy, and nothing outside ``topics/`` may
  change: a file written beside ``topics/`` is a rejected edit (``INVALID_PATH``),
  a changed source is ``SOURCES_MODIFIED``;
* Claude Code gets its file tools only (``--tools Read,Write,Edit,Glob``), reads
  pre-approved under the working directory and edits under ``topics/``, every other
  request denied (``--permission-mode dontAsk``), no MCP servers, no hooks, no
  saved session; Codex runs in its ``workspace-write`` sandbox rooted at the staging
  folder, without network, without ``/tmp``, without the user's ``config.toml``
  (its hooks and MCP servers) and without a saved session;
* its environment is reduced to what it needs: ``PATH``, ``HOME``, locale, proxies,
  certificates, and the variables its own login and configuration read (listed
  per backend below); ``SCRIPTORIUM_WRITER_AGENT_ENV`` adds names. Scriptorium's own
  tokens, broker and database URLs never reach it. ``SCRIPTORIUM_WRITER_RUN=1`` is
  set, so Scriptorium's hooks do nothing if the agent fires them anyway.

Each run that started is counted in the writer's :class:`~scriptorium.writer_interface.Usage`, with the
tokens its output reports (a failed run's too): the pass charges them to the day's budget.

Failures map to the closed reason codes: not installed, too old or not logged in →
``WRITER_START_FAILED`` (retryable, with guidance); past the timeout →
``WRITER_TIMEOUT`` (the agent's process group is killed); a non-zero exit or
output that is not the documented JSON → ``WRITER_FAILED``. The conversation is
never affected: the pass leaves the batch pending or reports it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from scriptorium.defaults import WRITER_RUN_ENV
from scriptorium.errors import InvalidPath, ReasonCode, WriterFailed, WriterUnavailable
from scriptorium.logs import get_logger
from scriptorium.workspace.paths import TOPICS
from scriptorium.workspace.staging import (
    ORGANIZER_OWNER,
    STAGING_PREFIX,
    Staging,
    check_root,
    remove_tree,
    walk_topic_files,
)
from scriptorium.writer_interface import Batch, MayCombine, Repair, Restated, TopicFiles, Usage
from scriptorium.writers.agent_cli import BACKENDS, AgentConfig, AgentReport, Backend, ConfigSource
from scriptorium.writers.prompting import batch_prompt, prompt

log = get_logger(__name__)

COMMON_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
    "DBUS_SESSION_BUS_ADDRESS",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
)
"""What every agent may see of the worker's environment (the login's keyring needs the D-Bus address)."""


def agent_env(
    backend: Backend, config: AgentConfig, environ: Mapping[str, str] | None = None, extra: Sequence[str] = ()
) -> dict[str, str]:
    """The agent's whole environment: the allowed names that are set (``extra``: the user's provider's key),
    the backend's fixed values, the marker."""
    source = os.environ if environ is None else environ
    names = (*COMMON_ENV, *backend.env, *config.pass_env, *extra)
    env = {name: source[name] for name in names if name in source}
    env.update(backend.fixed_env)
    env[WRITER_RUN_ENV] = "1"
    return env


_probed: dict[tuple[str, int, int], str] = {}
"""Executables already checked (path, mtime, size) → the version they print."""


class AgentRunner:
    """Runs one backend's headless mode: checks the executable once per release, then runs it in a folder."""

    def __init__(self, backend: Backend, config: ConfigSource, usage: Usage | None = None) -> None:
        self.backend = backend
        self.config = config
        self.usage = usage if usage is not None else Usage()

    def run(self, workdir: Path, system: str, user: str) -> AgentReport:
        config = self.config()  # read on every pass: a new model or timeout needs no restart
        provider = self.backend.user_provider(os.environ)
        env = agent_env(self.backend, config, extra=provider.env)
        executable = self._executable(config, env)
        version = self._probe(executable, env, workdir)
        argv = self.backend.argv(executable, config, workdir, system, provider)
        log.info("agent.run", backend=self.backend.name, version=version, model=config.model or "(default)")
        try:
            rc, stdout, stderr = _run(
                argv, workdir, env, self.backend.stdin(system, user), config.timeout_s, self.backend
            )
        except WriterUnavailable as exc:
            if exc.reason is ReasonCode.WRITER_TIMEOUT:  # it ran until it was stopped: that run cost too
                self.usage.runs += 1
            raise
        self.usage.runs += 1
        self.usage.tokens += self.backend.tokens(stdout) or 0
        if rc != 0:
            raise self.backend.failure(f"exit status {rc}: {stdout.strip()} {stderr.strip()}".strip())
        report = self.backend.parse(stdout, config)
        log.info(
            "agent.done", backend=self.backend.name, turns=report.turns, cost_usd=report.cost_usd, tokens=report.tokens
        )
        return report

    def _executable(self, config: AgentConfig, env: Mapping[str, str]) -> str:
        command = config.command or self.backend.default_command
        found = shutil.which(command, path=env.get("PATH"))
        if found is None:
            raise WriterUnavailable(
                f"{self.backend.name}: {command!r} is not installed or not on PATH",
                reason=ReasonCode.WRITER_START_FAILED,
                guidance=self.backend.install_hint,
            )
        return found

    def _probe(self, executable: str, env: Mapping[str, str], cwd: Path) -> str:
        """The release's version, once its help lists every flag the backend passes (else WRITER_START_FAILED)."""
        st = os.stat(executable)
        key = (executable, st.st_mtime_ns, st.st_size)
        if key in _probed:
            return _probed[key]
        _rc, version, _err = _run([executable, "--version"], cwd, env, "", 30, self.backend)
        _rc, help_text, help_err = _run([executable, *self.backend.help_args], cwd, env, "", 30, self.backend)
        version = version.strip().splitlines()[0] if version.strip() else "unknown version"
        missing = [flag for flag in self.backend.required_flags if flag not in help_text + help_err]
        if missing:
            raise WriterUnavailable(
                f"{self.backend.name} {version} lacks {', '.join(missing)}: Scriptorium needs {self.backend.supported}",
                reason=ReasonCode.WRITER_START_FAILED,
                guidance=f"Upgrade it. {self.backend.install_hint}",
            )
        _probed[key] = version
        return version


def _run(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], stdin: str, timeout_s: float, backend: Backend
) -> tuple[int, str, str]:
    """Run in a process group of its own; on timeout (or anything that interrupts the wait) kill the group."""
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        raise WriterUnavailable(
            f"{backend.name} could not start: {exc}",
            reason=ReasonCode.WRITER_START_FAILED,
            guidance=backend.install_hint,
        ) from exc
    try:
        stdout, stderr = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc)
        raise WriterUnavailable(
            f"{backend.name} did not finish within {timeout_s:g} s; it was stopped",
            reason=ReasonCode.WRITER_TIMEOUT,
            guidance="Raise SCRIPTORIUM_WRITER_AGENT_TIMEOUT_S, or lower SCRIPTORIUM_BATCH_TOKENS (less per run).",
        ) from exc
    finally:
        if proc.poll() is None:  # interrupted (a soft time limit, a signal): the agent does not outlive the pass
            _kill_group(proc)
    return proc.returncode, stdout, stderr


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


class AgentWriter:
    """Writes a batch by running an agent CLI in the pass's staging folder."""

    wants_branches = True
    """Its batches carry their branch context, as the LLM writer's do."""
    works_in_staging = True
    """The pass materializes every topic and stages the batch's sources read-only: the agent edits real files."""

    def __init__(self, backend: Backend, config: ConfigSource, usage: Usage | None = None) -> None:
        self.name = backend.name
        self.runner = AgentRunner(backend, config, usage)
        self.usage = self.runner.usage
        """Its runs and tokens (an agent's model costs money): the pass charges them to the day's budget."""

    def write(self, batch: Batch, topics: TopicFiles, repair: Repair | None = None) -> None:
        if not isinstance(topics, Staging) or not topics.materialized:
            raise WriterFailed(f"the {self.name} writer edits a materialized staging folder, not a topic view")
        system = prompt("writer") + prompt("agent_writer")
        self.runner.run(topics.root, system, batch_prompt(batch, topics.list_topics(), repair))


class AgentOrganizer:
    """Reorganizes topics by running an agent CLI in a folder that holds only a copy of them."""

    def __init__(self, backend: Backend, config: ConfigSource, usage: Usage | None = None) -> None:
        self.name = backend.name
        self.runner = AgentRunner(backend, config, usage)
        self.usage = self.runner.usage

    def organize(
        self,
        topics: TopicFiles,
        may_combine: MayCombine | None = None,
        changed: Collection[str] | None = None,
        restated: Restated | None = None,
    ) -> None:
        """The sibling-branch rule is checked on what comes back (``BRANCHES_MERGED``), as for any model."""
        with topic_folder(topics) as (folder, before):
            listing = "\n".join(before) or "(no topics yet)"
            self.runner.run(
                folder,
                prompt("organizer") + prompt("agent_organizer"),
                f"Topic files now:\n{listing}\n\nOrganize them.",
            )
            write_back(folder, before, topics)


@contextmanager
def topic_folder(topics: TopicFiles) -> Iterator[tuple[Path, dict[str, str]]]:
    """A private folder holding ``topics/`` as files (and nothing else), removed afterwards.

    Named like a staging folder, with this process's ID, so an orphan is swept the same way.
    """
    folder = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{ORGANIZER_OWNER}-{os.getpid()}-"))
    try:
        before: dict[str, str] = {}
        (folder / TOPICS).mkdir()
        for path in topics.list_topics():
            text = topics.read(path)
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            before[path] = text
        yield folder, before
    finally:
        remove_tree(folder)


def write_back(folder: Path, before: Mapping[str, str], topics: TopicFiles) -> None:
    """What changed in ``folder`` since ``before``, through the topic API; InvalidPath for anything beside topics/."""
    check_root(folder, (TOPICS,))
    after: dict[str, str] = {}
    for path in walk_topic_files(folder):
        try:
            after[path] = (folder / path).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidPath(f"{path} is not UTF-8 text", path=path) from exc
    for path in before.keys() - after.keys():
        topics.delete(path)
    for path, text in after.items():
        if before.get(path) != text:
            topics.write(path, text)


def agent_writer(name: str, config: ConfigSource) -> tuple[AgentWriter, AgentOrganizer]:
    backend = BACKENDS[name]
    usage = Usage()  # one account of what the backend's runs cost, writing and organizing
    return AgentWriter(backend, config, usage), AgentOrganizer(backend, config, usage)
