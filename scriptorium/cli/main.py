"""``scriptorium`` command line: thin verbs over the workspace, reason codes → exit codes.

Exit codes: 0 success; 1 an unexpected failure (UNCLASSIFIED_ERROR); 2 bad usage; 3 rejected (permanent:
the same input fails again); 75 temporary failure (retryable, e.g. LOCK_HELD); 130 interrupted (Ctrl-C); 141
its output's reader went away (``scriptorium memory search … | head -1``, :mod:`scriptorium.cli.entry`).
A failure prints its reason code and what to do, never a traceback unless ``--debug`` asks for it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

# Only the parser's own needs load here: ``scriptorium --help`` and every command's ``--help`` cost a bare
# Python start and little more. Each handler imports what it uses (the workspace, git, settings, the
# recall index…) when it runs (issue 56; tests/cli/test_imports.py keeps it so).
from scriptorium.cli.changes import register as register_change_verbs
from scriptorium.cli.cluster import register as register_cluster_commands
from scriptorium.cli.output import EXIT_OK, EXIT_REJECTED, EXIT_RETRY, emit
from scriptorium.cli.parser import Arguments, Commands, Declare, Handler, subcommands
from scriptorium.cli.recall import register as register_recall_verbs
from scriptorium.cli.runtime import register as register_runtime_commands
from scriptorium.errors import InvalidArgument, NotFound, ScriptoriumError, WorkspaceMissing
from scriptorium.locations import make_private, private_umask, where

if TYPE_CHECKING:
    from scriptorium.settings import Settings
    from scriptorium.workspace import MemoryWorkspace, TxnResult


def _result_text(result: TxnResult) -> str:
    if not result.changed:
        return f"nothing changed (revision {result.revision[:12]})"
    lines = [f"revision {result.revision[:12]} ({len(result.changed_files)} files changed)"]
    lines += [f"  {path}" for path in result.changed_files]
    if result.created_ids:
        lines.append("created records: " + ", ".join(result.created_ids))
    if result.core_omitted_ids:
        lines.append(f"core.md omits {len(result.core_omitted_ids)} record(s) over the token budget")
    if not result.git_committed:
        lines.append("warning: installed, but the git commit failed; it is retried on the next open")
    return "\n".join(lines)


def _open(settings: Settings) -> MemoryWorkspace:
    from scriptorium.workspace.workspace import MemoryWorkspace

    return MemoryWorkspace(settings.memory_dir, settings.workspace_config())


def missing_memory(settings: Settings) -> WorkspaceMissing:
    """``WORKSPACE_NOT_INITIALIZED`` naming the state this command read and why it is that one."""
    return WorkspaceMissing(
        f"no memory at {where(settings.state)}",
        guidance="run `scriptorium setup claude-code|codex|pi|openclaw`, or `scriptorium memory init --state "
        f"{settings.state}`, or name the memory you mean with --state DIR",
    )


def cmd_init(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.workspace.workspace import MemoryWorkspace

    with MemoryWorkspace.init(settings.memory_dir, settings.workspace_config()) as ws:
        emit(args, {"memory": str(ws.root), "revision": ws.revision}, f"memory workspace at {ws.root}")
    return EXIT_OK


def _budget_line(budget: dict[str, object]) -> str:
    """Today's spend of the costly writers against their caps, as ``memory status`` prints it."""

    def against(used: object, limit: object, unit: str) -> str:
        return f"{used:,}/{limit:,} {unit}" if limit else f"{used:,} {unit} (no cap)"

    runs, tokens = (
        against(budget["runs"], budget["runs_limit"], "runs"),
        against(budget["tokens"], budget["tokens_limit"], "tokens"),
    )
    then = "the verbatim writer writes" if budget["over_budget"] == "verbatim" else "passes wait"
    past = f"spent: {then} until 00:00 UTC" if budget["spent"] else f"past it {then}"
    return f"writer budget {budget['day']} (UTC): {runs}, {tokens}; {past}"


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.workspace.packing import pack_state
    from scriptorium.workspace.writer_history import WriterHistory
    from scriptorium.writing.budget import WriterBudget

    with _open(settings) as ws:
        stats = ws.stats()  # kept by every install: nothing is counted again
        core = ws.core_rendering()
        payload: dict[str, object] = {
            "memory": str(ws.root),
            "revision": stats.tree,
            "commit": ws.commit,
            "topics": stats.topics,
            "records": stats.records,
            "sources": stats.sources,
            "core_tokens": core.tokens,
            "core_budget": core.budget,
            "core_omitted_ids": list(core.omitted_ids),
            "staging_in_use": ws.staging_sweep.live,
            "staging_orphans_swept": ws.staging_sweep.removed,
            "writer": settings.writer_backend(),
            # what the LLM and agent writers spent today (the verbatim writer is never counted)
            "writer_budget": {
                **WriterBudget(ws.root / ".scriptorium", settings.writer_budget()).status(),
                "over_budget": settings.writer_over_budget,
            },
            "writer_history": WriterHistory(ws.root / ".scriptorium").recent(args.history),
            "git": pack_state(ws.root / ".git").to_dict(),  # a few folder listings and index headers
        }
    human = "\n".join(
        f"{key}: {value}"
        for key, value in payload.items()
        if key not in ("core_omitted_ids", "writer_budget", "writer_history", "git")
    )
    budget = payload["writer_budget"]
    assert isinstance(budget, dict)
    human += "\n" + _budget_line(budget)
    git = payload["git"]
    assert isinstance(git, dict)
    human += (
        f"\ngit: {git['packs']} pack(s) of {git['packed_objects']} objects ({git['packed_kib']} KiB), "
        f"about {git['loose_objects_estimate']} loose" + (", repacking" if git["repacking"] else "")
    )
    history = payload["writer_history"]
    assert isinstance(history, list)
    if history:
        human += "\nrecent passes:"
        for entry in history:
            reason = f" {entry.get('reason')}" if entry.get("reason") else ""
            retry = " (retryable)" if entry.get("retryable") else ""
            human += (
                f"\n  {entry.get('at', '')[:19]} {entry.get('op')} {entry.get('session') or '-'}: "
                f"{entry.get('outcome')}{reason}{retry}, pending {entry.get('pending_nodes', 0)}"
                f" [{entry.get('writer', '?')}]"
            )
    emit(args, payload, human)
    return EXIT_OK


