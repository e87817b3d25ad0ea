"""``scriptorium setup | hook | token | mcp``: the commands that plug memory into agent runtimes."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from scriptorium.cli.output import EXIT_OK, EXIT_REJECTED, emit
from scriptorium.cli.parser import Arguments, Commands, Handler, subcommands
from scriptorium.errors import InvalidArgument

if TYPE_CHECKING:
    from scriptorium.runtimes.setup.command import Change
    from scriptorium.runtimes.setup.extensions import Requester
    from scriptorium.runtimes.setup.resident import Resident
    from scriptorium.settings import Settings

Common = Callable[[argparse.ArgumentParser, Handler], argparse.ArgumentParser]


def cmd_setup(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.locations import ignore_in_git, record_state
    from scriptorium.runtimes.setup.command import deselect_writer, install, select_writer, uninstall
    from scriptorium.runtimes.setup.extensions import EXTENSIONS
    from scriptorium.workspace.workspace import MemoryWorkspace

    settings = settings.model_copy(update={"state": _setup_state(args, settings)})
    found = None
    if args.uninstall:
        extension = args.runtime in EXTENSIONS  # pi's and OpenClaw's carry no token
        revoked = None if extension else _revoke_hook_token(args, settings)
        changes = uninstall(args.runtime, args.scope, project=args.project)
        changes += [revoked] if revoked else []
        writer = deselect_writer(settings.state, args.runtime)
        changes += [writer] if writer.action != "unchanged" else []
        if args.scope == "user":
            _follow(args.runtime, settings.state, on=False)
    else:
        if args.runtime in EXTENSIONS:  # refused before anything is made
            from scriptorium.runtimes.setup.command import check_extension

            if args.scope != "user" or args.server or args.trust_hooks is not None:
                raise InvalidArgument(
                    f"{args.runtime} takes its extension at user scope, without --server or --trust-hooks"
                )
            check_extension(args.runtime, Path.home())
        if args.server:
            _check_server(args)
        if _wants_trust(args):  # Codex on a terminal: the trust step now, rather than as a next step
            args.trust_hooks = "codex"
        if not args.skip_runtime_check:  # the runtime, asked its version before anything is made
            from scriptorium.runtimes.setup.command import check_runtime

            found = check_runtime(args.runtime, args.trust_hooks if args.runtime == "codex" else None)
        requester = _extension_requester(args, settings)
        if args.scope == "project":
            ignore_in_git(settings.state)
        MemoryWorkspace.init(settings.memory_dir, settings.workspace_config()).close()
        changes = install(
            args.runtime,
            settings.state,
            args.scope,
            project=args.project,
            allow_updates=args.allow_updates,
            trust_hooks=args.trust_hooks,
            resident=_resident(args, settings),
            requester=requester if args.runtime in EXTENSIONS else None,
        )
        if args.scope == "user":  # every command, from any folder, finds this memory
            record_state(settings.state)
        if args.scope == "user" and not args.server and requester is None:
            _follow(args.runtime, settings.state)
        if args.runtime not in EXTENSIONS and _wants_writer(args):  # pi and OpenClaw: no headless writer mode
            changes.append(select_writer(settings.state, args.runtime))
    next_step = None if args.uninstall else _next_step(args)
    payload = {
        "runtime": args.runtime,
        "runtime_version": found.text if found else None,
        "state": str(settings.state.resolve()),
        "changes": [{"path": str(c.path), "action": c.action} for c in changes],
        "writer": settings.writer_backend(),
        "next": next_step,
    }
    human = "\n".join(f"{c.action:>9}  {c.path}" for c in changes)
    if found is not None:
        human += f"\n  runtime  {args.runtime} {found.text} ({found.executable})"
    human += f"\n   memory  {payload['state']}"
    human += f"\n   writer  {payload['writer']}"
    if not args.uninstall and args.server:
        human += (
            f"\n     note  the hooks and the MCP server now reach {args.server}: keep `scriptorium serve --port "
            "PORT` running there (what it misses while down, its first sweep once back imports)"
        )
    if not args.uninstall and payload["writer"] != args.runtime and args.runtime not in EXTENSIONS:
        human += f" (run again with --writer to write memory with {args.runtime} on your own login)"
    if next_step:
        human += f"\n     next  {next_step}"
    emit(args, payload, human)
    return EXIT_OK


def _next_step(args: argparse.Namespace) -> str:
    """The one thing to do after setup for memory to reach the runtime."""
    if args.runtime == "codex" and args.trust_hooks is None:
        return (
            "trust the new hooks: `scriptorium setup codex --trust-hooks` (or run `codex` once in a terminal and "
            "accept its prompt); until then Codex skips them"
        )
    starts = {
        "claude-code": "start a new Claude Code session (`claude`)",
        "codex": "start a new Codex session (`codex`)",
        "pi": "start a new pi session (`pi`)",
        "openclaw": "start a new OpenClaw session (`openclaw`)",
    }
    return f"{starts.get(args.runtime, 'start a new session')}: memory comes with its first prompt"


def _check_server(args: argparse.Namespace) -> None:
    """``--server`` that cannot work: INVALID_ARGUMENT before anything else is asked or made."""
    from scriptorium.runtimes.setup.command import check_resident
    from scriptorium.runtimes.setup.resident import server_url

    server_url(args.server)
    check_resident(args.runtime, args.scope)


def _follow(runtime: str, state: Path, on: bool = True) -> None:
    """The session watcher imports every session the runtime starts from now on whether or not its hooks run
    (Codex skips them until they are trusted): user scope, the owner's memory, hooks run here — what the hooks
    would import (:func:`~scriptorium.runtimes.hooks.watcher.follow`); ``on`` False: no more (uninstall)."""
    from scriptorium.runtimes.catalog import runtime as named
    from scriptorium.runtimes.hooks.watcher import follow, unfollow

    (follow if on else unfollow)(state, named(runtime).transcripts())


def _extension_requester(args: argparse.Namespace, settings: Settings) -> Requester | None:
    """``--token``: the requester a pi or OpenClaw extension speaks for (a live propose or write token of
    this memory: FORBIDDEN else, before anything is installed); None without it."""
    from scriptorium.runtimes.setup.extensions import EXTENSIONS

    if args.token is None:
        return None
    if args.runtime not in EXTENSIONS:
        raise InvalidArgument("--token is for the pi and OpenClaw extensions")
    from scriptorium.runtimes.mcp.server import stdio_principal
    from scriptorium.runtimes.setup.extensions import Requester

    principal = stdio_principal(settings, args.token)
    if principal.requester is None:
        raise InvalidArgument("--token names a requester's propose or write token, not the owner's")
    return Requester(principal.requester, args.token)


def _resident(args: argparse.Namespace, settings: Settings) -> Resident | None:
    """``--server``: the server, with the hooks' runtime token (the one already wired in, while it is live)
    and the owner's token for MCP; None without it."""
    if not args.server:
        return None
    from scriptorium.access.owner import owner_token
    from scriptorium.access.tokens import TokenStore
    from scriptorium.runtimes.setup.command import check_resident
    from scriptorium.runtimes.setup.resident import Resident, server_url

    url = server_url(args.server)
    check_resident(args.runtime, args.scope)  # before any token is made
    tokens = TokenStore(settings.state)
    known = _wired_hook_token(args)
    record = tokens.verify(known) if known else None
    if record is None or record.scope != "runtime" or record.requester is not None:
        _record, known = tokens.create("runtime", None, None, [])
    return Resident(url, str(known), owner_token(settings.state)[0])


