"""The command line's fixed start-up cost: ``scriptorium --help``, every command's ``--help`` and
``scriptorium memory status``, beside a bare Python start.

Builds a workspace (``--records`` cited records over ``--sources`` archived messages, through
``workspace_fixture``), then measures, each timed run right after a floor run of its own:

* the floor: ``python -c pass`` with the same interpreter — the least any Python command costs (the floor
  ``benchmarks/hooks.py`` uses);
* ``import_cli``: ``python -c 'import scriptorium.cli.main'``, the parser's module alone;
* ``help``: ``scriptorium --help`` (the console script, as a shell runs it);
* ``status``: ``scriptorium memory status --state STATE`` on the workspace built;
* every command's ``--help`` (``memory status --help``, ``serve --help``, …), in fewer rounds: the one
  highest over its floor reported.

Every side (the floor too) is warmed alike first, three untimed runs each. A side's ratio is to the median
of its own floor runs: on a shared machine the load drifts within a round, a ratio beside it does not.
Every process runs from bytecode, as an installation's does (written once into a scratch
``PYTHONPYCACHEPREFIX``, whatever ``PYTHONDONTWRITEBYTECODE`` says): the figures are start-up, not
compilation. Target (issue 56): ``help`` and every command's ``--help`` within 3 × the floor. Prints a
table, then one JSON line last: ``floor_ms``, ``import_cli_ms``, ``help_ms``, ``help_over_floor``,
``command_help_max_ms``, ``command_help_max_over_floor``, ``command_help_slowest``, ``status_ms``,
``status_over_floor`` (medians, in milliseconds).

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
from dataclasses import dataclass
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from startup_env import from_bytecode
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


def paired(
    sides: dict[str, Callable[[], None]], floor: Callable[[], None], repeats: int, warm: int = 3
) -> dict[str, Pair]:
    """Every side (and the floor) warmed ``warm`` times, then ``repeats`` rounds in which each side runs right
    after a floor run of its own: per side, its median and the median of its floor runs (ms). On a shared
    machine the load drifts within a round; a side's ratio to the floor beside it does not."""
    for call in [floor, *sides.values()]:
        for _ in range(warm):
            call()
    samples: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in sides}
    for _ in range(repeats):
        for name, call in sides.items():
            for run, into in ((floor, samples[name][1]), (call, samples[name][0])):
                started = time.perf_counter()
                run()
                into.append((time.perf_counter() - started) * 1000)
    return {name: Pair(statistics.median(ms), statistics.median(floor_ms)) for name, (ms, floor_ms) in samples.items()}


@dataclass(frozen=True)
class Pair:
    ms: float
    floor_ms: float

    @property
    def ratio(self) -> float:
        return self.ms / self.floor_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--help-repeats", type=int, default=11, help="rounds over every command's --help")
    parser.add_argument("--records", type=int, default=2_000)
    parser.add_argument("--sources", type=int, default=5_000)
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="100 records, one warming run and one round of each: that it runs, not its figures (CI)",
    )
    args = parser.parse_args()
    warm = 1 if args.smoke else 3  # one run writes the bytecode every later one starts from
    if args.smoke:
        args.records, args.sources, args.repeats, args.help_repeats = 100, 200, 1, 1
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with tempfile.TemporaryDirectory(prefix="scriptorium-cli-") as tmp:
        env = from_bytecode(os.environ, Path(tmp) / "pycache") | {"SCRIPTORIUM_LOG_LEVEL": "WARNING"}
        state = Path(tmp) / "state"
        started = time.perf_counter()
        build_workspace(state / "memory", args.records, args.sources).close()
        print(
            f"workspace of {args.records} records, {args.sources} sources built in "
            f"{time.perf_counter() - started:.1f} s"
        )
        env["SCRIPTORIUM_STATE"] = str(state)
        floor = runner([sys.executable, "-c", "pass"], env)
        main_sides = {
            "import_cli": runner([sys.executable, "-c", "import scriptorium.cli.main"], env),
            "help": runner([str(SCRIPT), "--help"], env),
            "status": runner([str(SCRIPT), "memory", "status", "--state", str(state)], env),
        }
        p50 = paired(main_sides, floor, args.repeats, warm)
        helps = paired(
            {" ".join(c): runner([str(SCRIPT), *c, "--help"], env) for c in commands()}, floor, args.help_repeats, warm
        )
    floor_ms = statistics.median(pair.floor_ms for pair in p50.values())
    print(f"{'side':>40} {'p50 ms':>9} {'floor ms':>9} {'x floor':>8}")
    for name, pair in p50.items():
        print(f"{name:>40} {pair.ms:>9.1f} {pair.floor_ms:>9.1f} {pair.ratio:>8.2f}")
    print(f"every command's --help ({len(helps)} commands), each beside its own floor runs:")
    for name, pair in sorted(helps.items(), key=lambda item: -item[1].ratio):
        print(f"{name + ' --help':>40} {pair.ms:>9.1f} {pair.floor_ms:>9.1f} {pair.ratio:>8.2f}")
    slowest = max(helps, key=lambda name: helps[name].ratio)
    print(
        f"targets: --help <= 3 x floor ({p50['help'].ratio:.2f}); "
        f"every command's --help <= 3 x floor (the highest, {slowest}: {helps[slowest].ratio:.2f})"
    )
    print(
        json.dumps(
            {
                "floor_ms": round(floor_ms, 2),
                "import_cli_ms": round(p50["import_cli"].ms, 2),
                "help_ms": round(p50["help"].ms, 2),
                "help_over_floor": round(p50["help"].ratio, 2),
                "command_help_max_ms": round(helps[slowest].ms, 2),
                "command_help_max_over_floor": round(helps[slowest].ratio, 2),
                "command_help_slowest": slowest,
                "status_ms": round(p50["status"].ms, 2),
                "status_over_floor": round(p50["status"].ratio, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