def _read_input(name: str) -> str:
    return sys.stdin.read() if name == "-" else Path(name).read_text(encoding="utf-8")


def cmd_edit(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.workspace.results import TopicChange

    with _open(settings) as ws:
        revision = ws.revision
        try:
            current: str | None = ws.read_topic(args.topic)
        except NotFound:
            current = None
        if args.from_file:
            text = _read_input(args.from_file)
        else:
            text = _run_editor(args.topic, current or "")
            if text == (current or ""):
                emit(args, {"changed_files": []}, "no changes")
                return EXIT_OK
        action: Literal["create", "update"] = "update" if current is not None else "create"
        try:
            result = ws.apply_changes(
                [TopicChange(args.topic, action, text)],
                message=args.message or f"Edit {args.topic}",
                expected_revision=revision,
            )
        except ScriptoriumError:
            if not args.from_file:
                draft = _save_draft(args.topic, text)
                print(f"your edit is kept in {draft}; fix it and run with --from {draft}", file=sys.stderr)
            raise
    emit(args, result.to_dict(), _result_text(result))
    return EXIT_OK


def _run_editor(topic: str, text: str) -> str:
    import shlex
    import subprocess
    import tempfile

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="scriptorium-edit-") as tmp:
        path = Path(tmp) / Path(topic).name
        path.write_text(text, encoding="utf-8")
        completed = subprocess.run([*shlex.split(editor), str(path)], check=False)
        if completed.returncode != 0:
            raise InvalidArgument(f"editor {editor!r} exited with status {completed.returncode}; nothing saved")
        return path.read_text(encoding="utf-8")


def _save_draft(topic: str, text: str) -> Path:
    import tempfile

    fd, name = tempfile.mkstemp(prefix="scriptorium-draft-", suffix="-" + Path(topic).name)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return Path(name)