def _wired_hook_token(args: argparse.Namespace) -> str | None:
    """The runtime token the HTTP hooks in the settings file setup targets carry (None: none)."""
    from scriptorium.runtimes.setup.command import plan
    from scriptorium.runtimes.setup.resident import hook_token_in

    return hook_token_in(plan(args.runtime, args.scope, Path.home(), args.project or Path.cwd()).hooks_file)


def _revoke_hook_token(args: argparse.Namespace, settings: Settings) -> Change | None:
    """Uninstall: the runtime token our HTTP hooks carried is revoked (a Change for the token file)."""
    from scriptorium.access.tokens import TokenStore
    from scriptorium.runtimes.setup.command import Change

    known = _wired_hook_token(args)
    tokens = TokenStore(settings.state)
    record = tokens.verify(known) if known else None
    if record is None:
        return None
    tokens.revoke(record.id)
    return Change(tokens.path, "cleaned")


def _setup_state(args: argparse.Namespace, settings: Settings) -> Path:
    """The memory setup wires in: the one named (``--state``, ``$SCRIPTORIUM_STATE``); else, for a project,
    ``<project>/.scriptorium``; else the user's (the recorded one, or the per-user data folder)."""
    from scriptorium.locations import PROJECT_STATE

    if args.scope == "project" and args.state is None and not os.environ.get("SCRIPTORIUM_STATE"):
        return (args.project or Path.cwd()) / PROJECT_STATE
    return settings.state


