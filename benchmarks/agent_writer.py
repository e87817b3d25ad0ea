"""What the agent-CLI writer adds around one headless run, on a 10,000-record workspace.

Each round writes a new 8-turn session three ways, in alternating order:

* ``agent pass``: ``WriteService.write(force=True)`` with the ``claude-code`` backend, its executable the
  test stand-in (``tests/agent_standin.py``: it reads the prompt, writes one cited record per message and
  answers Claude Code's JSON) — staging with every topic materialized and the batch's sources read-only,
  the run, validation, install, views, git, markers;
* ``floor``: the same stand-in run directly, with the same argv and stdin, in a folder already holding
  the same topics and sources — the agent's own cost, which a real model call dwarfs;
* ``verbatim pass``: the same session written by the offline verbatim writer — the peer without a process.

Reported: the medians, ``agent_overhead_ms`` (agent pass − floor) and ``agent_overhead_ratio`` (agent pass
/ floor). A real headless run takes seconds to minutes, so the overhead in milliseconds is what matters.
Prints a table, then one JSON line.

Usage: python benchmarks/agent_writer.py [--records 10000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import structlog

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from workspace_fixture import build_workspace

from scriptorium.sessions import open_store
from scriptorium.workspace.paths import conversation_file
from scriptorium.workspace.sources import render_source
from scriptorium.workspace.threads import join
from scriptorium.writer_interface import Batch
from scriptorium.writers.agent import agent_env, agent_writer
from scriptorium.writers.agent_cli import CLAUDE_CODE, AgentConfig
from scriptorium.writers.organizer import OfflineOrganizer
from scriptorium.writers.prompting import batch_prompt, prompt
from scriptorium.writers.verbatim import VerbatimWriter
from scriptorium.writing.batch import to_message
from scriptorium.writing.service import WriteService, WriteSettings
from tests.agent_fixtures import StandIns
from tests.sessions_fixtures import T0, chain

TURNS = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument(
        "--smoke", action="store_true", help="200 records, one round: that it runs, not its figures (CI)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.records, args.rounds = 200, 1
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    work = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    try:
        run(work, args.records, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(work: Path, records: int, rounds: int) -> None:
    bins = StandIns(work / "bin")
    bins.scenario("claude", "valid")
    os.environ["PATH"] = bins.path_env()
    config = AgentConfig(model="bench", timeout_s=60, max_turns=12)
    stores = {}
    services = {}
    for kind in ("agent", "verbatim"):
        ws = build_workspace(work / kind / "memory", records, records)
        store = stores[kind] = open_store(f"sqlite:///{work / kind / 'sessions.db'}")
        if kind == "agent":
            writer, organizer = agent_writer("claude-code", lambda: config)
        else:
            writer, organizer = VerbatimWriter(), OfflineOrganizer()
        settings = WriteSettings(trigger_tokens=0, organize_batches=10**6, organize_tokens=10**9)
        services[kind] = WriteService(ws, store, writer, organizer, settings, clock=lambda: T0.timestamp())
    timings: dict[str, list[float]] = {"agent pass": [], "floor": [], "verbatim pass": []}
    for number in range(rounds + 1):  # round 0 warms up (the executable's probe, caches)
        sid = f"round-{number:03d}"
        ids = [f"{sid}-t{i}" for i in range(TURNS)]
        for store in stores.values():
            store.create_session(sid, {"provider": "bench", "title": f"Round {number}"}, created_at=T0)
            store.add_nodes(chain(sid, ids), head=ids[-1])
        order = ["agent pass", "floor", "verbatim pass"]
        if number % 2:
            order.reverse()
        for name in order:
            if name == "floor":
                elapsed = floor(work, bins, services["agent"], sid, config)
            else:
                service = services["agent" if name == "agent pass" else "verbatim"]
                started = time.perf_counter()
                outcome = service.write(sid, force=True)
                elapsed = (time.perf_counter() - started) * 1000
                assert outcome.ok and getattr(outcome, "records_created", 0) == TURNS, outcome
            if number:
                timings[name].append(elapsed)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    print(f"{'':<16}{'p50 ms':>10}{'min ms':>10}{'max ms':>10}   ({rounds} rounds, {records:,} records)")
    for name, values in timings.items():
        print(f"{name:<16}{medians[name]:>10.1f}{min(values):>10.1f}{max(values):>10.1f}")
    overhead = medians["agent pass"] - medians["floor"]
    print(f"overhead: {overhead:.1f} ms per pass ({medians['agent pass'] / medians['floor']:.2f}x the bare run)")
    print(
        json.dumps(
            {
                "agent_pass_p50_ms": round(medians["agent pass"], 1),
                "agent_floor_p50_ms": round(medians["floor"], 1),
                "verbatim_pass_p50_ms": round(medians["verbatim pass"], 1),
                "agent_overhead_ms": round(overhead, 1),
                "agent_overhead_ratio": round(medians["agent pass"] / medians["floor"], 3),
            }
        )
    )


def floor(work: Path, bins: StandIns, service: WriteService, sid: str, config: AgentConfig) -> float:
    """The stand-in alone on the same input: a folder with the same topics and this session's sources."""
    ws = service.workspace
    folder = Path(tempfile.mkdtemp(prefix="bench-floor-", dir=work))
    shutil.copytree(ws.root / "topics", folder / "topics")
    session = service.store.get_session(sid)
    assert session is not None and session.head is not None
    nodes = [node for node in service.store.get_branch(sid, session.head) if node.is_content]
    messages = [to_message(node, "bench", "trusted") for node in nodes]
    conversations: dict[str, list[bytes]] = {}
    for message in messages:  # staged as a pass stages them: a file a conversation
        conversations.setdefault(conversation_file(message.source.path), []).append(render_source(message.source))
    for conversation, entries in conversations.items():
        target = folder / conversation
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(join(entries))
        target.chmod(0o444)
    batch = Batch(sid, str(session.metadata.get("title", sid)), tuple(messages), tuple(m.node.id for m in messages))
    system = prompt("writer") + prompt("agent_writer")
    argv = CLAUDE_CODE.argv(str(bins.bin / "claude"), config, folder, system)
    stdin = batch_prompt(batch, sorted(str(p.relative_to(folder)) for p in (folder / "topics").rglob("*.md")))
    started = time.perf_counter()
    done = subprocess.run(
        argv, cwd=folder, env=agent_env(CLAUDE_CODE, config), input=stdin, capture_output=True, text=True
    )
    elapsed = (time.perf_counter() - started) * 1000
    assert done.returncode == 0, done.stderr
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(folder)
    return elapsed


if __name__ == "__main__":
    main()
