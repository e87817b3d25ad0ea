"""The ``scriptorium`` console script: ``hook`` runs on every prompt, so it skips the full CLI's imports."""

from __future__ import annotations

import sys


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "hook":
        from scriptorium.hooks import main as hook_main

        return hook_main(sys.argv[2:])
    from scriptorium.cli import main as cli_main

    return cli_main()
