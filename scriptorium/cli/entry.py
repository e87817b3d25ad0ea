"""The ``scriptorium`` console script: ``hook`` runs for every hook of every turn, so it skips the full CLI's
imports and asks the hook daemon first (:mod:`scriptorium.runtimes.hooks.client`); ``mcp``
over stdio answers the handshake before they are loaded (:mod:`scriptorium.runtimes.mcp.front`).

The runtimes start it without the site module (``python -S``, :data:`scriptorium.runtimes.setup.entries.LAUNCHER`):
the fast paths need the standard library only, and everything else calls :func:`~scriptorium.launch.with_site` first."""

from __future__ import annotations

import os
import sys

from scriptorium.defaults import PRIVATE_UMASK
from scriptorium.launch import with_site

EXIT_PIPE = 141
"""The reader of our output went away (``scriptorium memory search … | head -1``): 128 + SIGPIPE, what a shell
sees of a command the signal ended; nothing more is printed."""


def main() -> int:
    """The command, its output flushed here: a reader that went away ends it quietly (:data:`EXIT_PIPE`), with
    stdout pointed at /dev/null so that the interpreter's own flush at exit does not fail again (the recipe of
    Python's signal module documentation)."""
    try:
        code = _main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout without a descriptor (a test's): nothing to flush at exit
            pass
        return EXIT_PIPE
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # what no command caught (the command line's own failures are theirs, cli.main)
        if "--debug" in sys.argv[1:]:
            raise
        print(f"error UNCLASSIFIED_ERROR: {type(exc).__name__}: {exc}", file=sys.stderr)
        print("how to fix: run it again with --debug to see the traceback", file=sys.stderr)
        return 1


def _main() -> int:
    os.umask(PRIVATE_UMASK)  # whatever umask the runtime or the shell started us with, the memory is the user's
    args = sys.argv[1:]
    if args[:1] == ["hook"]:
        return hook_command(args[1:])
    if args[:1] == ["mcp"] and "--plugin" in args and _settings_wire_mcp():
        from scriptorium.runtimes.mcp.front import stand_down

        return stand_down()
    if args[:1] == ["mcp"] and _front_serves(args[1:]):
        from scriptorium.runtimes.mcp.front import serve

        return serve(_cli_main, args[1:])
    return _cli_main()


def hook_command(argv: list[str]) -> int:
    """``scriptorium hook``: the hook daemon's answer when one is running, else the full command's."""
    if "--finish" in argv:
        with_site()
        from scriptorium.runtimes.hooks.command import main

        return main(argv)
    if any(arg in ("-h", "--help") for arg in argv):
        return _cli_main(["hook", *argv])  # the command line's parser describes it, loading none of the hook
    from scriptorium.runtimes.hooks.client import hand_to_daemon

    raw = hand_to_daemon(argv)
    if raw is None:
        return 0
    with_site()
    from scriptorium.runtimes.hooks.daemon import answer_without_daemon

    return answer_without_daemon(argv, raw)


def _cli_main(argv: list[str] | None = None) -> int:
    with_site()
    from scriptorium.cli.main import main as cli_main

    return cli_main(argv)


def _settings_wire_mcp() -> bool:
    """The Claude Code plugin's server, where the settings files name ours (:mod:`~scriptorium.runtimes.plugin`)."""
    from scriptorium.runtimes.plugin import wired_by_settings

    return wired_by_settings("mcp", os.getcwd())


def _front_serves(args: list[str]) -> bool:
    """Whether ``scriptorium mcp ARGS`` is a stdio server the front may open (not ``--http``, not help, not
    a refusal the command gives before serving: a writer's own run, memory switched off)."""
    from scriptorium.defaults import WRITER_RUN_ENV

    if any(a in ("--http", "-h", "--help") for a in args):
        return False
    return os.environ.get(WRITER_RUN_ENV) != "1" and os.environ.get("SCRIPTORIUM_BACKEND") != "none"