def _at_terminal() -> bool:
    """Whether a person is at the terminal (stdin and stdout both one): only then does setup ask."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def _wants_writer(args: argparse.Namespace) -> bool:
    """``--writer`` / ``--no-writer``, else ask when a person is at the terminal (never in scripts)."""
    from scriptorium.runtimes.setup.command import writer_offer

    if args.writer is not None:
        return bool(args.writer)
    if args.json or not _at_terminal():
        return False
    answer = input(
        f"Write memory with {writer_offer(args.runtime)} on your own login? One headless run per batch of "
        "about 16k tokens of conversation, billed to that login. [y/N] "
    )
    return answer.strip().lower() in ("y", "yes")


def _wants_trust(args: argparse.Namespace) -> bool:
    """``setup codex`` without ``--trust-hooks``, a person at the terminal: ask whether to trust the new hooks
    now (Codex skips hooks it has not trusted); never in scripts, never with ``--json`` or ``--server``."""
    if args.runtime != "codex" or args.trust_hooks is not None or args.server or args.json:
        return False
    if not _at_terminal():
        return False
    answer = input("Trust the new hooks now, so that Codex runs them (as accepting its prompt would)? [Y/n] ")
    return answer.strip().lower() in ("", "y", "yes")


def cmd_token_create(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.access.tokens import TokenStore

    record, token = TokenStore(settings.state).create(args.scope, args.requester, args.expires, args.transcripts)
    human = f"token {record.id} (scope {record.scope}; shown once, stored hashed):\n{token}"
    emit(args, {**record.public(), "token": token}, human)
    return EXIT_OK


def cmd_token_list(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.access.tokens import TokenStore

    records = [r.public() for r in TokenStore(settings.state).list()]
    rows = [f"{'id':<12} {'scope':<8} {'requester':<16} {'created':<25} {'last used':<25} expires"]
    rows += [
        f"{r['id']:<12} {r['scope']:<8} {r['requester'] or '-':<16} {(r['created'] or '')[:25]:<25} "
        f"{(r['last_used'] or '-')[:25]:<25} {r['expires'] or '-'}"
        for r in records
    ]
    emit(args, {"tokens": records}, "\n".join(rows))
    return EXIT_OK


def cmd_token_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.access.tokens import TokenStore

    record = TokenStore(settings.state).revoke(args.id)
    emit(args, {"revoked": record.id}, f"revoked {record.id}")
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.runtimes.mcp.server import main as mcp_main
    from scriptorium.workspace.workspace import MemoryWorkspace

    MemoryWorkspace.init(settings.memory_dir, settings.workspace_config()).close()
    return mcp_main(settings, http=args.http, port=args.port)


def cmd_tool(args: argparse.Namespace, settings: Settings) -> int:
    """One model tool call, as the MCP server answers it (the same handlers, the same principal: the owner,
    or ``SCRIPTORIUM_TOKEN``'s requester), for runtimes that call tools through a command (pi, OpenClaw)."""
    import json

    from scriptorium.errors import InvalidArgument
    from scriptorium.runtimes.mcp.server import MemoryMCP, stdio_principal
    from scriptorium.workspace.workspace import MemoryWorkspace

    raw = args.arguments if args.arguments is not None else sys.stdin.read()
    try:
        arguments = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"the tool's arguments are not JSON: {exc.msg} at {exc.pos}") from exc
    if not isinstance(arguments, dict):
        raise InvalidArgument("the tool's arguments must be a JSON object")
    MemoryWorkspace.init(settings.memory_dir, settings.workspace_config()).close()
    result = MemoryMCP(settings, stdio_principal(settings, settings.token)).call(args.name, arguments)
    print(json.dumps(result, ensure_ascii=False, default=str))
    return EXIT_OK if result.get("ok") else EXIT_REJECTED


