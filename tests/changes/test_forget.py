"""Forgetting for real, through the CLI on real files: records, sources, derived state, the session store
and (with --purge-history) git history lose the forgotten text; the other conversation keeps every byte of
its records."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.paths import conversation_file, source_identity_from_path, source_path
from scriptorium.workspace.sources import parse_source
from scriptorium.workspace.threads import split
from scriptorium.workspace.topics import without_footnote_refs
from tests.conftest import git_log, git_tree_of_files, tree_bytes
from tests.helpers.edge import console

SECRET = "zebra-quartz-4417"
SECRET_LINE = f"The vault passphrase is {SECRET}, keep it between us."
KEPT = "The standup moves to nine thirty on Mondays."


def _transcript(path: Path, session: str, texts: list[str]) -> Path:
    lines, parent = [], None
    for n, text in enumerate(texts):
        uuid = f"{session}-{n}"
        role = "user" if n % 2 == 0 else "assistant"
        content: Any = text if role == "user" else [{"type": "text", "text": text}]
        lines.append(
            {
                "parentUuid": parent,
                "isSidechain": False,
                "sessionId": session,
                "type": role,
                "uuid": uuid,
                "timestamp": f"2026-11-2{n}T09:00:00.000Z",
                "message": {"role": role, "content": content},
            }
        )
        parent = uuid
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def cli(state: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``scriptorium ARGS --state STATE`` in this process (asserting exit 0 unless ``check`` is off)."""
    done = console([*args, "--state", str(state)])
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two conversations ingested once (transcripts, session store, memory); each test forgets in a copy."""
    root = tmp_path_factory.mktemp("forget")
    secret = _transcript(root / "secret.jsonl", "secret-s", [SECRET_LINE, f"Noted: {SECRET} stays here."])
    keep = _transcript(root / "keep.jsonl", "keep-s", [KEPT, "Noted, Mondays at nine thirty."])
    cli(root / "state", "ingest", str(secret), str(keep))
    return root / "state", secret, keep


@pytest.fixture
def world(pristine: tuple[Path, Path, Path], tmp_path: Path) -> tuple[Path, Path, Path]:
    state = tmp_path / "state"
    shutil.copytree(pristine[0], state, symlinks=True)
    return state, pristine[1], pristine[2]


def _records(state: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """memory_id → (text, cited paths) of every installed record."""
    ws = MemoryWorkspace(state / "memory")
    snap = ws.snapshot()
    out = {r.memory_id: (r.text, tuple(t.cited_paths(r))) for t in snap.topics.values() for r in t.records}
    ws.close()
    return out


def _rev(state: Path, spec: str) -> str:
    out = subprocess.run(["git", "-C", str(state / "memory"), "rev-parse", spec], capture_output=True, text=True)
    return out.stdout.strip()


def _log(state: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(state / "memory"), "log", "--format=%H %s", "main"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


def test_a_dry_run_lists_what_would_go_and_changes_no_byte(world: tuple[Path, Path, Path]) -> None:
    state = world[0]
    before = tree_bytes(state)
    done = cli(state, "memory", "forget", "--session", "secret-s", "--dry-run", "--json")
    payload = json.loads(done.stdout)
    assert payload["dry_run"] is True and len(payload["deleted"]) == 2 and payload["deleted_shared"] == []
    assert SECRET in payload["transaction"]["diff"]  # the owner sees what goes; nothing is written
    assert tree_bytes(state) == before


def test_forgetting_a_conversation_leaves_no_byte_of_it_and_the_other_untouched(
    world: tuple[Path, Path, Path],
) -> None:
    state, secret, _keep = world
    before = _records(state)
    others = {m: v for m, v in before.items() if not any("secret-s" in p for p in v[1])}
    assert others and len(others) < len(before)
    cli(state, "memory", "search", "passphrase")  # a disk cache that holds the words
    keep_file = conversation_file(source_path("claude-code", "keep-s", "x"))
    kept_tree = _rev(state, f"HEAD:{keep_file}")
    assert kept_tree
    history = {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in _log(state)}
    done = cli(
        state, "memory", "forget", "--session", "secret-s", "--why", "erasure request", "--purge-history", "--json"
    )
    payload = json.loads(done.stdout)
    assert payload["derived"]["store"]["nodes_erased"] == 2 and payload["derived"]["store"]["compacted"] is True
    assert payload["purge"]["commits_rewritten"] >= 1
    after = _records(state)
    assert {m: v for m, v in after.items()} == others, "the other conversation's records, IDs and citations"
    memory = state / "memory"
    # No installed file, no runtime file (cache, vectors, history), no session-store file holds the text ...
    assert _files_holding(memory, SECRET.encode()) == []
    assert _files_holding(state / "sessions", SECRET.encode()) == []
    # ... and no git object: every object in the repository, reachable or not, packed or loose.
    objects = subprocess.run(
        ["git", "-C", str(memory), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout
    assert SECRET.encode() not in objects and b"passphrase" not in objects
    # The sources keep their identity and a tombstone that does not quote them.
    (conversation,) = sorted((memory / "sources").rglob("secret-s*.md"))
    relative = conversation.relative_to(memory).as_posix()
    entries = split(relative, conversation.read_bytes())
    assert len(entries) == 2
    for key, data in entries.items():
        message = parse_source(key, data)
        assert message.text == "" and message.forgotten is not None and message.forgotten["why"] == "erasure request"
    # Untouched paths keep their blobs; commits before the forgotten conversation keep their hashes.
    assert _rev(state, f"HEAD:{keep_file}") == kept_tree
    after_history = {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in _log(state)}
    keep_commit = "Write 2 message(s) of session keep-s"
    assert after_history[keep_commit] == history[keep_commit]
    assert after_history["Write 2 message(s) of session secret-s"] != history["Write 2 message(s) of session secret-s"]
    # HEAD's tree is the installed tree, the log says a purge happened (not what).
    assert git_tree_of_files(memory) == MemoryWorkspace(memory).revision
    assert "Purge history" in git_log(memory)[0]
    # Searching rebuilds the index from the installed topics: the words are gone.
    assert json.loads(cli(state, "memory", "search", "zebra quartz passphrase", "--json").stdout)["results"] == []
    assert _files_holding(memory / ".scriptorium", SECRET.encode()) == []
    # A second import of the forgotten transcript writes nothing back.
    revision = MemoryWorkspace(memory).revision
    again = json.loads(cli(state, "ingest", str(secret), "--json").stdout)
    assert MemoryWorkspace(memory).revision == revision, again
    assert _files_holding(state, SECRET.encode()) == []


def test_a_record_citing_other_sources_too_goes_whole_and_leaves_no_object_holding_it(
    world: tuple[Path, Path, Path],
) -> None:
    """A record a writer merged from both conversations is deleted with the forget (its words may be the
    forgotten conversation's), named with the other conversation's source it cited; with --purge-history no
    git object keeps it, and the other conversation's own records stay as they were."""
    state = world[0]
    before = _records(state)
    others = {m: v for m, v in before.items() if not any("secret-s" in p for p in v[1])}
    secret_source = next(p for _t, ps in before.values() for p in ps if "secret-s" in p)
    keep_source = next(p for _t, ps in before.values() for p in ps if "keep-s" in p)
    body = {
        "memory_changes": [
            {
                "op": "create_record",
                "content": "Mixed memo: the vault and the standup.",
                "time": "2026-11-22",
                "sources": [
                    {"source": "/".join(source_identity_from_path(secret_source) or ()), "label": "vault"},
                    {"source": "/".join(source_identity_from_path(keep_source) or ()), "label": "standup"},
                ],
                "destination": {"topic_path": "topics/mixed.md"},
            }
        ]
    }
    request = state / "mixed.json"
    request.write_text(json.dumps(body))
    (created,) = json.loads(cli(state, "memory", "update", str(request), "--json").stdout)["created_ids"]
    other = "/".join(source_identity_from_path(keep_source) or ())
    shared = {"memory_id": created, "topic_path": "topics/mixed.md", "other_sources": [other]}
    dry = json.loads(cli(state, "memory", "forget", "--session", "secret-s", "--dry-run", "--json").stdout)
    assert dry["deleted_shared"] == [{**shared, "content": "Mixed memo: the vault and the standup."}]
    shown = cli(state, "memory", "forget", "--session", "secret-s", "--dry-run").stdout
    assert f"^{created}  topics/mixed.md: Mixed memo: the vault and the standup.\n    also cited: {other}" in shown
    payload = json.loads(cli(state, "memory", "forget", "--session", "secret-s", "--purge-history", "--json").stdout)
    assert payload["deleted_shared"] == [shared]
    assert created in payload["deleted"] and "kept" not in payload
    assert _records(state) == others, "the merged record is gone; the other conversation's records stay"
    assert _files_holding(state / "memory", b"Mixed memo") == []
    objects = subprocess.run(
        ["git", "-C", str(state / "memory"), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    assert b"Mixed memo" not in objects


def _link_to_the_secret(state: Path) -> tuple[str, str, str]:
    """A record citing the kept conversation that links to a record of the secret one: (doomed, linker,
    the kept source it cites)."""
    before = _records(state)
    doomed = next(m for m, (_t, ps) in before.items() if any("secret-s" in p for p in ps))
    keep_source = next(p for _t, ps in before.values() for p in ps if "keep-s" in p)
    source = "/".join(source_identity_from_path(keep_source) or ())
    linking = {
        "memory_changes": [
            {
                "op": "create_record",
                "content": f"See [[topics/x.md#^{doomed}|the vault note]] for the vault.",
                "time": "2026-11-22",
                "sources": [{"source": source, "label": "standup"}],
                "destination": {"topic_path": "topics/links.md"},
            }
        ]
    }
    request = state / "link.json"
    request.write_text(json.dumps(linking))
    (linker,) = json.loads(cli(state, "memory", "update", str(request), "--json").stdout)["created_ids"]
    return doomed, linker, source


def test_a_link_to_a_forgotten_record_goes_with_it_and_keeps_its_label(world: tuple[Path, Path, Path]) -> None:
    state = world[0]
    doomed, linker, _source = _link_to_the_secret(state)
    done = json.loads(cli(state, "memory", "forget", "--session", "secret-s", "--json").stdout)
    assert done["unlinked"] == [linker]
    records = _records(state)
    assert doomed not in records
    assert without_footnote_refs(records[linker][0]) == "See the vault note for the vault."
    assert all("secret-s" not in p for p in records[linker][1])


def test_the_owner_may_rewrite_the_linking_records_in_the_same_forget(world: tuple[Path, Path, Path]) -> None:
    state = world[0]
    doomed, linker, source = _link_to_the_secret(state)
    unlink = {
        "memory_changes": [
            {
                "op": "update_record",
                "memory_id": linker,
                "content": "The vault note is gone.",
                "time": "2026-11-22",
                "sources": [{"source": source, "label": "standup"}],
            }
        ]
    }
    request = state / "unlink.json"
    request.write_text(json.dumps(unlink))
    done = json.loads(cli(state, "memory", "forget", "--session", "secret-s", "--with", str(request), "--json").stdout)
    assert done["unlinked"] == []
    assert doomed not in _records(state)
    assert without_footnote_refs(_records(state)[linker][0]) == "The vault note is gone."


def test_bad_selections_are_refused_with_reason_codes(world: tuple[Path, Path, Path]) -> None:
    state = world[0]
    before = tree_bytes(state / "memory")
    for args, reason in [
        (["--session", "no-such-session"], "NOT_FOUND"),
        (["--source", "runtime/none/none"], "NOT_FOUND"),
        (["--thread", "not-a-thread"], "INVALID_ARGUMENT"),
        (["--session", "secret-s", "--why", "x" * 501], "INVALID_ARGUMENT"),
    ]:
        done = cli(state, "memory", "forget", *args, "--json", check=False)
        assert done.returncode != 0 and reason in done.stdout + done.stderr, (args, done.stdout, done.stderr)
    assert tree_bytes(state / "memory") == before


CRASHY_PURGE = r"""
import json, os, signal, sys
from pathlib import Path
from scriptorium.workspace import install, MemoryWorkspace
from scriptorium.workspace.purge import purge_history

root, target, paths = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def crash(step):
    if step == target:
        os.kill(os.getpid(), signal.SIGKILL)
install.crash_point = crash
purge_history(MemoryWorkspace(Path(root)), paths)
"""

PURGE_STEPS = [
    "purge-objects-written",
    "purge-journal-written",
    "purge-ref-updated",
    "purge-state-written",
    "purge-pruned",
]


@pytest.mark.parametrize("step", PURGE_STEPS)
def test_a_purge_killed_at_any_step_leaves_the_old_history_or_the_new_never_a_mix(
    world: tuple[Path, Path, Path], step: str
) -> None:
    state = world[0]
    memory = state / "memory"
    payload = json.loads(cli(state, "memory", "forget", "--session", "secret-s", "--json").stdout)
    paths = payload["paths"]
    installed = MemoryWorkspace(memory).revision
    old_log = git_log(memory)
    killed = subprocess.run([sys.executable, "-c", CRASHY_PURGE, str(memory), step, json.dumps(paths)], timeout=300)
    assert killed.returncode == -9, "the purge was killed at its step"
    ws = MemoryWorkspace(memory)  # the next open finishes or rolls back
    assert ws.revision == installed == git_tree_of_files(memory), "HEAD's tree is the installed tree"
    assert not (memory / ".scriptorium" / "purge.json").exists()
    reachable = subprocess.run(
        ["git", "-C", str(memory), "log", "-p", "--all", "--format=%H %B"], capture_output=True, check=True
    ).stdout
    if step in ("purge-objects-written", "purge-journal-written"):
        assert git_log(memory) == old_log and SECRET.encode() in reachable  # rolled back: the old history
    else:
        assert len(git_log(memory)) == len(old_log) and SECRET.encode() not in reachable  # finished: the new one
        objects = subprocess.run(
            ["git", "-C", str(memory), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
        ).stdout
        assert SECRET.encode() not in objects
    ws.close()
    # Whatever the crash left, purging again completes it.
    done = json.loads(cli(state, "memory", "forget", "--session", "secret-s", "--purge-history", "--json").stdout)
    rolled_back = step in ("purge-objects-written", "purge-journal-written")
    rewritten = done["purge"]["commits_rewritten"]
    assert rewritten >= 1 if rolled_back else rewritten == 0, (step, done["purge"])  # a finished purge left none
    objects = subprocess.run(
        ["git", "-C", str(memory), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout
    assert SECRET.encode() not in objects


def _vectors(memory: Path) -> dict[str, Any]:
    import pickle

    from scriptorium.recall.embedding import VECTOR_CACHE

    with (memory / ".scriptorium" / "cache" / VECTOR_CACHE).open("rb") as handle:
        return dict(pickle.load(handle)["vectors"])


def _vector_texts(memory: Path) -> dict[str, str]:
    """Memory ID → what its record's vector encodes, as the installed topics stand."""
    from scriptorium.recall.index import RecallIndex

    return RecallIndex(memory, persist=False).vector_texts()


def test_every_derived_copy_of_the_text_goes_with_the_forget(world: tuple[Path, Path, Path]) -> None:
    """The copies beside the topics: a writer-history entry quoting the text (a rejected pass's excerpt)
    and the embedding vectors of its records — each held it before, none after; the other conversation's
    vectors stay."""
    from scriptorium.recall.embedding import text_key
    from scriptorium.workspace.writer_history import WriterHistory

    state, _secret, _keep = world
    memory = state / "memory"
    WriterHistory(memory / ".scriptorium").append(
        {"op": "write", "ok": False, "session": "secret-s", "reason": "COMMIT_REJECTED", "message": SECRET_LINE}
    )
    cli(state, "memory", "search", "passphrase", "--mode", "embedding")  # every record's vector, cached
    texts = _vector_texts(memory)
    records = _records(state)
    secret_ids = {m for m, (_t, paths) in records.items() if any("secret-s" in p for p in paths)}
    held = _vectors(memory)
    assert secret_ids and all(text_key(texts[m]) in held for m in secret_ids)
    assert SECRET.encode() in (memory / ".scriptorium" / "history.jsonl").read_bytes()
    payload = json.loads(cli(state, "memory", "forget", "--session", "secret-s", "--why", "asked", "--json").stdout)
    assert payload["derived"]["history_entries_redacted"] == 1
    assert payload["derived"]["recall"]["vectors_dropped"] == len(secret_ids)
    assert SECRET.encode() not in (memory / ".scriptorium" / "history.jsonl").read_bytes()
    left = _vectors(memory)
    assert not [m for m in secret_ids if text_key(texts[m]) in left], "no forgotten record's vector stays"
    assert all(text_key(texts[m]) in left for m in set(records) - secret_ids), "the others' vectors stay"


def test_the_vector_of_the_record_after_a_forgotten_one_goes_too(tmp_path: Path) -> None:
    """A record's vector encodes the end of the record before it (contextual embedding): forgetting one
    message drops its follower's vector, whose context held the forgotten words, as well as its own; the
    follower's next vector no longer holds them."""
    from scriptorium.recall.embedding import text_key

    words = ["Where should the offsite be?", SECRET_LINE, "Then the offsite is in Lisbon.", "Lisbon it is."]
    transcript = _transcript(tmp_path / "offsite.jsonl", "offsite-s", words)
    state = tmp_path / "state"
    cli(state, "ingest", str(transcript))
    memory = state / "memory"
    cli(state, "memory", "search", "offsite", "--mode", "embedding")  # every record's vector, cached
    before = _vector_texts(memory)
    records = _records(state)
    secret = next(m for m, (text, _paths) in records.items() if SECRET in text)
    follower = next(m for m, (text, _paths) in records.items() if "Lisbon." in text and "Then" in text)
    assert SECRET in before[follower], "the follower's vector encodes the end of the forgotten record"
    held = _vectors(memory)
    assert text_key(before[secret]) in held and text_key(before[follower]) in held
    source = next(p for p in records[secret][1] if "offsite-s" in p)
    payload = json.loads(cli(state, "memory", "forget", "--source", source, "--why", "asked", "--json").stdout)
    assert payload["derived"]["recall"]["vectors_dropped"] == 2
    left = _vectors(memory)
    assert text_key(before[secret]) not in left and text_key(before[follower]) not in left
    after = _vector_texts(memory)
    assert secret not in after and SECRET not in after[follower]
    cli(state, "memory", "search", "offsite", "--mode", "embedding")
    assert not [t for t in after.values() if SECRET in t]
    assert set(_vectors(memory)) == {text_key(t) for t in after.values()}


def test_forgetting_the_message_a_title_was_taken_from_takes_the_title_along(tmp_path: Path) -> None:
    """An untitled session is titled by its first user message; its topic file is named by its ID, and the
    heading carries the title. Forgetting that message alone moves the rest of the conversation under the
    session's ID, and with --purge-history no file or git object keeps the title's words; importing the
    transcript again titles nothing from the next message."""
    words = "Plan the quokka migration for the billing cluster before the end of the quarter"
    texts = [words, "Sure, step one is the backup.", "And after the backup?", "Then the cutover on Friday."]
    transcript = _transcript(tmp_path / "titled.jsonl", "titled-s", texts)
    state = tmp_path / "state"
    cli(state, "ingest", str(transcript))
    memory = state / "memory"
    (topic,) = [p for p in (memory / "topics").rglob("*.md") if "titled-s" in p.name]
    assert "quokka" not in topic.name, "a title taken from the conversation names no file"
    # Cut at a word: the heading is not the message, so the erasure looks for the title's form too.
    assert topic.read_text().startswith("# Plan the quokka migration for the billing… · titled-s\n")

    done = cli(state, "memory", "forget", "--source", "claude-code/titled-s/titled-s-0", "--purge-history", "--json")
    payload = json.loads(done.stdout)
    assert len(payload["deleted"]) == 1 and payload["purge"]["commits_rewritten"] >= 1
    text = topic.read_text()
    assert text.startswith("# Session titled-s\n") and text.count("\n# ") == 0, text
    assert all(t in text for t in texts[1:]), "the rest of the conversation stays, under the session's ID"
    assert _files_holding(state, b"quokka") == []
    objects = subprocess.run(
        ["git", "-C", str(memory), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True
    ).stdout
    assert b"quokka" not in objects

    cli(state, "ingest", str(transcript))
    from scriptorium.sessions import open_store

    store = open_store(f"sqlite:///{state / 'sessions' / 'sessions.db'}")
    try:
        session = store.get_session("titled-s")
        assert session is not None and session.title == "Session titled-s", "no title from the next message"
    finally:
        store.close()
    assert topic.read_text() == text


def test_a_change_that_newly_cites_a_forgotten_source_is_refused_and_changes_nothing(
    world: tuple[Path, Path, Path],
) -> None:
    """A forgotten source keeps a tombstone in the archive: a later change (a proposal held from before the
    forget, a writer that remembers the path) must not bring the text back citing it. Refused exactly as a
    citation of a source that is not archived."""
    state = world[0]
    secret_source = next(p for _t, ps in _records(state).values() for p in ps if "secret-s" in p)
    cli(state, "memory", "forget", "--session", "secret-s")
    source = "/".join(source_identity_from_path(secret_source) or ())
    body = {
        "memory_changes": [
            {
                "op": "create_record",
                "content": SECRET_LINE,
                "time": "2026-11-23",
                "sources": [{"source": source, "label": "vault"}],
                "destination": {"topic_path": "topics/back.md"},
            }
        ]
    }
    request = state.parent / "back.json"
    request.write_text(json.dumps(body))
    before = tree_bytes(state)
    done = cli(state, "memory", "update", str(request), "--json", check=False)
    assert done.returncode != 0 and "INVALID_SOURCE" in done.stdout + done.stderr, done.stdout + done.stderr
    assert f"cited source {source} is not in the archive" in done.stdout + done.stderr
    assert tree_bytes(state) == before, "a refused change leaves every stored byte as it was"
