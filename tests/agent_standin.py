"""A stand-in for the Claude Code and Codex CLIs, for tests (the real ones need a network and a login).

Installed by tests as ``<bin>/claude`` and ``<bin>/codex`` (the file's name picks the persona). It answers
``--version`` and the help the backends probe, honours the documented headless argv and output format
(Claude Code: one ``{"type": "result", …}`` JSON object; Codex: JSON Lines events), and edits the files
of its working directory the way a model with file tools would. Beside itself it reads
``<persona>.scenario.json`` (a list of steps, one per run; the last repeats) and appends each run's
argv, working directory, environment and stdin to ``<persona>.calls.jsonl``.

Steps: ``valid`` (a cited record per message), ``denied`` (valid topics, and a refused edit
reported), ``uncited`` (prose without a citation), ``outside``
(valid topics and a note beside ``topics/``), ``touch_source`` (rewrites a staged source), ``hang``,
``crash``, ``garbage`` (exit 0, not JSON), ``logged_out``, ``overloaded``, ``max_turns``, ``organize`` (moves every
topic under ``topics/organized/``), ``nothing``.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from pathlib import Path

from scriptorium.workspace.paths import conversation_file, source_path
from scriptorium.workspace.threads import split

HERE = Path(__file__).resolve()
PERSONA = HERE.name
CLAUDE_FLAGS = (
    "--output-format --max-turns --tools --allowedTools --permission-mode --strict-mcp-config --settings "
    "--no-session-persistence --append-system-prompt --model"
)
CODEX_FLAGS = "--json --ephemeral --skip-git-repo-check --ignore-user-config --ignore-rules --sandbox --cd --model"
MESSAGE = re.compile(r"^\[([^\]\s/]+/[^\]\s/]+/[^\]\s/]+)\] (user|assistant) at (\d{4}-\d\d-\d\d)\S*:\n(.*)$", re.M)


def steps() -> list[str]:
    path = HERE.with_name(f"{PERSONA}.scenario.json")
    return json.loads(path.read_text()) if path.exists() else ["valid"]


def record(entry: dict[str, object]) -> int:
    """Append this run; return how many runs came before it."""
    log = HERE.with_name(f"{PERSONA}.calls.jsonl")
    before = len(log.read_text().splitlines()) if log.exists() else 0
    with log.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")
    return before


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def words(text: str, count: int) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+", text)[:count]


def write_records(root: Path, prompt: str) -> int:
    """What a model would do: one dated, cited record per message, appended to the thread's topic."""
    found = MESSAGE.findall(prompt)
    by_thread: dict[str, list[str]] = {}
    for ref, role, day, first_line in found:
        key = source_path(*ref.split("/"))
        source = root / conversation_file(key)
        if not source.is_file() or source.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
            raise SystemExit(f"stand-in: {source} is not a staged read-only conversation file")
        if key not in split(conversation_file(key), source.read_bytes()):
            raise SystemExit(f"stand-in: {source} does not hold {ref}")
        said = " ".join(words(first_line, 12)) or "something"
        keyword = " ".join(words(first_line, 2)) or "message"
        by_thread.setdefault(ref.split("/")[1], []).append(f"{day}: The {role} said {said}. [{keyword}]({ref})")
    for thread, records in by_thread.items():
        topic = root / "topics" / "agent" / f"{re.sub(r'[^a-z0-9-]', '-', thread.lower())}.md"
        topic.parent.mkdir(parents=True, exist_ok=True)
        text = topic.read_text() if topic.exists() else "# Agent notes\n"
        topic.write_text(text.rstrip("\n") + "\n\n" + "\n\n".join(records) + "\n")
    return len(found)


def organize(root: Path) -> int:
    moved = 0
    for topic in sorted((root / "topics").rglob("*.md")):
        rel = topic.relative_to(root / "topics")
        if rel.parts[0] == "organized":
            continue
        target = root / "topics" / "organized" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        topic.rename(target)
        moved += 1
    return moved


def act(step: str, root: Path, prompt: str) -> tuple[int, str]:
    """Do the step's edit; return (exit status, summary) or exit on the failure steps."""
    if step == "hang":
        time.sleep(3600)
    if step == "crash":
        print("Traceback (most recent call last):\nTypeError: stand-in crashed", file=sys.stderr)
        raise SystemExit(3)
    if step == "valid":
        return 0, f"recorded {write_records(root, prompt)} message(s)"
    if step == "uncited":
        (root / "topics" / "agent").mkdir(parents=True, exist_ok=True)
        (root / "topics" / "agent" / "uncited.md").write_text("# Notes\n\nA claim with no citation at all.\n")
        return 0, "wrote a note"
    if step == "outside":
        write_records(root, prompt)
        (root / "notes.md").write_text("scratch notes the runtime must refuse\n")
        return 0, "recorded and kept notes"
    if step == "touch_source":
        source = next((root / "sources").rglob("*.md"))
        source.chmod(0o644)
        source.write_text("rewritten\n")
        return 0, "rewrote a source"
    if step == "organize":
        if (root / "sources").exists():
            raise SystemExit("stand-in: the organizer's folder must not hold sources")
        return 0, f"moved {organize(root)} topic(s)"
    if step == "nothing":
        return 0, "nothing worth keeping"
    return 0, step


