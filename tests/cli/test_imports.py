"""The command line loads what a command runs on and no more: ``scriptorium --help`` and every command's
``--help`` cost about a bare Python start, and ``memory status`` reads the workspace's kept figures without
the recall index (issue 56; the timings: ``benchmarks/cli_start.py``).

Each probe runs in a new interpreter (this one has loaded everything already) and calls the console
script's own entry point in that process, command after command, listing what each left in
``sys.modules``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from scriptorium.cli.main import build_parser
from scriptorium.workspace import MemoryWorkspace

HEAVY = (
    *("git", "gitdb", "numpy", "tiktoken", "Stemmer", "scriptorium.recall.index", "openai", "mcp"),
    *("fastapi", "starlette", "uvicorn", "celery", "redis", "psycopg", "httpx", "tqdm", "re2", "detect_secrets"),
    *("pydantic", "structlog", "rich", "tomlkit", "zstandard"),
    *("scriptorium.settings", "scriptorium.workspace.workspace", "scriptorium.sessions.sqlite"),
)
"""What no ``--help`` may load: each costs a bare Python start's worth or more (the settings alone, with
pydantic, several)."""

NOT_FOR_STATUS = (
    *("numpy", "Stemmer", "scriptorium.recall.index", "openai", "mcp", "fastapi", "uvicorn", "celery"),
    *("redis", "psycopg", "httpx", "tqdm", "scriptorium.sessions.sqlite", "tiktoken"),
    "structlog",  # nothing it does is logged at the CLI's level (WARNING); structlog loads at the first event
)
"""What ``memory status`` does not read: the recall index and its numpy, the writer's model client, the
servers, the session store, the tokenizer (the resident block's token count is kept with its rendering), and
structlog (:func:`scriptorium.logs.get_logger` loads it at the first event logged at the configured level)."""

PROBE = """
import contextlib, io, json, sys
from scriptorium.cli import entry

argvs, watched = json.loads(sys.argv[1]), json.loads(sys.argv[2])
found = {}
for argv in argvs:
    sys.argv = ["scriptorium", *argv]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            code = entry.main()
        except SystemExit as exit:
            code = exit.code
    loaded = [m for m in watched if m in sys.modules]
    found[" ".join(argv)] = {"code": code, "out": printed.getvalue(), "loaded": loaded}
print(json.dumps(found))
"""


def probe(argvs: list[list[str]], watched: tuple[str, ...]) -> dict[str, dict[str, object]]:
    """Run each argv through the console script's entry point, in turn, in one new interpreter."""
    command = [sys.executable, "-c", PROBE, json.dumps(argvs), json.dumps(watched)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    found: dict[str, dict[str, object]] = json.loads(out.stdout)
    return found


def commands() -> list[list[str]]:
    """Every command and verb the parser knows (``["memory", "status"]``, ``["serve"]``, …)."""

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> list[list[str]]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return [prefix]
        parsers = subs[0]._name_parser_map  # a lookup makes the command's parser (scriptorium.cli.parser)
        return [found for name in list(parsers) for found in walk(parsers[name], [*prefix, name])]

    return walk(build_parser(), [])


def test_importing_the_command_line_loads_no_heavy_module() -> None:
    code = f"import json, sys, scriptorium.cli.main; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []


def test_help_and_every_commands_help_load_no_heavy_module() -> None:
    known = commands()
    assert ["memory", "status"] in known and ["hook"] in known and ["serve"] in known and len(known) > 30
    found = probe([["--help"], *([*command, "--help"] for command in known)], HEAVY)
    assert all(answer["code"] == 0 and "usage: scriptorium" in str(answer["out"]) for answer in found.values())
    # sys.modules only grows: the first command that loaded a module is the one to look at.
    loaded = {name: answer["loaded"] for name, answer in found.items() if answer["loaded"]}
    assert loaded == {}, f"--help loaded heavy modules (first the earliest listed): {loaded}"


def test_memory_status_reads_the_workspace_without_the_recall_index(tmp_path: Path) -> None:
    state = tmp_path / "state"
    MemoryWorkspace.init(state / "memory").close()
    found = probe([["memory", "status", "--json", "--state", str(state)]], NOT_FOR_STATUS)
    (answer,) = found.values()
    assert answer["code"] == 0 and json.loads(str(answer["out"]))["topics"] == 0
    assert answer["loaded"] == []
