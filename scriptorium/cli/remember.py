"""``scriptorium remember TEXT [--project [DIR]]``: a standing instruction, in the user's words, into the
resident block (:mod:`scriptorium.changes.remember`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from scriptorium.cli.output import EXIT_OK, emit

if TYPE_CHECKING:
    from scriptorium.settings import Settings


def cmd_remember(args: argparse.Namespace, settings: Settings) -> int:
    from scriptorium.changes.remember import remember
    from scriptorium.workspace.workspace import MemoryWorkspace

    project = None if args.project is None else Path(args.project).expanduser().resolve()
    store = settings.session_store() if project is not None else None
    try:
        with MemoryWorkspace(settings.memory_dir, settings.workspace_config()) as workspace:
            result = remember(workspace, args.text, project=project, store=store)
    finally:
        if store is not None:
            store.close()
    where = f" for the project at {project}" if project is not None else " for every project"
    emit(args, result.to_dict(), f"remembered{where}: {args.text.strip()} (revision {result.revision})")
    return EXIT_OK


def remember_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("text", help="the instruction or preference, as you would say it")
    sub.add_argument(
        "--project",
        nargs="?",
        const=".",
        default=None,
        metavar="DIR",
        help="keep it for the project of DIR only (default DIR: the current folder; its git work tree, known "
        "by its remote); without it, it applies in every project",
    )
