"""The released pi (``pi -p``, pinned in tests/runtimes/clis) against the scripted model server: a session
and its fork (``--fork``), imported as a user would (``scriptorium ingest ~/.pi/agent/sessions``); and the
extension ``scriptorium setup pi`` installs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.checks import by_message, records_citing
from tests.conftest import trusted_and_pending_world
from tests.model_server import Reply, ToolCall
from tests.runtimes.real import Machine, machine


def test_a_fork_is_a_branch_of_its_session_and_the_prefix_it_repeats_is_written_once(tmp_path: Path) -> None:
    with machine(tmp_path) as user:
        user.pi_config()
        user.model.script = [Reply(text="Noted: the ferry leaves from Mallaig."), Reply(text="Noted: from Oban.")]
        user.pi("Our ferry to Skye leaves from Mallaig.")
        sessions = user.home / ".pi" / "agent" / "sessions"
        (first,) = sessions.rglob("*.jsonl")
        user.pi("Actually it leaves from Oban.", "--fork", str(first))
        forked = next(p for p in sessions.rglob("*.jsonl") if p != first)
        header = json.loads(forked.read_text().splitlines()[0])
        assert header["parentSession"] == str(first), "pi names the parent by its file's path"
        messages = {
            json.loads(line)["id"]
            for path in (first, forked)
            for line in path.read_text().splitlines()
            if json.loads(line).get("type") == "message"
        }
        assert len(messages) == 4, "two turns each, the first two repeated by the fork with the same IDs"

        user.scriptorium("ingest", str(sessions))
        cited = by_message(records_citing(user.state / "memory"))
        assert {m: cited.get(m, 0) for m in messages} == dict.fromkeys(messages, 1), (
            "every message written once: the prefix the fork repeats is the same nodes"
        )
        again = json.loads(user.scriptorium("ingest", "--json", str(sessions)).stdout)
        assert by_message(records_citing(user.state / "memory")) == cited, again


def test_untitled_sessions_are_titled_by_their_first_message_and_never_share_a_topic(tmp_path: Path) -> None:
    """pi leaves a session untitled unless asked (``/name``) and names two of one minute alike by their UUIDv7
    prefix; each is titled by its own first message and the end of its ID, in a topic of its own."""
    with machine(tmp_path) as user:
        user.pi_config()
        user.model.script = [Reply(text="Noted: the boiler service is on Tuesday."), Reply(text="Noted: Wednesday.")]
        prompts = ["Book the boiler service for Tuesday morning.", "Book the boiler service for Wednesday."]
        for prompt in prompts:
            user.pi(prompt)
        sessions = user.home / ".pi" / "agent" / "sessions"
        files = sorted(sessions.rglob("*.jsonl"))
        assert len(files) == 2
        ids = [json.loads(path.read_text().splitlines()[0])["id"] for path in files]
        # (Their UUIDv7s usually share the first 8 characters, the ones pi's own fallback name shows; not always:
        # those change every 65 s.)
        assert not any('"session_info"' in path.read_text() for path in files), "pi titled neither"

        user.scriptorium("ingest", str(sessions))
        topics = sorted((user.state / "memory" / "topics" / "conversations").rglob("*.md"))  # month folders
        headings = {path.read_text().splitlines()[0] for path in topics}
        expected = {f"# {prompt} · {sid[-8:]}" for prompt, sid in zip(prompts, ids, strict=True)}
        assert len(topics) == 2 and headings == expected, (topics, headings)
        assert all(any(sid in path.name for path in topics) for sid in ids), "each topic is named by its session"


def pi_files(user: Machine) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (user.home / ".pi").rglob("*") if p.is_file() and "sessions" not in p.parts}


def test_setup_pi_installs_the_extension_that_brings_memory_to_each_turn_and_writes_the_session(
    tmp_path: Path,
) -> None:
    """``scriptorium setup pi``: pi's first model request carries the core, once, the prompt's recall and
    the memory tools, and a memory_search called on that first turn is answered from memory; the session is
    written once after pi exits; setup again changes nothing; uninstall leaves pi's files as they were."""
    with machine(tmp_path) as user:
        user.pi_config()
        trusted_and_pending_world(user.state / "memory")
        before = pi_files(user)
        user.scriptorium("setup", "pi")
        again = json.loads(user.scriptorium("setup", "pi", "--json").stdout)
        assert {c["action"] for c in again["changes"]} == {"unchanged"}, again

        search = ToolCall("memory_search", {"query": "release day"})
        user.model.script = [Reply(tool_calls=(search,)), Reply(text="Thursdays, noted.")]
        user.pi("When do releases ship?")
        first, answered = user.model.conversation()
        assert first.text.count("The user is called Sam") == 1, "the core, once"
        assert "Releases ship on Thursdays" in first.text, "the prompt's recall"
        assert {"memory_search", "memory_get", "memory_status", "memory_update"} <= set(first.tool_names)
        result = json.dumps(answered.body["messages"][-1])
        assert '\\"ok\\": true' in result and "Releases ship on Thursdays" in result, result[:1000]
        (session_file,) = (user.home / ".pi" / "agent" / "sessions").rglob("*.jsonl")
        session = json.loads(session_file.read_text().splitlines()[0])["id"]
        user.wait_written(session, 2, 60, "the prompt and the reply, each written once")

        user.scriptorium("setup", "pi", "--uninstall")
        after = pi_files(user)
        assert {p: after.get(p) for p in before} == before, "pi's files as they were"
        assert not (user.home / ".pi" / "agent" / "extensions").exists(), "nothing of ours is left"
        # (what pi wrote itself, its auth.json and sessions, is pi's)
