"""``scriptorium hook`` driven as Claude Code and Codex drive it: a payload on stdin, the command's output read back.

The hook's logic runs in this process (:func:`tests.helpers.hooks.hook`); the protocol (a real process's stdin,
stdout and exit code) is :func:`test_the_installed_command_speaks_the_protocol`'s and the unknown argument's.
Embedded (in-process passes) here; against a real cluster in ``tests/cluster/test_hooks_cluster.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scriptorium.workspace import MemoryWorkspace, TopicChange
from tests.checks import records_citing
from tests.cluster.conftest import wait_for
from tests.conftest import message
from tests.helpers.hooks import common, context, history, hook, hook_process
from tests.helpers.transcripts import cc, claude_transcript, rollout, write


def test_session_start_injects_the_trusted_core_as_memory_context(state: Path) -> None:
    text = context(hook(state, common("SessionStart", source="startup")), "SessionStart")
    assert text.startswith('<memory-context kind="core">') and text.endswith("</memory-context>")
    assert "The user is called Sam" in text and "yacht" not in text, "pending-backed records stay out"
    assert len(text) <= 10_000


def test_a_large_core_is_cut_to_claude_codes_cap(state: Path) -> None:
    ws = MemoryWorkspace(state / "memory")
    facts = "\n\n".join(f"Fact number {n} is about the deployment rota [k](test/t1/m1)." for n in range(600))
    core = ws.read_topic("topics/core.md")
    ws.apply_changes([TopicChange("topics/core.md", "update", f"{core}\n{facts}\n")], message="big core")
    ws.close()
    out = hook(state, common("SessionStart"), SCRIPTORIUM_CORE_BUDGET="20000")
    text = context(out, "SessionStart")
    assert 9_000 < len(text) <= 10_000 and text.endswith("</memory-context>")


def test_user_prompt_submit_recalls_trusted_records_within_its_budget(state: Path) -> None:
    text = context(hook(state, common("UserPromptSubmit", prompt="when do releases ship?")), "UserPromptSubmit")
    assert text.startswith('<memory-context kind="recall">') and "Releases ship on Thursdays" in text
    only_pending = hook(state, common("UserPromptSubmit", prompt="where is the yacht moored"))
    assert only_pending.returncode == 0 and only_pending.stdout == "", "pending-backed records are never recalled"
    slow = hook(state, common("UserPromptSubmit", prompt="releases"), SCRIPTORIUM_HOOK_SEARCH_BUDGET_MS="0.001")
    assert slow.returncode == 0 and slow.stdout == "", "past the budget: no context rather than a slow prompt"


def test_a_question_asked_in_many_sessions_does_not_crowd_its_answer_out_of_the_recall(state: Path) -> None:
    """Thirty earlier sessions asked the same question (each a record repeating it, which recall leaves out):
    the answer, ranked below all of them, still reaches the prompt."""
    ws = MemoryWorkspace(state / "memory")
    asked = [message(100 + 2 * n + 1, "When do releases ship?", thread=f"asked{n}") for n in range(30)]
    with ws.lock():
        paths = ws.archive_sources(asked)
    ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    body = "\n\n".join(f"User: When do releases ship? [k](test/asked{n}/m{101 + 2 * n})." for n in range(30))
    ws.apply_changes([TopicChange("topics/asked.md", "create", f"# Asked\n\n{body}\n")], message="asked")
    ws.close()
    text = context(hook(state, common("UserPromptSubmit", prompt="When do releases ship?")), "UserPromptSubmit")
    assert "Releases ship on Thursdays" in text, text


def test_an_argument_this_release_does_not_know_never_blocks_the_prompt(state: Path) -> None:
    """A plugin newer than the installed command may pass a flag it does not know: the hook still answers
    and exits 0 (an exit code of 2 would block the prompt in Claude Code)."""
    done = hook_process(state, common("SessionStart", source="startup"), "--plugin", "--from-the-future")
    assert "The user is called Sam" in context(done, "SessionStart")


def test_the_installed_command_speaks_the_protocol(state: Path) -> None:
    """The real process, as a runtime starts it: the context as one JSON line on stdout and exit 0; a payload
    it cannot read is exit 0 with nothing on stdout (the runtime acts on both), its reason on stderr."""
    done = hook_process(state, common("UserPromptSubmit", prompt="when do releases ship?"))
    assert done.stdout.endswith("\n") and done.stdout.count("\n") == 1, done.stdout
    assert "Releases ship on Thursdays" in context(done, "UserPromptSubmit")
    garbage = hook_process(state, "garbage")
    assert (garbage.returncode, garbage.stdout) == (0, "") and "INVALID_ARGUMENT" in garbage.stderr


@pytest.mark.parametrize(
    "body",
    ["", "garbage", "[1, 2]", '{"hook_event_name": "Nope"}', json.dumps({"session_id": "x"}), "{" * 5000],
)
def test_garbage_or_empty_stdin_exits_0_with_nothing_on_stdout(state: Path, body: str) -> None:
    before = len(history(state))
    out = hook(state, body)
    assert (out.returncode, out.stdout) == (0, "")
    failures = [h for h in history(state)[before:] if h["op"] == "hook"]
    assert [h["reason"] for h in failures] == ["INVALID_ARGUMENT"]
    assert "hook.failed" in out.stderr and "INVALID_ARGUMENT" in out.stderr


@pytest.mark.parametrize("event", ["Stop", "SubagentStop", "PreCompact", "SessionEnd"])
def test_a_hook_whose_transcript_was_never_written_is_a_no_op_not_a_failure(
    state: Path, tmp_path: Path, event: str
) -> None:
    """``claude mcp list`` and ``claude doctor`` end a "session" with a transcript path nothing wrote."""
    before = history(state)
    out = hook(state, common(event, transcript=tmp_path / "gone.jsonl", reason="other"))
    assert (out.returncode, out.stdout) == (0, "")
    assert history(state) == before, "nothing recorded: no failure, and no pass"


def test_a_transcript_outside_the_servers_roots_is_still_refused_and_recorded(state: Path, tmp_path: Path) -> None:
    from scriptorium.runtimes.hooks.command import run_hook
    from scriptorium.settings import Settings

    settings = Settings(state=state, watch=False)
    inside = tmp_path / "runtime-folder"
    inside.mkdir()
    payload = json.dumps(common("Stop", transcript=tmp_path / "gone.jsonl")).encode()
    assert run_hook(payload, settings, transcript_roots=[inside]) == ""
    assert history(state)[-1]["hook"] == "Stop" and history(state)[-1]["reason"] == "FORBIDDEN"


def test_a_broken_workspace_never_fails_the_agent(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "memory").mkdir(parents=True)  # not a workspace
    out = hook(state, common("SessionStart"))
    assert (out.returncode, out.stdout) == (0, "")
    assert "WORKSPACE_MISSING" in out.stderr or "hook.failed" in out.stderr


def test_stop_imports_the_increment_and_writes_each_turn_once(state: Path, tmp_path: Path) -> None:
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
    out = hook(state, common("Stop", transcript=transcript, stop_hook_active=False, last_assistant_message="x"))
    assert (out.returncode, out.stdout) == (0, "")
    claude_transcript(transcript, 6, start=4)
    hook(state, common("SubagentStop", transcript=transcript, agent_transcript_path=str(transcript)))
    cited = records_citing(state / "memory")
    turns = {f"claude-code/cc-hooks/e{n}" for n in range(6)}
    assert {k: v for k, v in cited.items() if k in turns} == dict.fromkeys(turns, 1)
    passes = [h for h in history(state) if h["op"] == "write" and h["session"] == "cc-hooks"]
    assert [h["force"] for h in passes] == [False, False] and all(h["ok"] for h in passes)


def test_a_head_that_jumps_to_another_branch_gets_the_branch_it_left_written_at_once(
    state: Path, tmp_path: Path
) -> None:
    """The user goes back to turn 1 and asks again: the branch left (e2, e3) is written by that Stop hook,
    whole and though below the trigger; the new branch waits for its trigger as usual."""
    lots = {"SCRIPTORIUM_TRIGGER_TOKENS": "99999"}
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
    hook(state, common("Stop", transcript=transcript), **lots)
    assert not {k for k in records_citing(state / "memory") if k.startswith("claude-code/cc-hooks/")}
    with transcript.open("a") as handle:  # the re-ask: a fork from e1
        handle.write(cc(10, "e1", "user").replace("inc-session", "cc-hooks") + "\n")
        handle.write(cc(11, "e10", "assistant").replace("inc-session", "cc-hooks") + "\n")
    out = hook(state, common("Stop", transcript=transcript), **lots)
    assert (out.returncode, out.stdout) == (0, "")
    cited = {k: v for k, v in records_citing(state / "memory").items() if k.startswith("claude-code/cc-hooks/")}
    assert cited == {f"claude-code/cc-hooks/e{n}": 1 for n in range(4)}, "the left branch, with its prefix"
    forced = [h for h in history(state) if h["op"] == "write" and h["session"] == "cc-hooks" and h["force"]]
    assert len(forced) == 1 and forced[0]["ok"]


def test_pre_compact_forces_the_pass_and_session_end_hands_it_off(state: Path, tmp_path: Path) -> None:
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 2)
    out = hook(state, common("PreCompact", transcript=transcript, trigger="auto"), SCRIPTORIUM_TRIGGER_TOKENS="99999")
    assert (out.returncode, out.stdout) == (0, "")
    assert history(state)[-1]["force"] is True and history(state)[-1]["outcome"] == "written"
    claude_transcript(transcript, 4, start=2)
    started = time.perf_counter()
    out = hook(state, common("SessionEnd", transcript=transcript, reason="exit"), SCRIPTORIUM_TRIGGER_TOKENS="99999")
    assert (out.returncode, out.stdout) == (0, "") and time.perf_counter() - started < 10
    wait_for(
        lambda: records_citing(state / "memory").get("claude-code/cc-hooks/e3") == 1, 60, "the detached forced pass"
    )


def test_codex_hooks_share_the_shape(state: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "codex" / "rollout-1.jsonl", rollout("codex-hooks"))
    out = hook(state, common("Stop", session="codex-hooks", transcript=path))
    assert (out.returncode, out.stdout) == (0, "")
    cited = records_citing(state / "memory")
    assert sum(1 for k in cited if k.startswith("codex/codex-hooks/")) == 4


def test_the_installed_core_is_injected_as_rendered_when_every_core_record_is_trusted(state: Path) -> None:
    """The SessionStart shortcut (the installed view) gives what rendering the block would."""
    from scriptorium.provider import effective_core
    from scriptorium.recall.context import installed_core_if_trusted
    from scriptorium.recall.index import RecallIndex

    memory = state / "memory"
    assert installed_core_if_trusted(memory) is None, "a pending-backed core record: render instead"
    ws = MemoryWorkspace(memory)
    ws.promote_source("test/web/m2")
    expected = effective_core(ws, RecallIndex(memory))
    ws.close()
    assert installed_core_if_trusted(memory) == expected and "yacht" in expected
    text = context(hook(state, common("SessionStart")), "SessionStart")
    assert expected in text


@pytest.mark.parametrize(
    ("source", "injected"), [("startup", True), ("clear", True), ("compact", True), ("resume", False)]
)
def test_a_resumed_session_does_not_get_the_core_a_second_time(state: Path, source: str, injected: bool) -> None:
    out = hook(state, common("SessionStart", source=source))
    assert out.returncode == 0, out.stderr
    assert ("The user is called Sam" in out.stdout) is injected, out.stdout


def test_recall_leaves_out_what_the_asking_session_holds_and_repeats(state: Path, tmp_path: Path) -> None:
    """The session's own turns (already in its context), an earlier session's copy of the very question,
    and a second record saying the same thing are not recalled; other records are."""

    def session(name: str, texts: list[str]) -> Path:
        path = tmp_path / f"{name}.jsonl"
        lines = [
            cc(n, f"e{n - 1}" if n else None, "user" if n % 2 == 0 else "assistant", text).replace("inc-session", name)
            for n, text in enumerate(texts)
        ]
        path.write_text("".join(f"{line}\n" for line in lines))
        return path

    asked = "Which harbour does the ferry to Skye leave from?"
    own = session("cc-own", ["The ferry to Skye leaves from Mallaig harbour.", "Noted: Mallaig harbour."])
    earlier = session("cc-earlier", [asked, "I do not know yet which harbour."])
    twice = session("cc-twice", ["The ferry to Skye also stops at Armadale harbour.", "ok"])
    again = session("cc-again", ["The ferry to Skye also stops at Armadale harbour.", "fine"])
    for name, path in (("cc-own", own), ("cc-earlier", earlier), ("cc-twice", twice), ("cc-again", again)):
        assert hook(state, common("SessionEnd", session=name, transcript=path, reason="exit")).returncode == 0

    recalled = context(hook(state, common("UserPromptSubmit", session="cc-own", prompt=asked)), "UserPromptSubmit")
    assert "Mallaig" not in recalled, "the asking session's own turns are in its context already"
    repeated = "User: The ferry to Skye also stops at Armadale harbour."
    assert recalled.count(repeated) == 1, "a record repeating another is recalled once"
    assert "User: " + asked not in recalled, "an earlier session's copy of the question adds nothing"
    assert "I do not know yet which harbour" in recalled
    elsewhere = context(hook(state, common("UserPromptSubmit", session="cc-other", prompt=asked)), "UserPromptSubmit")
    assert "Mallaig harbour" in elsewhere, "another session is told what this one learnt"


def test_session_start_adds_the_newest_records_of_the_projects_earlier_sessions(state: Path, tmp_path: Path) -> None:
    project = tmp_path / "harbour"
    (project / ".git").mkdir(parents=True)
    (project / "src").mkdir()

    def session(name: str, cwd: Path, text: str) -> Path:
        path = tmp_path / f"{name}.jsonl"
        lines = []
        for n, said in enumerate([text, "Noted."]):
            entry = json.loads(cc(n, f"e{n - 1}" if n else None, "user" if n == 0 else "assistant", said))
            lines.append(json.dumps({**entry, "sessionId": name, "cwd": str(cwd)}))
        path.write_text("".join(f"{line}\n" for line in lines))
        return path

    sessions = {
        "cc-root": session("cc-root", project, "The harbour app deploys with make ship."),
        "cc-sub": session("cc-sub", project / "src", "The harbour app keeps its tide tables in src/tides."),
        "cc-away": session("cc-away", tmp_path / "elsewhere", "The garden needs water on Fridays."),
    }
    for name, path in sessions.items():
        assert hook(state, common("SessionEnd", session=name, transcript=path, reason="exit")).returncode == 0

    started = hook(state, common("SessionStart", session="cc-new", source="startup", cwd=str(project / "src")))
    text = context(started, "SessionStart")
    assert "The user is called Sam" in text, "the core first"
    project_block = text[text.index('<memory-context kind="project">') :]
    assert "make ship" in project_block and "tide tables" in project_block
    assert "garden" not in project_block, "another folder's sessions are not this project's"
    outside = hook(state, common("SessionStart", session="cc-x", source="startup", cwd=str(tmp_path / "elsewhere")))
    assert "garden needs water" in context(outside, "SessionStart") and "make ship" not in context(
        outside, "SessionStart"
    ), "outside a git work tree, the very folder is the project"


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("SCRIPTORIUM_TRIGGER_TOKENS", "many"),
        ("SCRIPTORIUM_IDLE_MINUTES", "soon"),
        ("SCRIPTORIUM_SEARCH_MODE", "psychic"),
    ],
)
def test_bad_settings_never_fail_the_agent(tmp_path: Path, setting: str, value: str) -> None:
    """docs/runtimes.md's promise: `scriptorium hook` exits 0 and prints nothing the runtime would act on, whatever
    the environment holds; the reason goes to stderr, naming the setting."""
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
        done = hook(tmp_path / "state", common(event, prompt="hi"), **{setting: value})
        assert (done.returncode, done.stdout) == (0, ""), (event, done.stderr)
        assert setting.removeprefix("SCRIPTORIUM_").lower() in done.stderr, done.stderr
    placed = tmp_path / "not-a-folder"
    placed.write_text("a file where the state folder should be")
    done = hook(placed, common("UserPromptSubmit", prompt="hi"))
    assert (done.returncode, done.stdout) == (0, "") and placed.read_text().startswith("a file"), done.stderr


def test_the_hook_client_without_site_finds_no_default_state_rather_than_failing(tmp_path: Path) -> None:
    """Started without the site module and naming no state, the client cannot resolve the per-user default
    (platformdirs lives in site-packages): it says so (None, the full command answers) instead of raising;
    with site it finds the default."""
    root = Path(__file__).resolve().parents[2]
    code = "import sys; sys.path.insert(0, sys.argv[1]); from scriptorium.runtimes.hooks.client import named_state; "
    code += "print(named_state([]))"
    env = {k: v for k, v in os.environ.items() if k != "SCRIPTORIUM_STATE"} | {"HOME": str(tmp_path)}
    env |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data")}
    bare = subprocess.run([sys.executable, "-S", "-c", code, str(root)], capture_output=True, text=True, env=env)
    assert (bare.returncode, bare.stdout.strip()) == (0, "None"), bare.stderr
    full = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, env=env)
    assert full.stdout.strip() == str(tmp_path / "data" / "scriptorium"), full.stderr
