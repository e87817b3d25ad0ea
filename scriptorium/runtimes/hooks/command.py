"""``scriptorium hook``: memory's part of a Claude Code or Codex hook.

The runtime runs the command with one JSON payload on stdin (common fields
``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``) and reads
what it prints. What each event does:

* ``SessionStart``: prints the effective resident block (trusted records only,
  inside ``<memory-context>``) as ``hookSpecificOutput.additionalContext``,
  within Claude Code's 10,000-character cap — not for ``source: resume``, whose
  context already holds it (``startup``, ``clear`` and ``compact`` get it);
* ``UserPromptSubmit``: the same shape with the trusted recall for ``prompt``,
  packed into 2,000 characters (:mod:`scriptorium.recall.prompt`), within
  ``SCRIPTORIUM_HOOK_SEARCH_BUDGET_MS`` (past it, no context rather than a slow
  prompt);
* ``Stop`` / ``SubagentStop``: imports what the transcript (and the subagent's)
  gained, then runs an unforced write pass (embedded) or publishes
  ``turn.ended`` (cluster: ``SCRIPTORIUM_BROKER_URL`` set);
* ``PreCompact``: the same with a forced pass (``session.idle``);
* ``SessionEnd``: imports, then the forced pass (embedded) or publishes
  ``session.idle`` (cluster).

The command runs the writing events (the last four) in the background, so a turn never waits for them
(:mod:`scriptorium.runtimes.hooks.daemon`): :func:`main` with ``--background`` is the detached process that runs
one, in turn with the others of its state folder (``SCRIPTORIUM_HOOK_WRITES=inline``: in the command, done
when it returns). Called in a process that must answer quickly (the HTTP hook route), ``SessionEnd``
hands its forced pass to a detached process instead.

A memory failure never fails or blocks the agent (memory serves the agent's
work and is never a reason for it to stop): whatever goes
wrong, the command exits 0 with nothing on stdout; the failure is logged with
its reason code and recorded in the writer history (``op: hook``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scriptorium.defaults import MAX_HOOK_PAYLOAD
from scriptorium.errors import InvalidArgument, ReasonCode, ScriptoriumError
from scriptorium.locations import make_private, private_umask
from scriptorium.logs import configure_logging, get_logger
from scriptorium.producers.opening import confined, pinned
from scriptorium.runtimes.hooks.answer import CONTEXT_CAP, Output, context_output
from scriptorium.runtimes.hooks.context import HookContext
from scriptorium.runtimes.openings import FIRST_PROMPT, Openings
from scriptorium.settings import Settings

if TYPE_CHECKING:  # imported where used: only the cluster mode publishes
    from scriptorium.producers.publisher import Publisher

log = get_logger(__name__)

MAX_PAYLOAD = MAX_HOOK_PAYLOAD
EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "SessionEnd")


def parse_payload(raw: bytes) -> dict[str, Any]:
    if len(raw) > MAX_PAYLOAD:
        raise InvalidArgument(f"hook payload over {MAX_PAYLOAD} bytes")
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"hook payload is not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise InvalidArgument("hook payload is not a JSON object")
    event = payload.get("hook_event_name")
    if event not in EVENTS:
        raise InvalidArgument(f"unknown hook_event_name {event!r}; expected one of {', '.join(EVENTS)}")
    return payload


class Hooks:
    """The hook events of one configuration (a state folder, embedded or cluster).

    ``transcript_roots``, when given, confines the transcripts a payload may name
    to those folders: the server sets it, so a runtime token cannot make it import
    an arbitrary file it can read. The command runs as the user, on the user's own
    transcripts, and takes any path.
    """

    def __init__(
        self,
        settings: Settings,
        transcript_roots: Sequence[Path] | None = None,
        audience: str | None = None,
        detach_end: bool = True,
        bound: bool = False,
        openings: Openings | None = None,
    ) -> None:
        self.settings = settings
        self.detach_end = detach_end
        """``SessionEnd`` hands its forced pass to a detached process (a caller that must answer at once, the
        HTTP hook route); False: the pass runs here (the command's background process, or inline)."""
        self.transcript_roots = (
            [r.expanduser().resolve() for r in transcript_roots] if transcript_roots is not None else None
        )
        self.bound = bound
        """A requester's token on the HTTP route: it appends only to that requester's own sessions."""
        self.audience = audience or settings.hook_audience
        """The requester whose sessions these hooks import and whose records their context may show (with the
        shared ones); None: shared sessions, shared records."""
        self.context = HookContext(settings, self.audience, openings)

    def handle(self, payload: Mapping[str, Any]) -> Output:
        event = str(payload["hook_event_name"])
        if self.settings.backend == "none":
            return None
        if event in ("SessionStart", "UserPromptSubmit"):
            self.note_transcript(payload)
            self.context.recover_if_interrupted()
        if event == "SessionStart":
            self.start_watcher()
            if self.context.openings is not None:  # its answer opens the session: the first prompt need not
                self.context.openings.opened(str(payload.get("session_id") or ""))
            if payload.get("source") == "resume":  # the resumed context holds the core its start injected
                return None
            return context_output(event, self.context.opening(payload))
        if event == "UserPromptSubmit":
            session = str(payload.get("session_id") or "")
            recall = self.context.recall(str(payload.get("prompt") or ""), session, payload.get("cwd"))
            opens = self.context.opens(session)
            if opens and payload.get("core") == FIRST_PROMPT:  # no SessionStart hook: its sweep starts here
                self.start_watcher()
            opening = self.context.opening(payload, CONTEXT_CAP - len(recall), shown=recall) if opens else ""
            return context_output(event, "\n\n".join(filter(None, (opening, recall))))
        sessions, left = self.import_transcripts(payload)
        if event in ("Stop", "SubagentStop"):
            self.write_left(left)  # a head that jumped to another branch: the one it left, now and whole
            self.write(sessions, force=False)
        elif event == "PreCompact":
            self.write(sessions, force=True)
        elif event == "SessionEnd":
            self.write(sessions, force=True, detach=self.detach_end)
        return None

    def note_transcript(self, payload: Mapping[str, Any]) -> None:
        """Tell the session watcher which transcript this live session writes: if it dies before any writing
        hook imports it, the sweep still finds it (:func:`~scriptorium.runtimes.hooks.watcher.note_seen`).

        On the HTTP route only a transcript inside the runtimes' folders is noted, and none for a
        requester's token: the sweep imports what it finds as shared sessions."""
        transcript = payload.get("transcript_path")
        if not self.settings.watch or self.bound or not isinstance(transcript, str) or not transcript:
            return
        if self.transcript_roots is not None:
            try:
                confined([Path(transcript)], self.transcript_roots)
            except ScriptoriumError:
                return  # the writing hooks refuse it, with its reason; the context still goes out
        from scriptorium.runtimes.hooks.watcher import note_seen

        try:
            note_seen(self.settings.state, transcript)
        except OSError as exc:  # the context still goes out
            log.warning("hook.transcript_not_noted", error=str(exc))

    def start_watcher(self) -> None:
        """A new session: sweep for earlier ones that went idle unwritten (detached; at most once per
        interval), so that no resident process is needed for the forced write (:mod:`.watcher`)."""
        from scriptorium.runtimes.hooks.watcher import start_detached

        try:
            start_detached(self.settings)
        except OSError as exc:  # the context still goes out; the next SessionStart tries again
            log.warning("hook.watcher_not_started", error=str(exc))

    # -- writing -----------------------------------------------------------------------

    def import_transcripts(self, payload: Mapping[str, Any]) -> tuple[list[str], dict[str, str]]:
        """Import what the hook's transcripts gained; returns the sessions touched, and the tips of the
        branches whose head moved away to another branch (session → tip left)."""
        from scriptorium.producers.ingest import import_paths

        paths = [
            Path(str(p)).expanduser()
            for key in ("transcript_path", "agent_transcript_path")
            if isinstance(p := payload.get(key), str) and p
        ]
        roots = self.transcript_roots  # an HTTP hook's caller: read only the files checked, as checked
        reading = nullcontext() if roots is None else pinned(confined(paths, roots), roots)
        if not paths:
            return ([str(payload["session_id"])] if payload.get("session_id") else []), {}
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:  # `claude mcp list` or `claude doctor` end a "session" that never wrote one: nothing to do
            log.info("hook.no_transcript", missing=missing)
            paths = [p for p in paths if p.is_file()]
            if not paths:
                return [], {}
        store = self.settings.session_store()
        try:
            with reading:
                report = import_paths(
                    store,
                    paths,
                    self.audience,
                    self.settings.hook_workspace,
                    redactor=self.settings.redactor(),
                    own_only=self.bound,
                )
            return report.sessions, report.left
        finally:
            store.close()

    def write_left(self, left: Mapping[str, str]) -> None:
        """Write each branch a head move left, completely: published as ``session.head_moved`` in a cluster."""
        if not left:
            return
        if self.settings.broker_url:
            with self._publisher() as publisher:
                for session_id, tip in left.items():
                    publisher.head_moved(self.settings.hook_workspace, session_id, left=tip)
            return
        write_sessions(self.settings, list(left), force=True, tips=left)

    @contextmanager
    def _publisher(self) -> Iterator[Publisher]:
        """The cluster's publisher for one hook (spooling when the broker does not answer), closed after."""
        from scriptorium.producers.publisher import Publisher

        assert self.settings.broker_url is not None
        publisher = Publisher(
            self.settings.broker_url, spool=self.settings.state / "spool", prefix=self.settings.redis_prefix
        )
        try:
            yield publisher
        finally:
            publisher.close()

    def write(self, sessions: Sequence[str], force: bool, detach: bool = False) -> None:
        if not sessions:
            return
        if self.settings.broker_url:
            with self._publisher() as publisher:
                for session_id in sessions:
                    if force:
                        publisher.session_idle(self.settings.hook_workspace, session_id)
                    else:
                        publisher.turn_ended(self.settings.hook_workspace, session_id)
            return
        if detach:
            self._write_detached(sessions)
            return
        write_sessions(self.settings, sessions, force)

    def _write_detached(self, sessions: Sequence[str]) -> None:
        """Start the forced pass in its own process and return at once (the runtime's budget is short)."""
        from scriptorium.locations import start_detached

        start_detached("scriptorium.runtimes.hooks.command", self.settings.state, "--finish", *sessions)


def write_sessions(
    settings: Settings, sessions: Sequence[str], force: bool, tips: Mapping[str, str] | None = None
) -> None:
    """Run the write pass for each session in this process (the embedded default); ``tips``: only the
    branch ending at each session's tip (forced)."""
    from scriptorium.composition import build_runtime

    runtime = build_runtime(settings)
    try:
        for session_id in sessions:
            only = [tips[session_id]] if tips and session_id in tips else None
            outcome = runtime.service.write(session_id, force=force, tips=only)
            if not outcome.ok:
                log.info("hook.write_not_ok", session=session_id, reason=str(outcome.reason))
    finally:
        runtime.close()


def record_failure(settings: Settings, event: str, error: BaseException) -> None:
    """Log a hook's failure with its reason code and add it to the writer history (when there is one)."""
    reason = error.reason if isinstance(error, ScriptoriumError) else ReasonCode.UNCLASSIFIED_ERROR
    message = error.message if isinstance(error, ScriptoriumError) else f"{type(error).__name__}: {error}"
    log.warning("hook.failed", hook=event, reason=str(reason), error=message)
    runtime_dir = settings.memory_dir / ".scriptorium"
    if not runtime_dir.is_dir():
        return
    from scriptorium.workspace.writer_history import WriterHistory

    try:
        WriterHistory(runtime_dir).append(
            {
                "at": datetime.now(UTC).isoformat(),
                "op": "hook",
                "hook": event,
                "ok": False,
                "outcome": "failed",
                "reason": str(reason),
                "retryable": reason.retryable,
                "message": message[:500],
            }
        )
    except OSError as exc:  # the history is best effort here: the hook must still exit 0
        log.warning("hook.history_unwritable", error=str(exc))


@contextmanager
def writing_turn(state: Path) -> Iterator[None]:
    """One writing hook at a time per state folder, in the order they asked (whichever process runs them:
    the hook daemon's queue, or detached processes)."""
    import fcntl

    state.mkdir(parents=True, exist_ok=True)
    with open(state / "hooks.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_hook(
    raw: bytes,
    settings: Settings,
    transcript_roots: Sequence[Path] | None = None,
    audience: str | None = None,
    detach_end: bool = True,
    bound: bool = False,
    openings: Openings | None = None,
) -> str:
    """What the command prints for one payload: a JSON line, or "" (always "", whatever fails).

    ``audience``: the requester the hooks speak for (an HTTP hook's token's); default ``hook_audience``.
    ``detach_end``, ``openings``: see :class:`Hooks`."""
    event = "unknown"
    started = time.perf_counter()
    try:
        payload = parse_payload(raw)
        event = str(payload["hook_event_name"])
        if openings is None and payload.get("core") == FIRST_PROMPT:  # the hook tool's argument
            openings = Openings(settings.state)
        output = Hooks(settings, transcript_roots, audience, detach_end, bound, openings).handle(payload)
    except Exception as exc:  # a memory failure never fails the agent
        record_failure(settings, event, exc)
        return ""
    log.info("hook.done", hook=event, ms=round((time.perf_counter() - started) * 1000, 1))
    return json.dumps(output) if output is not None else ""


def main(
    argv: Sequence[str] | None = None, raw: bytes | None = None, then: Callable[[Settings], None] | None = None
) -> int:
    """``scriptorium hook [--state DIR]``: read a payload on stdin, print memory's answer; always exit 0.

    ``raw`` is the payload when the caller read it already; ``then`` runs once the answer is out (the
    hook daemon's command starts a daemon there for the next prompt: :mod:`scriptorium.runtimes.hooks.daemon`).
    """
    import argparse

    private_umask()
    parser = argparse.ArgumentParser(prog="scriptorium hook", description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", type=Path, help="state folder (default $SCRIPTORIUM_STATE, else ./.scriptorium)")
    parser.add_argument("--finish", nargs="+", metavar="SESSION", help=argparse.SUPPRESS)
    parser.add_argument("--background", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--confined", action="store_true", help=argparse.SUPPRESS)  # (the MCP hook tool's)
    parser.add_argument(
        "--plugin",
        action="store_true",
        help="run as the Claude Code plugin's hook (it stands down where the settings files run ours)",
    )
    args, unknown = parser.parse_known_args(argv)  # a newer plugin's flag must never block the prompt
    try:
        settings = Settings(**({"state": args.state} if args.state else {}))
    except Exception as exc:  # a bad environment must not block the agent either
        print(f"scriptorium hook: settings: {exc}", file=sys.stderr)
        return 0
    configure_logging(settings.log_level)
    if unknown:
        log.warning("hook.unknown_arguments", arguments=unknown)
    if settings.state.is_dir():
        make_private(settings.state)
    if args.finish:
        try:
            write_sessions(settings, args.finish, force=True)
        except Exception as exc:
            record_failure(settings, "SessionEnd", exc)
        return 0
    if args.background:  # a writing hook the command handed off: run it in turn, print nothing
        payload = sys.stdin.buffer.read(MAX_PAYLOAD + 1) if raw is None else raw
        time.sleep(settings.hook_write_settle_s)  # the runtime finishes its turn first (runtimes/writes.py)
        roots = None
        if args.confined:  # from the MCP server's hook tool, which a model can call too
            from scriptorium.runtimes.catalog import transcript_roots

            roots = transcript_roots(settings.hook_transcript_roots)
        with writing_turn(settings.state):
            run_hook(payload, settings, transcript_roots=roots, detach_end=False)
        return 0
    out = run_hook(sys.stdin.buffer.read(MAX_PAYLOAD + 1) if raw is None else raw, settings, detach_end=False)
    if out:
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    if then is not None:
        then(settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
