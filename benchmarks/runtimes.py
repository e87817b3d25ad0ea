"""What Scriptorium costs a real runtime: ``claude -p`` with and without memory, and ``scriptorium mcp``'s
answer to ``initialize`` beside a minimal server on the same MCP SDK.

* ``claude -p`` (the pinned Claude Code of tests/runtimes/clis) runs against the scripted model server,
  alternately in a home without Scriptorium (bare) and in one set up at user scope (hooks + MCP server),
  each warmed once first; the medians are compared. A run with memory counts toward
  ``mcp_tools_first_request`` when its first model request lists the memory tools.
* The floor beside them, set up the same way but with command hooks that do nothing (``true``) and, as the
  MCP server, the front alone under ``python -S`` answering the same listing and every ``mcp_tool`` hook
  (UserPromptSubmit, Stop) with nothing: what Claude Code's own hook and
  MCP machinery costs (it stops a stdio server with SIGINT and polls its exit every 50 ms). Its ratio to
  bare bounds what any hook command and MCP server can reach; ``claude_p_ratio_vs_floor`` is ours to it.
* ``claude -p`` wired to a running ``scriptorium serve`` (``setup --server``): the hooks (no SessionStart:
  the opening prompt carries the core) and the MCP tools over HTTP, so no process starts. Its ratio to bare
  is ``claude_p_server_ratio``; its first requests count toward ``mcp_tools_first_request`` too.
* The server floor beside it, set up with ``--server`` the same way but pointed at a server that answers
  every hook with nothing at once and lists the four tools from a minimal low-level SDK server (stateless,
  on the same ASGI server): what Claude Code's own HTTP hook and HTTP MCP machinery costs.
  ``claude_p_server_floor_ratio`` is its ratio to bare, ``claude_p_server_ratio_vs_floor`` ours to it.
* ``codex exec`` runs the same number of times set up for Codex (its first request must list the tools
  and hold the core and the recall, which its ``mcp_tool`` hooks get from the MCP server's ``hook`` tool),
  bare, and as its floor (set up the same way and trusted, the bare front as MCP server answering every
  ``hook`` call with nothing, the command hooks ``true``): ``codex_floor_p50_s``, ``codex_floor_ratio``,
  ``codex_ratio_vs_floor``; ``pi -p`` with the
  extension ``setup pi`` installs (its first request must hold the core and
  the recall) and bare; ``openclaw agent --local`` (the pinned OpenClaw of tests/runtimes/openclaw, one turn
  in a session of its own each run) with the memory plugin ``setup openclaw`` installs (its first request
  must hold the core and the recall) and bare (OpenClaw's own memory-core): ``codex_bare_p50_s``,
  ``codex_with_memory_p50_s``, ``pi_bare_p50_s``, ``pi_with_memory_p50_s``, ``openclaw_bare_p50_s``,
  ``openclaw_with_memory_p50_s`` and their ratios.
* ``initialize``: a fresh process each time, the time from its start to the answer on stdout, for
  ``scriptorium mcp`` and for a minimal low-level SDK server with one tool.

A run with memory is followed, untimed, by the wait for the sessions it added to be written (the writes its
hooks hand off start once it exits: they must not land in the next run's time), and every timed run starts
after :data:`PAUSE_S` of idle, so that no arm starts on a machine busier than another's.

The machines are noisy: the figures are medians of interleaved runs, and the headline is their ratio.
Prints a table, then one JSON line: ``claude_p_bare_p50_s``, ``claude_p_with_memory_p50_s``,
``claude_p_ratio``, ``claude_p_with_server_p50_s``, ``claude_p_server_ratio``, ``claude_p_floor_p50_s``,
``claude_p_floor_ratio``, ``claude_p_ratio_vs_floor``, ``claude_p_server_floor_p50_s``,
``claude_p_server_floor_ratio``, ``claude_p_server_ratio_vs_floor``,
``mcp_initialize_p50_s``, ``mcp_minimal_initialize_p50_s``,
``mcp_tools_first_request`` (runs out of ``runs`` whose first request lists the tools, per runtime),
``context_first_request`` (runs whose first request holds the core, once, and the recall).

    python benchmarks/runtimes.py [--runs 10]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from floors import MINIMAL_SERVER, SERVER_FLOOR, make_codex_floor, make_floor  # noqa: E402

from tests.cluster.conftest import free_port, wait_for  # noqa: E402
from tests.conftest import trusted_and_pending_world  # noqa: E402
from tests.helpers.served import up as served  # noqa: E402
from tests.requirements import cli, require  # noqa: E402
from tests.runtimes.real import SCRIPT, Machine, machine  # noqa: E402

PAUSE_S = 1.0
"""Idle before every timed run, whatever ran before it (a run with memory is also followed by the wait for
its writes): each arm starts from the same quiet machine."""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def initialize_s(argv: list[str]) -> float:
    """Seconds from starting ``argv`` to its answer to ``initialize``."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    took = time.perf_counter() - started
    assert answer.get("id") == 1 and "result" in answer, answer
    proc.kill()
    proc.wait()
    return took


