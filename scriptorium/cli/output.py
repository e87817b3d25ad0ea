"""What every command shares: exit codes and printing a result as JSON or text."""

from __future__ import annotations

import argparse
import json

EXIT_OK = 0
EXIT_REJECTED = 3
EXIT_RETRY = 75


def emit(args: argparse.Namespace, payload: dict[str, object], human: str) -> None:
    """Print ``payload`` as JSON with ``--json``, else the human text."""
    print(json.dumps(payload, indent=2, default=str) if getattr(args, "json", False) else human)