def cmd_archive(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.workspace.sources import SourceMessage

    try:
        items = json.loads(_read_input(args.file))
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{args.file} is not JSON: {exc}") from exc
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise InvalidArgument("expected a JSON list of message objects")
    fields = ("provider", "thread", "message", "role", "time", "text")
    messages: list[SourceMessage] = []
    for number, item in enumerate(items):
        missing = [name for name in fields if not isinstance(item.get(name), str)]
        if missing:
            raise InvalidArgument(f"message {number} lacks string field(s): {', '.join(missing)}")
        trust = item.get("trust", "trusted")
        if trust not in ("trusted", "pending"):
            raise InvalidArgument(f"message {number}: trust must be trusted or pending")
        messages.append(
            SourceMessage(
                provider=item["provider"],
                thread=item["thread"],
                message=item["message"],
                role=item["role"],
                time=item["time"],
                text=item["text"],
                trust=trust,
            )
        )
    with _open(settings) as ws, ws.lock():
        paths = ws.archive_sources(messages)
        result = ws.transact(lambda stage: None, message=f"Archive {len(paths)} source(s)", appended_sources=paths)
    emit(args, result.to_dict(), _result_text(result))
    return EXIT_OK


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from tqdm import tqdm

    from scriptorium.composition import build_runtime
    from scriptorium.producers.ingest import import_paths
    from scriptorium.writing.outcomes import Failed, Pending, Written

    paths = [Path(p).expanduser() for p in args.paths]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise InvalidArgument(f"no such file: {', '.join(missing)}")
    runtime = build_runtime(settings)
    try:
        report = import_paths(runtime.store, paths, args.audience, redactor=settings.redactor())
        if not report.files:
            raise _nothing_recognized(args.paths, report.unrecognized)
        if report.unrecognized and not args.json:
            print("\n".join(f"not a transcript: {name}" for name in report.unrecognized), file=sys.stderr)
        added = report.new_nodes
        service = runtime.service
        shown = not args.json and sys.stderr.isatty()
        # The bar's total costs a walk of every session: only when there is a bar to show it.
        todo = sum(service.pending_messages(sid) for sid in report.sessions) if shown else None
        topics: set[str] = set()
        totals = {"records": 0, "sources": 0, "batches": 0, "failed": 0}
        failures: list[dict[str, object]] = []
        with tqdm(total=todo, unit="msg", disable=not shown) as bar:
            service.on_batch = lambda batch, result: bar.update(len(batch.messages))
            for session_id in report.sessions:
                if session_id not in report.grown and service.written_through(session_id):
                    continue  # its transcript gained nothing and every turn is written: no pass to run
                outcome = service.write(session_id, force=True)
                if isinstance(outcome, Written):
                    topics.update(p for p in outcome.changed_files if p.startswith("topics/"))
                    totals["records"] += outcome.records_created
                    totals["batches"] += outcome.batches
                    totals["sources"] += outcome.sources_archived
                elif isinstance(outcome, Pending | Failed):
                    totals["failed"] += 1
                    failures.append({"session": session_id, "reason": str(outcome.reason), "message": outcome.message})
        payload: dict[str, object] = {
            **report.to_dict(),
            **totals,
            "topics": sorted(topics),
            "revision": runtime.workspace.revision,
            "failures": failures,
        }
    finally:
        runtime.close()
    if topics:
        from scriptorium.recall.index import RecallIndex

        RecallIndex.refresh_after_writes(settings.memory_dir)  # the next process's search loads it as it is
    human = (
        f"{len(report.sessions)} session(s), {added} new node(s): wrote {totals['records']} record(s) into "
        f"{len(topics)} topic(s) from {totals['sources']} source(s) in {totals['batches']} batch(es); "
        f"revision {str(payload['revision'])[:12]}"
    )
    if failures:
        human += "\n" + "\n".join(f"failed {f['session']}: {f['reason']}: {f['message']}" for f in failures)
    emit(args, payload, human)
    return EXIT_OK if not failures else EXIT_REJECTED


def _nothing_recognized(named: Sequence[str], unrecognized: Sequence[str]) -> InvalidArgument:
    """``ingest`` found no transcript it reads: the files it looked at and did not recognize, or none at all."""
    where_ = f"not a transcript: {', '.join(unrecognized)}" if unrecognized else f"no files in {', '.join(named)}"
    return InvalidArgument(
        f"nothing imported, {where_}",
        guidance="name transcript files or their folders: Claude Code's ~/.claude/projects, Codex's "
        "~/.codex/sessions, pi's ~/.pi/agent/sessions, OpenClaw's agent database, SpecStory's .specstory/history "
        "or Aider's chat history (`scriptorium ingest --help`)",
    )


def cmd_rebuild(args: argparse.Namespace, settings: Settings) -> int:
    with _open(settings) as ws:
        result = ws.rebuild_views()
    emit(args, result.to_dict(), _result_text(result))
    return EXIT_OK


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    """Bring the workspace to the current file layout now (any command's open does it too), or with
    ``--dry-run`` say what would move; progress lines go to stderr."""
    from scriptorium.workspace import layout
    from scriptorium.workspace.workspace import MemoryWorkspace

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with MemoryWorkspace(settings.memory_dir, settings.workspace_config(), migrate=False) as ws:
        report = layout.migrate(ws, dry_run=args.dry_run, progress=progress)
    moved = report["sources_moved"] + len(report["topics_moved"])
    verb = "would move" if args.dry_run else "moved"
    lines = [
        f"layout {report['layout_before']} -> {report['layout']}: {verb} {report['sources_moved']} source(s) and "
        f"{len(report['topics_moved'])} conversation topic(s), {report['topics_rewritten']} topic(s) relinked",
        *(f"  {line}" for line in report["topics_moved"]),
    ]
    if not args.dry_run:
        lines.append(f"revision {report['revision'][:12]}" + ("" if moved else " (nothing to move)"))
    emit(args, report, "\n".join(lines))
    return EXIT_OK


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    with _open(settings) as ws:
        print(ws.read_topic(args.topic), end="")
    return EXIT_OK


def _common(sub: argparse.ArgumentParser, handler: Handler) -> argparse.ArgumentParser:
    """Options every command takes."""
    sub.add_argument(
        "--state",
        type=Path,
        default=None,
        help="state folder (default $SCRIPTORIUM_STATE, else the one setup recorded, else the per-user data folder)",
    )
    sub.add_argument("--json", action="store_true", help="print machine-readable JSON")
    sub.add_argument("--debug", action="store_true", help="print the traceback of an unexpected failure")
    sub.set_defaults(handler=handler)
    return sub


def build_parser() -> argparse.ArgumentParser:
    """The whole command line; each command's parser is made when the command line names it
    (:mod:`scriptorium.cli.parser`)."""
    parser = argparse.ArgumentParser(prog="scriptorium", description="Long-term memory for LLM agent runtimes.")
    top = subcommands(parser, dest="group", required=True, metavar="COMMAND")
    top.add_command(
        "memory", "read and edit the memory workspace", _memory_verbs, description="Memory workspace verbs."
    )

    def ingest(sub: argparse.ArgumentParser) -> None:
        _common(sub, cmd_ingest)
        sub.add_argument("paths", nargs="+", help="transcript files or folders")
        sub.add_argument(
            "--audience",
            metavar="REQUESTER",
            default=None,
            help="sessions first imported now belong to this requester (default: shared)",
        )

    top.add_command(
        "ingest",
        "import transcripts and write them into memory",
        ingest,
        description="Import transcripts of Claude Code, Codex CLI and pi (files, or folders of *.jsonl such "
        "as ~/.claude/projects, ~/.codex/sessions and ~/.pi/agent/sessions; the format is detected per file) "
        "into the session store, reading only what each file gained since the last import, and write every "
        "unwritten turn into memory (forced passes). Running it twice writes nothing new.",
    )
    from scriptorium.cli.remember import cmd_remember, remember_arguments

    _declare(top)(
        "remember",
        cmd_remember,
        'keep a standing instruction ("always run the linter before committing") in every new session\'s '
        "resident block, or one project's (--project)",
        remember_arguments,
    )
    register_runtime_commands(top, _common)
    register_cluster_commands(_declare(top))
    return parser


def _declare(commands: Commands) -> Declare:
    """Add commands to ``commands`` that take the common options, their help also their description."""

    def declare(name: str, handler: Handler, help_text: str, arguments: Arguments | None = None) -> None:
        def made(sub: argparse.ArgumentParser) -> None:
            _common(sub, handler)
            if arguments is not None:
                arguments(sub)

        commands.add_command(name, help_text, made, description=help_text)

    return declare


def _memory_verbs(memory: argparse.ArgumentParser) -> None:
    verb = _declare(subcommands(memory, dest="verb", required=True, metavar="VERB"))
    verb("init", cmd_init, "create the memory workspace at <state>/memory")
    verb(
        "status",
        cmd_status,
        "show revision, counts, the resident block's token use and recent passes",
        lambda sub: sub.add_argument("--history", type=int, default=10, help="how many recent writer passes to show"),
    )

    def edit(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("topic", help="topic path, e.g. topics/people/alice.md")
        sub.add_argument("--from", dest="from_file", help="take the new content from FILE ('-' for stdin)")
        sub.add_argument("-m", "--message", help="commit message")

    verb("edit", cmd_edit, "edit one topic in $EDITOR (or --from FILE) through a validated transaction", edit)
    verb(
        "show",
        cmd_show,
        "print one topic's installed Markdown",
        lambda sub: sub.add_argument("topic", help="topic path"),
    )
    verb(
        "archive",
        cmd_archive,
        "archive conversation messages (JSON list) as sources and commit them",
        lambda sub: sub.add_argument(
            "file", help="JSON file of {provider, thread, message, role, time, text[, trust]} ('-': stdin)"
        ),
    )
    verb("rebuild", cmd_rebuild, "re-render the derived views from the topics")
    verb(
        "migrate",
        cmd_migrate,
        "move a workspace of an earlier file layout to the current one (sharded sources, topics by month)",
        lambda sub: sub.add_argument("--dry-run", action="store_true", help="say what would move; change nothing"),
    )
    register_change_verbs(verb)
    register_recall_verbs(verb)


def main(argv: Sequence[str] | None = None) -> int:
    private_umask()  # state, sessions, tokens and git objects are the user's alone, whatever the umask
    parser = build_parser()
    args = parser.parse_args(argv)
    # Past the parser (a --help has printed and exited): what every command runs on.
    from scriptorium.logs import configure_logging

    overrides = {"state": args.state} if getattr(args, "state", None) else {}
    try:
        settings = _settings(overrides)
    except ScriptoriumError as exc:
        print(
            json.dumps(exc.to_dict(), indent=2) if getattr(args, "json", False) else _error_text(exc), file=sys.stderr
        )
        return EXIT_REJECTED
    configure_logging(settings.log_level)
    if settings.state.is_dir():
        make_private(settings.state)  # a state an earlier release (or another umask) left open to others
    handler: Handler = args.handler
    if settings.backend == "none" and args.group in ("memory", "ingest", "mcp", "remember"):
        print("error INVALID_ARGUMENT: memory is disabled (SCRIPTORIUM_BACKEND=none)", file=sys.stderr)
        return EXIT_REJECTED
    try:
        try:
            return handler(args, settings)
        except WorkspaceMissing as exc:
            from scriptorium.workspace.paths import is_workspace

            if is_workspace(settings.memory_dir):
                raise
            raise missing_memory(settings) from exc
    except ScriptoriumError as exc:
        _traceback_if_asked(args)
        print(json.dumps(exc.to_dict(), indent=2) if args.json else _error_text(exc), file=sys.stderr)
        return EXIT_RETRY if exc.retryable else EXIT_REJECTED
    except BrokenPipeError:
        raise  # the reader of our output went away: the entry point ends quietly
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        _traceback_if_asked(args)
        return _unexpected(args, exc)


EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def _settings(overrides: dict[str, object]) -> Settings:
    """The settings, or a bad one named on one line (INVALID_ARGUMENT): which variable, what it held, why."""
    from pydantic import ValidationError

    from scriptorium.settings import Settings

    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = ".".join(str(part) for part in error["loc"])
            variable = "SCRIPTORIUM_" + name.upper() if name else "a setting"
            problems.append(f"{variable}={error.get('input')!r}: {error['msg']}")
        raise InvalidArgument("bad setting " + "; ".join(problems)) from None


def _traceback_if_asked(args: argparse.Namespace) -> None:
    if getattr(args, "debug", False):
        import traceback

        traceback.print_exc()


def _unexpected(args: argparse.Namespace, exc: Exception) -> int:
    """A failure without a reason of ours: one line, and how to see more. A file the command could not read or
    write is the user's to fix (INVALID_ARGUMENT, exit 3); anything else is UNCLASSIFIED_ERROR (exit 1)."""
    from scriptorium.errors import ReasonCode

    reason = ReasonCode.INVALID_ARGUMENT if isinstance(exc, OSError) else ReasonCode.UNCLASSIFIED_ERROR
    error = ScriptoriumError(
        str(exc) or type(exc).__name__,
        reason=reason,
        guidance="" if getattr(args, "debug", False) else "run it again with --debug to see the traceback",
    )
    if reason == ReasonCode.UNCLASSIFIED_ERROR:
        error.message = f"{type(exc).__name__}: {error.message}"
    print(
        json.dumps(error.to_dict(), indent=2) if getattr(args, "json", False) else _error_text(error), file=sys.stderr
    )
    return EXIT_REJECTED if reason == ReasonCode.INVALID_ARGUMENT else EXIT_FAILED


def _error_text(exc: ScriptoriumError) -> str:
    lines = [f"error {exc.reason}: {exc.message}"]
    if exc.guidance:
        lines.append(f"how to fix: {exc.guidance}")
    if exc.rejected_text:
        lines.append("rejected:\n" + exc.rejected_text)
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
