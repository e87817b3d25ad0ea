"""Transcript lines as the runtimes write them: Claude Code entries and a Codex CLI rollout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def cc(n: int, parent: str | None, role: str = "user", text: str | None = None, kind: str | None = None) -> str:
    """One Claude Code transcript entry ``e<n>`` of session ``inc-session``, following ``parent``."""
    entry = {
        "uuid": f"e{n}",
        "parentUuid": parent,
        "sessionId": "inc-session",
        "type": kind or role,
        "timestamp": f"2026-11-04T10:{n // 60:02d}:{n % 60:02d}Z",
        "message": {"role": role, "content": text or f"turn {n} about the deployment plan"},
    }
    return json.dumps(entry)


def claude_transcript(path: Path, turns: int, start: int = 0) -> Path:
    """Append turns ``e<start>``… (user and assistant in turn) of session ``cc-hooks`` to ``path``."""
    lines = [cc(n, f"e{n - 1}" if n else None, "user" if n % 2 == 0 else "assistant") for n in range(start, turns)]
    with path.open("a") as handle:
        handle.write("".join(line.replace("inc-session", "cc-hooks") + "\n" for line in lines))
    return path


CODEX_TIME = "2026-11-02T10:00:{:02d}.000Z"


def codex_line(n: int, kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": CODEX_TIME.format(n % 60), "type": kind, "payload": payload})


def codex_message(role: str, text: str, block: str | None = None) -> dict[str, Any]:
    block = block or ("input_text" if role == "user" else "output_text")
    return {"type": "message", "role": role, "content": [{"type": block, "text": text}]}


def rollout(session: str = "019b0000-aaaa", forked_from: str | None = None) -> list[str]:
    """A Codex rollout with every line type the importer knows, plus one it does not."""
    line, message = codex_line, codex_message
    meta: dict[str, Any] = {"id": session, "cwd": "/srv/app", "cli_version": "0.77.0", "instructions": "SECRET-INSTR"}
    if forked_from:
        meta["forked_from_id"] = forked_from
    return [
        line(0, "session_meta", meta),
        line(1, "response_item", message("developer", "SECRET-DEVELOPER rules")),
        line(
            2, "response_item", message("user", "# AGENTS.md instructions for /srv/app\n\n<INSTRUCTIONS>SECRET-AGENTS")
        ),
        line(
            3,
            "response_item",
            message("user", "<environment_context>\n  <cwd>SECRET-ENV</cwd>\n</environment_context>"),
        ),
        line(4, "turn_context", {"cwd": "/srv/app", "model": "gpt-5"}),
        line(5, "response_item", message("user", "Please move the billing job to the nightly queue")),
        line(6, "event_msg", {"type": "user_message", "message": "Please move the billing job to the nightly queue"}),
        line(7, "response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "SECRET-REASON"}]}),
        line(8, "event_msg", {"type": "agent_reasoning", "text": "SECRET-REASON again"}),
        line(
            9, "response_item", {"type": "function_call", "name": "shell", "arguments": "SECRET-ARGS", "call_id": "c1"}
        ),
        line(10, "response_item", {"type": "function_call_output", "call_id": "c1", "output": "SECRET-OUTPUT"}),
        line(
            11,
            "response_item",
            {"type": "custom_tool_call", "name": "apply_patch", "input": "SECRET-PATCH", "call_id": "c2"},
        ),
        line(12, "response_item", {"type": "custom_tool_call_output", "call_id": "c2", "output": "SECRET-DONE"}),
        line(13, "response_item", {"type": "local_shell_call", "call_id": "c3", "action": {"command": ["SECRET-LS"]}}),
        line(14, "response_item", {"type": "web_search_call", "action": {"query": "SECRET-SEARCH"}}),
        line(15, "event_msg", {"type": "agent_message", "message": "The billing job now runs in the nightly queue"}),
        line(16, "response_item", message("assistant", "The billing job now runs in the nightly queue")),
        line(17, "event_msg", {"type": "token_count", "info": {"total": 10}}),
        line(18, "compacted", {"message": "SECRET-SUMMARY of the conversation so far"}),
        line(19, "event_msg", {"type": "context_compacted"}),
        line(20, "event_msg", {"type": "turn_aborted", "reason": "interrupted"}),
        line(21, "brand_new_line_type", {"anything": "SECRET-UNKNOWN"}),
        "{not json",
        line(23, "event_msg", {"type": "user_message", "message": "Also keep the retries at three"}),
        line(24, "response_item", message("user", "Also keep the retries at three")),
        line(25, "response_item", message("assistant", "Retries stay at three")),
        line(26, "event_msg", {"type": "agent_message", "message": "Retries stay at three"}),
    ]


def write(path: Path, lines: list[str]) -> Path:
    """``lines`` as a JSONL file at ``path`` (its folder made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def transcript(path: Path, session: str, turns: int) -> Path:
    """A Claude Code transcript of ``turns`` turns of ``session`` at ``path``."""
    made = claude_transcript(path.with_suffix(".tmp"), turns)
    path.write_text(made.read_text().replace("cc-hooks", session))
    made.unlink()
    return path