def claude_s(user: Machine, remembers: bool = False) -> tuple[float, bool, bool]:
    """One ``claude -p`` run: its seconds, whether its first model request listed the memory tools, and
    whether it held the core (once) and the recall (``remembers``: it should, and a run that did not says
    so on stderr)."""
    seen = len(user.model.requests)
    time.sleep(PAUSE_S)
    started = time.perf_counter()
    user.claude("When do releases ship?")
    took = time.perf_counter() - started
    first = next(r for r in user.model.requests[seen:] if r.path.endswith("/messages"))
    context = first.text.count("The user is called Sam") == 1 and "Releases ship on Thursdays" in first.text
    if remembers and not context:
        print(f"no memory context in {user.home.name}'s first request: {first.text[:3000]!r}", file=sys.stderr)
    return took, "mcp__scriptorium__memory_search" in first.tool_names, context


def codex_s(user: Machine, remembers: bool = False) -> tuple[float, bool, bool]:
    """One ``codex exec`` run: its seconds, whether its first model request listed the memory tools, and
    whether it held the core (once) and the recall (``remembers``: it should)."""
    seen = len(user.model.requests)
    time.sleep(PAUSE_S)
    started = time.perf_counter()
    done = user.run([str(cli("codex")), "exec", "--skip-git-repo-check", "When do releases ship?"], timeout=180)
    took = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    first = next(r for r in user.model.requests[seen:] if r.path.endswith("/responses"))
    context = first.text.count("The user is called Sam") == 1 and "Releases ship on Thursdays" in first.text
    if remembers and not context:
        print(f"no memory context in {user.home.name}'s first request: {first.text[-3000:]!r}", file=sys.stderr)
    return took, any(t.get("name") == "mcp__scriptorium" for t in first.body.get("tools") or []), context


def pi_s(user: Machine, remembers: bool = False) -> float:
    """One ``pi -p`` run's seconds (``remembers``: its first request must hold the core and the recall)."""
    seen = len(user.model.requests)
    time.sleep(PAUSE_S)
    started = time.perf_counter()
    user.pi("When do releases ship?")
    took = time.perf_counter() - started
    if remembers:
        first = next(r for r in user.model.requests[seen:] if r.path.endswith("/messages"))
        assert "The user is called Sam" in first.text and "Releases ship on Thursdays" in first.text, "no memory"
    return took


def openclaw_s(user: Machine, run: int, remembers: bool = False) -> float:
    """One ``openclaw agent --local`` turn's seconds, in a session of its own (``remembers``: its first
    request must hold the core and the recall)."""
    seen = len(user.model.requests)
    time.sleep(PAUSE_S)
    started = time.perf_counter()
    user.openclaw("When do releases ship?", "--session-id", f"bench-{run}")
    took = time.perf_counter() - started
    if remembers:
        first = next(r for r in user.model.requests[seen:] if r.path.endswith("/messages"))
        assert "The user is called Sam" in first.text and "Releases ship on Thursdays" in first.text, "no memory"
    return took


@contextlib.contextmanager
def listening(user: Machine, argv: list[str], what: str) -> Iterator[str]:
    """``argv`` (a server taking its port last) on a free port: its URL once it answers, stopped after."""
    port = free_port()
    proc = user.popen([*argv, str(port)], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: served(url), 60, what)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def serving_floor(user: Machine) -> contextlib.AbstractContextManager[str]:
    """:data:`SERVER_FLOOR` on a free port: its URL once it answers."""
    return listening(user, [sys.executable, "-c", SERVER_FLOOR], "the server floor")


def serving(user: Machine) -> contextlib.AbstractContextManager[str]:
    """``scriptorium serve`` for ``user``'s memory on a free port: its URL once it answers."""
    trusted_and_pending_world(user.state / "memory")
    return listening(user, [str(SCRIPT), "serve", "--port"], "scriptorium serve")


