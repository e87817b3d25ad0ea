"""The ``scriptorium`` console script: ``hook`` runs on every prompt, so it skips the full CLI's imports
(and, for the context events, asks the hook daemon first: :mod:`scriptorium.hook_daemon`)."""

from __future__ import annotations

import sys


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "hook":
        from scriptorium.hook_daemon import command

        return command(sys.argv[2:])
    from scriptorium.cli import main as cli_main

    return cli_main()