def claude(argv: list[str]) -> int:
    if argv == ["--version"]:
        print("1.0.3 (Claude Code)" if "old" in steps() else "2.1.119 (Claude Code)")
        return 0
    if argv == ["--help"]:
        flags = "--output-format --max-turns --allowedTools" if "old" in steps() else CLAUDE_FLAGS
        print(f"Usage: claude [options] [command] [prompt]\nOptions: {flags}")
        return 0
    if "-p" not in argv or option(argv, "--output-format") != "json":
        print("stand-in: expected -p --output-format json", file=sys.stderr)
        return 2
    prompt = sys.stdin.read()
    runs = record(
        {"argv": [sys.argv[0], *argv], "pid": os.getpid(), "cwd": os.getcwd(), "env": dict(os.environ), "stdin": prompt}
    )
    plan = steps()
    step = plan[min(runs, len(plan) - 1)]
    if step == "garbage":
        print("Hello! I edited some files.")
        return 0
    if step == "logged_out":
        print(
            json.dumps(
                {
                    "type": "result",
                    "subtype": "success",
                    "is_error": True,
                    "result": "Invalid API key · Please run /login",
                }
            )
        )
        return 1
    if step == "max_turns":
        print(json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": False, "num_turns": 31}))
        return 0
    if step == "overloaded":
        error = 'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
        print(json.dumps({"type": "result", "subtype": "success", "is_error": True, "result": error}))
        return 1
    if step == "denied":  # what Claude Code reports when dontAsk refused a tool call
        write_records(Path.cwd(), prompt)
        denial = {"tool_name": "Edit", "tool_use_id": "toolu_1", "tool_input": {"file_path": "/etc/hosts"}}
        print(
            json.dumps(
                {
                    "type": "result",
                    "subtype": "success",
                    "is_error": False,
                    "result": "done",
                    "permission_denials": [denial],
                }
            )
        )
        return 0
    status, summary = act(step, Path.cwd(), prompt)
    print(
        json.dumps(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": summary,
                "num_turns": 4,
                "total_cost_usd": 0.0123,
                "usage": {
                    "input_tokens": 12,
                    "cache_creation_input_tokens": 900,
                    "cache_read_input_tokens": 4000,
                    "output_tokens": 310,
                },
                "session_id": "00000000-0000-4000-8000-000000000000",
            }
        )
    )
    return status


def codex(argv: list[str]) -> int:
    if argv == ["--version"]:
        print("codex-cli 0.90.0" if "old" in steps() else "codex-cli 0.144.1")
        return 0
    if argv == ["exec", "--help"]:
        flags = "--json --sandbox --cd --model" if "old" in steps() else CODEX_FLAGS
        print(f"Run Codex non-interactively\nUsage: codex exec [OPTIONS] [PROMPT]\nOptions: {flags}")
        return 0
    if "exec" not in argv or "--json" not in argv or argv[-1] != "-":
        print("stand-in: expected exec --json … -", file=sys.stderr)
        return 2
    workdir = option(argv, "--cd")
    if workdir is not None:
        os.chdir(workdir)
    prompt = sys.stdin.read()
    runs = record(
        {"argv": [sys.argv[0], *argv], "pid": os.getpid(), "cwd": os.getcwd(), "env": dict(os.environ), "stdin": prompt}
    )
    plan = steps()
    step = plan[min(runs, len(plan) - 1)]

    def emit(event: dict[str, object]) -> None:
        print(json.dumps(event), flush=True)

    emit({"type": "thread.started", "thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"})
    emit({"type": "turn.started"})
    if step == "garbage":
        print("not an event")
        return 0
    if step == "logged_out":
        emit({"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized: not logged in"}})
        return 1
    if step == "overloaded":
        emit({"type": "error", "message": "exceeded retry limit, last status: 429 Too Many Requests"})
        return 1
    status, summary = act(step, Path.cwd(), prompt)
    emit(
        {
            "type": "item.completed",
            "item": {"id": "item_1", "type": "file_change", "changes": [], "status": "completed"},
        }
    )
    emit({"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": summary}})
    emit({"type": "turn.completed", "usage": {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 300}})
    return status


if __name__ == "__main__":
    raise SystemExit(claude(sys.argv[1:]) if PERSONA == "claude" else codex(sys.argv[1:]))