@contextlib.contextmanager
def written(user: Machine) -> Iterator[None]:
    """After the run inside, wait (untimed) until every session it added to ``user``'s store is written:
    the writes its hooks handed off finish before the next run starts, so they never land in another
    run's time (a session not written within a minute is said on stderr)."""
    before = user.session_ids()
    yield

    def done() -> bool:
        added = user.session_ids() - before
        counts = [user.written_once(session) for session in added]
        return bool(added) and all(c is not None and c["lost"] == 0 for c in counts)

    try:
        wait_for(done, 60, f"the sessions {user.home.parent.name}'s run added to be written")
    except AssertionError as exc:
        print(exc, file=sys.stderr)


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def ratio(ours: list[float], theirs: list[float]) -> float:
    return round(statistics.median(ours) / statistics.median(theirs), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="one run each: that it runs, not its figures (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    require("runtime-clis")
    require("openclaw")
    base = Path(tempfile.mkdtemp(prefix="bench-runtimes-"))

    with (
        machine(base / "bare") as bare,
        machine(base / "memory") as memory,
        machine(base / "server") as resident,
        machine(base / "floor") as floor,
        machine(base / "server-floor") as server_floor,
        machine(base / "codex") as coder,
        machine(base / "codex-bare") as coder_bare,
        machine(base / "codex-floor") as coder_floor,
        machine(base / "pi") as pier,
        machine(base / "pi-bare") as pier_bare,
        machine(base / "openclaw") as claw,
        machine(base / "openclaw-bare") as claw_bare,
        serving(resident) as url,
        serving_floor(server_floor) as floor_url,
    ):
        for home in (memory, floor):
            trusted_and_pending_world(home.state / "memory")
            home.scriptorium("setup", "claude-code", "--no-writer")
        resident.scriptorium("setup", "claude-code", "--no-writer", "--server", url)
        server_floor.scriptorium("setup", "claude-code", "--no-writer", "--server", floor_url)
        make_floor(floor)
        for home in (coder, coder_floor):
            home.codex_config()
            trusted_and_pending_world(home.state / "memory")
            home.scriptorium("setup", "codex", "--no-writer", "--trust-hooks", str(cli("codex")))
        make_codex_floor(coder_floor)
        coder_bare.codex_config()
        for home in (pier, pier_bare):
            home.pi_config()
        trusted_and_pending_world(pier.state / "memory")
        pier.scriptorium("setup", "pi")
        for home in (claw, claw_bare):
            home.openclaw_config()
        trusted_and_pending_world(claw.state / "memory")
        claw.scriptorium("setup", "openclaw")
        if not args.smoke:  # warm all alike (a smoke run checks that it runs, not its figures)
            codex_s(coder), codex_s(coder_bare), codex_s(coder_floor), pi_s(pier), pi_s(pier_bare)
            openclaw_s(claw, -1), openclaw_s(claw_bare, -1)
            for home in (bare, memory, resident, floor, server_floor):
                claude_s(home)
        times: dict[str, list[float]] = {"bare": [], "memory": [], "server": [], "floor": [], "server_floor": []}
        times |= {"codex": [], "codex_bare": [], "codex_floor": [], "pi": [], "pi_bare": []}
        times |= {"openclaw": [], "openclaw_bare": []}
        listed = {"claude_code": 0, "claude_code_server": 0, "codex": 0}
        context = {"claude_code": 0, "claude_code_server": 0, "codex": 0}
        for run in range(args.runs):
            times["bare"].append(claude_s(bare)[0])
            with written(memory):
                took, tools, remembered = claude_s(memory, remembers=True)
            times["memory"].append(took)
            listed["claude_code"] += tools
            context["claude_code"] += remembered
            with written(resident):
                took, tools, remembered = claude_s(resident, remembers=True)
            times["server"].append(took)
            listed["claude_code_server"] += tools
            context["claude_code_server"] += remembered
            times["floor"].append(claude_s(floor)[0])
            times["server_floor"].append(claude_s(server_floor)[0])
            with written(coder):
                took, tools, remembered = codex_s(coder, remembers=True)
            times["codex"].append(took)
            listed["codex"] += tools
            context["codex"] += remembered
            times["codex_bare"].append(codex_s(coder_bare)[0])
            times["codex_floor"].append(codex_s(coder_floor)[0])
            times["pi"].append(pi_s(pier, remembers=True))
            times["pi_bare"].append(pi_s(pier_bare))
            times["openclaw"].append(openclaw_s(claw, run, remembers=True))
            times["openclaw_bare"].append(openclaw_s(claw_bare, run))

        state = memory.state
        ours = [str(SCRIPT), "mcp", "--state", str(state)]
        minimal = [sys.executable, "-c", MINIMAL_SERVER]
        initialize_s(ours), initialize_s(minimal)
        init: dict[str, list[float]] = {"scriptorium": [], "minimal": []}
        for _ in range(args.runs):
            init["scriptorium"].append(initialize_s(ours))
            init["minimal"].append(initialize_s(minimal))

    figures = {
        "claude_p_bare_p50_s": p50(times["bare"]),
        "claude_p_with_memory_p50_s": p50(times["memory"]),
        "claude_p_ratio": ratio(times["memory"], times["bare"]),
        "claude_p_with_server_p50_s": p50(times["server"]),
        "claude_p_server_ratio": ratio(times["server"], times["bare"]),
        "claude_p_floor_p50_s": p50(times["floor"]),
        "claude_p_floor_ratio": ratio(times["floor"], times["bare"]),
        "claude_p_ratio_vs_floor": ratio(times["memory"], times["floor"]),
        "claude_p_server_floor_p50_s": p50(times["server_floor"]),
        "claude_p_server_floor_ratio": ratio(times["server_floor"], times["bare"]),
        "claude_p_server_ratio_vs_floor": ratio(times["server"], times["server_floor"]),
        "codex_bare_p50_s": p50(times["codex_bare"]),
        "codex_with_memory_p50_s": p50(times["codex"]),
        "codex_ratio": ratio(times["codex"], times["codex_bare"]),
        "codex_floor_p50_s": p50(times["codex_floor"]),
        "codex_floor_ratio": ratio(times["codex_floor"], times["codex_bare"]),
        "codex_ratio_vs_floor": ratio(times["codex"], times["codex_floor"]),
        "pi_bare_p50_s": p50(times["pi_bare"]),
        "pi_with_memory_p50_s": p50(times["pi"]),
        "pi_ratio": ratio(times["pi"], times["pi_bare"]),
        "openclaw_bare_p50_s": p50(times["openclaw_bare"]),
        "openclaw_with_memory_p50_s": p50(times["openclaw"]),
        "openclaw_ratio": ratio(times["openclaw"], times["openclaw_bare"]),
        "mcp_initialize_p50_s": p50(init["scriptorium"]),
        "mcp_minimal_initialize_p50_s": p50(init["minimal"]),
        "mcp_tools_first_request": {**listed, "runs": args.runs},
        "context_first_request": {**context, "runs": args.runs},
    }
    print(f"{'measure':<44} {'p50 s':>8} {'min s':>8} {'max s':>8}")
    for label, values in (
        ("claude -p, bare", times["bare"]),
        ("claude -p, with memory (hooks + MCP)", times["memory"]),
        ("claude -p, wired to a running serve", times["server"]),
        ("claude -p, floor (true hooks, bare front)", times["floor"]),
        ("claude -p, server floor (empty answers)", times["server_floor"]),
        ("codex exec, bare", times["codex_bare"]),
        ("codex exec, with memory (setup codex)", times["codex"]),
        ("codex exec, floor (empty hooks, bare front)", times["codex_floor"]),
        ("pi -p, bare", times["pi_bare"]),
        ("pi -p, with memory (setup pi)", times["pi"]),
        ("openclaw agent --local, bare", times["openclaw_bare"]),
        ("openclaw agent --local, with memory", times["openclaw"]),
        ("scriptorium mcp: initialize answered", init["scriptorium"]),
        ("minimal SDK server: initialize answered", init["minimal"]),
    ):
        print(f"{label:<44} {p50(values):>8.3f} {min(values):>8.3f} {max(values):>8.3f}")
    print(f"claude -p with memory / bare: {figures['claude_p_ratio']:.3f} (command hooks, stdio MCP)")
    print(f"claude -p wired to serve / bare: {figures['claude_p_server_ratio']:.3f} (target <= 1.15)")
    floor_ratio, vs_floor = figures["claude_p_floor_ratio"], figures["claude_p_ratio_vs_floor"]
    print(f"floor / bare: {floor_ratio:.3f}; with memory / floor: {vs_floor:.3f}")
    print(
        f"codex exec with memory / bare: {figures['codex_ratio']:.3f}; floor / bare: "
        f"{figures['codex_floor_ratio']:.3f}; with memory / floor: {figures['codex_ratio_vs_floor']:.3f}"
    )
    print(f"pi -p with memory / bare: {figures['pi_ratio']:.3f}; openclaw agent: {figures['openclaw_ratio']:.3f}")
    server_floor, server_vs_floor = figures["claude_p_server_floor_ratio"], figures["claude_p_server_ratio_vs_floor"]
    print(f"server floor / bare: {server_floor:.3f}; wired to serve / server floor: {server_vs_floor:.3f}")
    runs = args.runs
    print(
        f"first request lists the tools: Claude Code {listed['claude_code']}/{runs} "
        f"(wired to serve {listed['claude_code_server']}/{runs}), Codex {listed['codex']}/{runs}"
    )
    print(
        f"first request holds the core and the recall: Claude Code {context['claude_code']}/{runs} "
        f"(wired to serve {context['claude_code_server']}/{runs}), Codex {context['codex']}/{runs}"
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