def cmd_hook(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.runtimes.hooks.command import main as hook_main

    return hook_main(["--state", str(settings.state), *(["--plugin"] if args.plugin else [])])


def register(top: Commands, common: Common) -> None:
    """Add these commands to the CLI's top-level commands (``common`` adds --state and --json). The names
    their arguments offer (runtimes, tools, scopes) load with the command's own parser."""

    def hook(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--state", type=Path, default=None, help="state folder (default $SCRIPTORIUM_STATE)")
        sub.add_argument(
            "--plugin",
            action="store_true",
            help="run as the Claude Code plugin's hook (it stands down where the settings files run ours)",
        )
        sub.set_defaults(handler=cmd_hook, group="hook", json=False)

    top.add_command(
        "hook",
        "answer one Claude Code / Codex hook payload on stdin (always exits 0)",
        hook,
        description="Read one hook payload (SessionStart, UserPromptSubmit, Stop, SubagentStop, PreCompact, "
        "SessionEnd) on stdin and print memory's answer; a memory failure never fails the agent.",
    )

    def tool(sub: argparse.ArgumentParser) -> None:
        from scriptorium.runtimes.base import READ_TOOLS, UPDATE_TOOLS

        common(sub, cmd_tool)
        sub.add_argument("name", choices=[*READ_TOOLS, *UPDATE_TOOLS])
        sub.add_argument("--arguments", default=None, metavar="JSON", help="the call's arguments (default: stdin)")

    top.add_command(
        "tool",
        "run one model tool call (memory_search, memory_get, memory_status, memory_update)",
        tool,
        description="Run one tool call as the MCP server would, for runtimes that call tools through a "
        "command; its arguments as a JSON object (--arguments, else stdin). Prints the tool's JSON answer; "
        f"exits 0 when it is ok, {EXIT_REJECTED} with its reason code when not. SCRIPTORIUM_TOKEN: speak for "
        "that token's requester.",
    )

    def setup(sub: argparse.ArgumentParser) -> None:
        from scriptorium.runtimes.catalog import wired
        from scriptorium.runtimes.setup.extensions import EXTENSIONS

        common(sub, cmd_setup)
        sub.add_argument("runtime", choices=[*wired(), *EXTENSIONS])
        sub.add_argument("--scope", choices=["user", "project"], default="user")
        sub.add_argument("--project", type=Path, default=None, help="project folder for --scope project (default .)")
        sub.add_argument("--uninstall", action="store_true", help="remove what setup added")
        sub.add_argument(
            "--skip-runtime-check",
            action="store_true",
            help="write the settings even when the runtime is not on PATH or is older than they need (setup "
            "otherwise asks `<runtime> --version` first and refuses: RUNTIME_MISSING, RUNTIME_TOO_OLD)",
        )
        sub.add_argument(
            "--allow-updates",
            action="store_true",
            help="let the model call memory_update without asking in a headless run (the read tools always may; "
            "what a model writes stays pending until you promote it)",
        )
        sub.add_argument(
            "--trust-hooks",
            nargs="?",
            const="codex",
            metavar="CODEX",
            help="Codex: record the new hooks as trusted, at the hashes Codex gives them (its app-server), as "
            "trusting them once in the TUI would; CODEX: the codex executable (default: codex on PATH)",
        )
        sub.add_argument(
            "--server",
            default=None,
            metavar="URL",
            help="Claude Code, user scope: post the hooks and reach MCP at a running `scriptorium serve` "
            "(http://127.0.0.1:PORT) instead of starting processes; SessionStart stays a command",
        )
        sub.add_argument(
            "--token",
            default=None,
            metavar="TOKEN",
            help="pi and OpenClaw: speak for this propose or write token's requester (its tools answer as it; its "
            "sessions are its own and their recall shows its records and the shared ones); default: the owner",
        )
        sub.add_argument(
            "--writer",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="also write memory with this runtime's headless mode on your own login (<state>/writer.json); "
            "default: ask at a terminal, no in scripts",
        )

    top.add_command(
        "setup",
        "wire memory into Claude Code, Codex (hooks and the MCP server), pi or OpenClaw (their extension)",
        setup,
        description="Merge Scriptorium's hooks and MCP server into the runtime's own settings, keeping "
        "everything else and a backup; --uninstall removes exactly what was added.",
    )
    top.add_command("token", "scoped tokens beside the owner token", _token_verbs(common), description="Scoped tokens.")

    def mcp(sub: argparse.ArgumentParser) -> None:
        common(sub, cmd_mcp)
        sub.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
        sub.add_argument(
            "--plugin",
            action="store_true",
            help="the Claude Code plugin's server: it lists no tools where Claude Code's settings files name ours",
        )
        sub.add_argument("--port", type=int, default=8766)

    top.add_command(
        "mcp",
        "serve the memory tools and resources over MCP (stdio; --http for streamable HTTP)",
        mcp,
        description="The MCP server: memory_status, memory_get, memory_search and memory_update, the core "
        "block and the topics as resources. stdio by default; --http serves 127.0.0.1:PORT/mcp behind "
        "the owner token.",
    )


def _token_verbs(common: Common) -> Arguments:
    def verbs(tokens: argparse.ArgumentParser) -> None:
        token_verbs = subcommands(tokens, dest="verb", required=True, metavar="VERB")

        def create(sub: argparse.ArgumentParser) -> None:
            from scriptorium.audience import SCOPES

            common(sub, cmd_token_create)
            sub.add_argument(
                "--scope",
                required=True,
                choices=SCOPES,
                help="runtime (events, sessions, core, trusted search), propose (search; changes held for the owner) "
                "or write (search; changes applied within its audience)",
            )
            sub.add_argument(
                "--requester",
                default=None,
                help="who will use it (a name): its reads show the shared records and this requester's own",
            )
            sub.add_argument(
                "--transcripts",
                nargs="+",
                type=Path,
                default=[],
                metavar="DIR",
                help="a requester's runtime token: the folders its hooks' transcripts live in (the hook route imports "
                "from these only; without them it imports nothing for this token)",
            )
            sub.add_argument("--expires", default=None, help="lifetime, e.g. 30d, 12h (default: no expiry)")

        token_verbs.add_command("create", "print a new token (its last word)", create, description="Create a token.")
        token_verbs.add_command(
            "list", "id, scope, requester, created, last used, expiry", lambda sub: common(sub, cmd_token_list)
        )
        token_verbs.add_command(
            "revoke", "revoke a token by its id", lambda sub: common(sub, cmd_token_revoke).add_argument("id")
        )

    return verbs
