"""The command line's fixed start-up cost: ``scriptorium --help``, every command's ``--help`` and
``scriptorium memory status``, beside a bare Python start.

Builds a workspace (``--records`` cited records over ``--sources`` archived messages, through
``workspace_fixture``), then measures, each repeat running every side back to back in turn:

* ``python_floor``: ``python -c pass`` with the same interpreter — the least any Python command costs
  (the floor ``benchmarks/hooks.py`` uses);
* ``import_cli``: ``python -c 'import scriptorium.cli.main'``, the parser's module alone;
* ``help``: ``scriptorium --help`` (the console script, as a shell runs it);
* ``status``: ``scriptorium memory status --state STATE`` on the workspace built;
* every command's ``--help`` (``memory status --help``, ``serve --help``, …): fewer repeats, the
  slowest command's median reported.

Every side is warmed alike first (three untimed runs each), and every process runs from bytecode as an
installation's does (written once into a scratch ``PYTHONPYCACHEPREFIX``, whatever
``PYTHONDONTWRITEBYTECODE`` says), so that the figures are start-up, not compilation. Target (issue 56):
``help`` and the slowest command's ``--help`` within 3 × the floor. Prints a table, then one JSON line last:
``floor_ms``, ``import_cli_ms``, ``help_ms``, ``help_over_floor``, ``command_help_max_ms``,
``command_help_max_over_floor``, ``command_help_slowest``, ``status_ms``, ``status_over_floor``
(medians, in milliseconds).

Usage: python benchmarks/cli_start.py [--repeats N] [--help-repeats N] [--records N] [--sources N]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workspace_fixture import build_workspace

from scriptorium.cli.main import build_parser

SCRIPT = Path(sys.executable).with_name("scriptorium")


def commands() -> list[list[str]]:
    """Every command and verb the parser knows, as argv prefixes (``["memory", "status"]``, ``["serve"]``)."""
    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            found.append(prefix)
            return
        parsers = subs[0]._name_parser_map  # a lookup makes the command's parser (scriptorium.cli.parser)
        for name in list(parsers):
            walk(parsers[name], [*prefix, name])

    walk(build_parser(), [])
    return found


def runner(command: list[str], env: dict[str, str]) -> Callable[[], None]:
    def call() -> None:
        subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    return call


def timed(sides: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Each side warmed three times, then ``repeats`` rounds of every side back to back: the medians (ms)."""
    for call in sides.values():
        for _ in range(3):
            call()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, call in sides.items():
            started = time.perf_counter()
            call()
            samples[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--help-repeats", type=int, default=5, help="rounds over every command's --help")
    parser.add_argument("--records", type=int, default=2_000)
    parser.add_argument("--sources", type=int, default=5_000)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory(prefix="scriptorium-cli-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"SCRIPTORIUM_LOG_LEVEL": "WARNING", "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        state = Path(tmp) / "state"
        started = time.perf_counter()
        build_workspace(state / "memory", args.records, args.sources).close()
        print(
            f"workspace of {args.records} records, {args.sources} sources built in "
            f"{time.perf_counter() - started:.1f} s"
        )
        env["SCRIPTORIUM_STATE"] = str(state)
        floor = [sys.executable, "-c", "pass"]
        main_sides = {
            "python_floor": runner(floor, env),
            "import_cli": runner([sys.executable, "-c", "import scriptorium.cli.main"], env),
            "help": runner([str(SCRIPT), "--help"], env),
            "status": runner([str(SCRIPT), "memory", "status", "--state", str(state)], env),
        }
        p50 = timed(main_sides, args.repeats)
        help_sides = {"python_floor": runner(floor, env)}
        help_sides |= {" ".join(c): runner([str(SCRIPT), *c, "--help"], env) for c in commands()}
        helps = timed(help_sides, args.help_repeats)
    floor_ms, help_floor = p50["python_floor"], helps.pop("python_floor")
    print(f"{'side':>22} {'p50 ms':>9} {'x floor':>8}")
    for name, value in p50.items():
        print(f"{name:>22} {value:>9.1f} {value / floor_ms:>8.2f}")
    print(f"every command's --help ({len(helps)} commands, floor {help_floor:.1f} ms in that run):")
    for name, value in sorted(helps.items(), key=lambda item: -item[1]):
        print(f"{name + ' --help':>40} {value:>9.1f} {value / help_floor:>8.2f}")
    slowest = max(helps, key=lambda name: helps[name])
    print(
        f"targets: --help <= 3 x floor ({p50['help'] / floor_ms:.2f}); "
        f"every command's --help <= 3 x floor (slowest {slowest}: {helps[slowest] / help_floor:.2f})"
    )
    print(
        json.dumps(
            {
                "floor_ms": round(floor_ms, 2),
                "import_cli_ms": round(p50["import_cli"], 2),
                "help_ms": round(p50["help"], 2),
                "help_over_floor": round(p50["help"] / floor_ms, 2),
                "command_help_max_ms": round(helps[slowest], 2),
                "command_help_max_over_floor": round(helps[slowest] / help_floor, 2),
                "command_help_slowest": slowest,
                "status_ms": round(p50["status"], 2),
                "status_over_floor": round(p50["status"] / floor_ms, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
