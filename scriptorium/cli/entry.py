"""The ``scriptorium`` console script: ``hook`` runs on every prompt, so it skips the full CLI's imports
(and, for the context events, asks the hook daemon first: :mod:`scriptorium.runtimes.daemon`)."""

from __future__ import annotations

import sys

from scriptorium.locations import private_umask


def main() -> int:
    private_umask()  # whatever umask the runtime or the shell started us with, the memory is the user's alone
    if len(sys.argv) > 1 and sys.argv[1] == "hook":
        from scriptorium.runtimes.daemon import command

        return command(sys.argv[2:])
    from scriptorium.cli.main import main as cli_main

    return cli_main()
