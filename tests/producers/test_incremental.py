"""Incremental imports: only new lines are read, a torn last line waits, a rewritten file is read again."""

from __future__ import annotations

import json
import os
from pathlib import Path

from scriptorium.producers.importing import read_increment
from scriptorium.producers.ingest import import_paths
from scriptorium.sessions import open_store
from tests.helpers.transcripts import cc
from tests.producers.helpers import cited_once, ingest, nodes_of


def turns(start: int, count: int) -> list[str]:
    """Alternating user/assistant turns e<start>…, each following the previous (with a progress entry between)."""
    lines = []
    for n in range(start, start + count):
        parent = f"e{n - 1}" if n > 0 else None
        if n % 3 == 0 and n > 0:  # a progress entry in the chain, never a node
            lines.append(
                json.dumps({"type": "progress", "uuid": f"p{n}", "parentUuid": parent, "sessionId": "inc-session"})
            )
            parent = f"p{n}"
        lines.append(cc(n, parent, "user" if n % 2 == 0 else "assistant"))
    return lines


def test_an_appended_transcript_imports_only_its_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "inc-session.jsonl"
    progress = json.dumps({"type": "progress", "uuid": "p10", "parentUuid": "e9", "sessionId": "inc-session"})
    path.write_text("\n".join([*turns(0, 10), progress]) + "\n")  # ends in an entry that is never a node
    state = tmp_path / "state"
    first = ingest(state, path)
    assert first["records"] == 10 and first["lines_read"] == 14
    with path.open("a") as handle:
        handle.write("\n".join([cc(10, "p10"), cc(11, "e10", "assistant")]) + "\n")
    second = ingest(state, path)
    assert second["lines_read"] == 2 and second["new_nodes"] == 2 and second["records"] == 2
    nodes = {n.id: n for n in nodes_of(state, "inc-session")}
    assert nodes["e10"].parent_id == "e9", "an entry left out by the earlier import is re-parented through"
    assert nodes["e11"].parent_id == "e10"
    cited_once(state / "memory", list(nodes.values()))


def test_a_torn_last_line_waits_for_the_next_import(tmp_path: Path) -> None:
    path = tmp_path / "inc-session.jsonl"
    whole = turns(0, 4)
    path.write_text("\n".join(whole[:-1]) + "\n" + whole[-1][:25])  # the runtime is still writing
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    first = import_paths(store, [path], redactor=None)
    assert first.new_nodes == 3 and first.lines_read == 4
    with path.open("a") as handle:
        handle.write(whole[-1][25:] + "\n")
    second = import_paths(store, [path], redactor=None)
    assert second.new_nodes == 1 and second.lines_read == 1 and second.bad_lines == 0
    assert store.get_session("inc-session").head == "e3"  # type: ignore[union-attr]
    store.close()


def test_a_truncated_or_rewritten_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "inc-session.jsonl"
    path.write_text("\n".join(turns(0, 6)) + "\n")
    store = open_store(f"sqlite:///{tmp_path / 'sessions.db'}")
    import_paths(store, [path], redactor=None)
    path.write_text("\n".join(turns(0, 3)) + "\n")  # truncated
    shorter = import_paths(store, [path], redactor=None)
    assert shorter.restarted == [str(path)] and shorter.lines_read == 3 and shorter.new_nodes == 0
    text = path.read_text().replace("turn 1 about", "turn one about")  # rewritten in place, same length or not
    with path.open("r+") as handle:
        handle.write(text)
    rewritten = import_paths(store, [path], redactor=None)
    assert rewritten.restarted == [str(path)]
    replaced = tmp_path / "next.jsonl"
    replaced.write_text("\n".join(turns(0, 8)) + "\n")
    os.replace(replaced, path)  # another file (inode) under the same name
    again = import_paths(store, [path], redactor=None)
    assert again.restarted == [str(path)] and again.new_nodes == 2
    store.close()


def test_the_cursor_reads_nothing_when_nothing_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "inc-session.jsonl"
    path.write_text("\n".join(turns(0, 5)) + "\n")
    first = read_increment(path, None)
    assert len(first.lines) == 6 and first.cursor.offset == path.stat().st_size
    again = read_increment(path, first.cursor)
    assert again.lines == [] and not again.restarted and again.cursor.offset == first.cursor.offset


def test_a_subagent_that_goes_on_in_a_later_import_stays_one_session(tmp_path: Path) -> None:
    path = tmp_path / "sub.jsonl"

    def side(n: int, parent: str | None, role: str) -> str:
        entry = json.loads(cc(n, parent, role))
        return json.dumps({**entry, "isSidechain": True})

    lines = [cc(0, None, "user"), cc(1, "e0", "assistant"), side(2, None, "user"), side(3, "e2", "assistant")]
    path.write_text("\n".join(lines) + "\n")
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        first = import_paths(store, [path], redactor=None)
        assert first.sessions == ["inc-session", "inc-session.agent-e2"]
        with path.open("a") as handle:
            handle.write(side(4, "e3", "user") + "\n")
        again = import_paths(store, [path], redactor=None)
        assert again.lines_read == 1 and again.new_nodes == 1
        assert [n.id for n in store.get_branch("inc-session.agent-e2")] == ["e2", "e3", "e4"]
        assert [n.id for n in store.get_branch("inc-session")] == ["e0", "e1"]
    finally:
        store.close()


def test_a_title_is_taken_only_from_the_session_s_first_message(tmp_path: Path) -> None:
    """The first import titles an untitled session by its first user message; an increment never re-titles it,
    and a session stored before titles were derived is not titled by whatever message comes next."""
    path = tmp_path / "inc.jsonl"
    path.write_text(cc(0, None, text="Plan the deployment of the billing cluster") + "\n")
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        import_paths(store, [path], redactor=None)
        session = store.get_session("inc-session")
        assert session is not None and session.title == "Plan the deployment of the billing cluster · -session"
        with path.open("a") as handle:
            handle.write(cc(1, "e0", "assistant") + "\n" + cc(2, "e1", text="Then the cutover") + "\n")
        import_paths(store, [path], redactor=None)
        assert store.get_session("inc-session").title == session.title  # type: ignore[union-attr]

        # As an older release left it: nodes stored, no title, no title_from.
        old = tmp_path / "old.jsonl"
        old.write_text(cc(0, None).replace("inc-session", "old-session") + "\n")
        import_paths(store, [old], redactor=None)
        store.create_session("old-session", {"title": None, "title_from": None})
        assert store.get_session("old-session").title == "Session old-session"  # type: ignore[union-attr]
        with old.open("a") as handle:
            handle.write(cc(1, "e0", text="A later question").replace("inc-session", "old-session") + "\n")
        import_paths(store, [old], redactor=None)
        assert store.get_session("old-session").title == "Session old-session"  # type: ignore[union-attr]
    finally:
        store.close()
