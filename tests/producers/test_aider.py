"""The aider importer, on a real chat history (aider's own, kept trimmed under tests/producers/data/aider)."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from scriptorium.producers import aider
from scriptorium.producers.ingest import detect_format, import_paths
from scriptorium.sessions import NodeKind, open_store
from tests.producers.helpers import cited_once, ingest, nodes_of

REAL = Path(__file__).parent / "data" / "aider" / "project" / ".aider.chat.history.md"
AWS_KEY = "AKIAQ7RTS2ZW4N5XK3PD"
OPENAI_KEY = "sk-proj-Xq4fG7hJ2kL9mN3pQ8rS1tV6wX0yZ5aB2cD7eFT3BlbkFJa9"


def project(tmp_path: Path, text: str | None = None) -> Path:
    """A project folder holding the real history (or ``text``) as aider writes it."""
    folder = tmp_path / "paste-detect"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / aider.FILE_NAME
    if text is None:
        shutil.copy(REAL, path)
    else:
        path.write_text(text)
    return path


def test_each_started_chat_is_a_session_with_its_turns_replies_and_tool_output(tmp_path: Path) -> None:
    path = project(tmp_path)
    assert detect_format(path) == "aider"
    sessions = aider.parse_file(path)
    started = [s.metadata["aider_started"] for s in sessions]
    assert started == ["2024-08-06 10:36:19", "2024-08-06 10:53:39", "2024-08-06 11:00:08", "2024-08-06 11:01:07"]
    counts = [Counter(n.kind for n in s.nodes) for s in sessions]
    assert [(c[NodeKind.USER], c[NodeKind.ASSISTANT], c[NodeKind.TOOL_RESULT], c[NodeKind.SYSTEM]) for c in counts] == [
        (1, 1, 2, 2),
        (3, 3, 8, 5),
        (1, 1, 2, 0),
        (1, 1, 2, 0),
    ], "the six chats that were started and left at once are no sessions"
    first = sessions[0]
    assert {n.created_at.isoformat() for n in first.nodes} == {"2024-08-06T10:36:19+00:00"}
    assert first.metadata["cwd"] == str(path.parent.resolve())
    expected = [
        (NodeKind.TOOL_RESULT, "/Users/gauthier/Projects/aider/.venv/bin/aider aider/io.py"),
        (NodeKind.SYSTEM, "/ask can detect if the user does a paste"),
        (NodeKind.USER, "can detect if the user does a paste into"),  # /ask's message, as aider logs it again
        (NodeKind.ASSISTANT, "To detect if a user pastes text into the"),
        (NodeKind.TOOL_RESULT, "Tokens: 12,788 sent, 653 received."),
        (NodeKind.SYSTEM, "/ex"),
    ]
    shown = [(n.kind, n.content[: len(text)]) for n, (_kind, text) in zip(first.nodes, expected, strict=True)]
    assert shown == expected
    reply = first.nodes[3].content
    assert "```python" in reply and reply.endswith("modified `InputOutput` class.") and "Tokens:" not in reply
    assert [n.parent_id for n in first.nodes] == [None, *[n.id for n in first.nodes[:-1]]]
    assert all(s.head == s.nodes[-1].id for s in sessions)
    assert len({s.id for s in sessions}) == 4 and all(s.id.startswith("aider-") for s in sessions)


def test_a_reply_keeps_its_own_headings_and_quotes(tmp_path: Path) -> None:
    chat = [
        "",
        "# aider chat started at 2026-02-01 09:00:00",
        "",
        "#### how do we version the API?  ",
        "#### keep it short  ",
        "",
        "#### Versioning",
        "",
        "> The URL carries the major version: /v2/invoices.",
        "",
        "Minor changes stay backward compatible.",
        "",
        "> Tokens: 1,000 sent, 20 received.  ",
        "",
        "#### thanks  ",
    ]
    (session,) = aider.parse_file(project(tmp_path, "\n".join(chat) + "\n"))
    shape = [(n.kind, n.content) for n in session.nodes]
    assert shape == [
        (NodeKind.USER, "how do we version the API?\nkeep it short"),
        (
            NodeKind.ASSISTANT,
            "#### Versioning\n\n> The URL carries the major version: /v2/invoices.\n\nMinor changes stay backward "
            "compatible.",
        ),
        (NodeKind.TOOL_RESULT, "Tokens: 1,000 sent, 20 received."),
        (NodeKind.USER, "thanks"),
    ]


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def test_a_history_imported_again_or_appended_to_adds_only_its_new_nodes(tmp_path: Path) -> None:
    whole = lines_of(REAL)
    turn = whole.index("#### handle command-v and print  \n") - 1  # aider writes a blank line, then the input
    path = project(tmp_path, "".join(whole[:turn]))
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    try:
        first = import_paths(store, [path.parent], redactor=None)
        assert first.formats == {"aider": 1} and len(first.sessions) == 2
        again = import_paths(store, [path.parent], redactor=None)
        assert again.new_nodes == 0 and again.lines_read == 0
        with path.open("a") as handle:
            handle.write("".join(whole[turn:]))
        grown = import_paths(store, [path.parent], redactor=None)
        assert grown.lines_read == len(whole) - turn and grown.restarted == []
        sessions = aider.parse_file(path)
        stored = {(s.id, n.id): n.content for s in sessions for n in store.get_branch(s.id)}
        full = {(s.id, n.id): n.content for s in sessions for n in s.nodes}
        assert stored == full, "the same nodes, IDs and text as one import of the whole file"
        assert grown.new_nodes == len(full) - first.new_nodes > 0
        assert import_paths(store, [path.parent], redactor=None).new_nodes == 0
    finally:
        store.close()


def test_a_history_read_while_a_tool_output_was_written_keeps_every_turn(tmp_path: Path) -> None:
    whole = lines_of(REAL)
    cut = whole.index("> Applied edit to aider/io.py  \n")  # between two lines of one tool output
    path = project(tmp_path, "".join(whole[:cut]))
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    try:
        import_paths(store, [path.parent], redactor=None)
        with path.open("a") as handle:
            handle.write("".join(whole[cut:]))
        report = import_paths(store, [path.parent], redactor=None)
        sessions = aider.parse_file(path)
        turns = {(s.id, nid) for s in sessions for nid in store.content_node_ids(s.id)}
        full = {(s.id, n.id) for s in sessions for n in s.nodes if n.is_content and n.content}
        assert report.new_nodes > 0
        assert turns == full
    finally:
        store.close()


def test_a_history_trimmed_of_its_old_chats_adds_only_what_is_new(tmp_path: Path) -> None:
    whole = lines_of(REAL)
    path = project(tmp_path)
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    try:
        first = import_paths(store, [path], redactor=None)
        assert first.new_nodes > 0
        second_chat = next(n for n, line in enumerate(whole) if n and line.startswith("# aider chat started at"))
        kept = whole[second_chat:]
        path.unlink()  # the owner cut the oldest chat out; aider then appends to the file
        path.write_text("".join(kept) + "\n#### and the tests?  \n\nThe tests pass.\n\n")
        report = import_paths(store, [path], redactor=None)
        assert report.lines_read == len(kept) + 5  # its first chat is another now: read from the start
        assert report.new_nodes == 2, "the new input and reply, nothing read before"
        last = aider.parse_file(path)[-1]
        assert [n.content for n in last.nodes[-2:]] == ["and the tests?", "The tests pass."]
    finally:
        store.close()


def test_a_secret_in_a_message_is_redacted_in_the_stored_nodes_and_memory(tmp_path: Path) -> None:
    chat = [
        "",
        "# aider chat started at 2026-02-01 09:00:00",
        "",
        "> aider --model sonnet  ",
        "",
        f"#### deploy with the key {AWS_KEY} and OPENAI_API_KEY={OPENAI_KEY}  ",
        "",
        "I will not keep that key in the code; the deploy script reads it from the environment.",
        "",
        "> Tokens: 1,000 sent, 20 received.  ",
    ]
    path = project(tmp_path, "\n".join(chat) + "\n")
    state = tmp_path / "state"
    report = ingest(state, path.parent)
    (session_id,) = report["session_ids"]  # type: ignore[misc]
    user = next(n for n in nodes_of(state, session_id) if n.kind is NodeKind.USER)
    assert AWS_KEY not in user.content and OPENAI_KEY not in user.content and "[redacted:" in user.content
    for stored in (state / "memory").rglob("*"):
        if stored.is_file():
            data = stored.read_bytes()
            assert AWS_KEY.encode() not in data and OPENAI_KEY.encode() not in data, stored


def test_ingest_of_a_project_folder_writes_memory_once_and_the_watcher_follows_it(tmp_path: Path) -> None:
    from scriptorium.runtimes.hooks.watcher import sweep
    from scriptorium.settings import Settings

    whole = lines_of(REAL)
    turn = whole.index("#### handle command-v and print  \n") - 1
    path = project(tmp_path, "".join(whole[:turn]))
    state = tmp_path / "state"
    first = ingest(state, path.parent)
    assert first["formats"] == {"aider": 1} and first["failures"] == [] and first["records"]  # type: ignore[comparison-overlap]
    with path.open("a") as handle:  # aider goes on: the watcher, not a hook, finds what it wrote
        handle.write("".join(whole[turn:]))
    counts = sweep(Settings(state=state))
    assert counts["transcripts_grown"] == 1 and counts["new_nodes"] > 0
    again = ingest(state, path.parent)
    assert again["new_nodes"] == 0
    nodes = [n for sid in again["session_ids"] for n in nodes_of(state, sid)]  # type: ignore[attr-defined]
    cited_once(state / "memory", nodes)


def test_a_malformed_history_is_reported_unrecognized_and_nothing_is_stored(tmp_path: Path) -> None:
    path = project(tmp_path, "#### a user line with no chat header\n\nsome text\n")
    (path.parent / "notes.md").write_text("# aider chat started at yesterday\n")  # not aider's, not where it writes
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    try:
        report = import_paths(store, [path.parent, path.parent / "notes.md"], redactor=None)
        assert sorted(Path(p).name for p in report.unrecognized) == [aider.FILE_NAME, "notes.md"]
        assert report.new_nodes == 0 and report.sessions == [] and store.list_sessions() == []
    finally:
        store.close()
