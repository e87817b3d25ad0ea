"""Layout 2 (issue 55): sources sharded by a hash of the thread and conversation topics by month, so a commit
rewrites a few small trees whatever the memory's size; and the migration of a layout-1 workspace, which keeps
every memory ID, citation and link valid and the history readable, and survives a kill at any step.

The layout-1 workspace is ``tests/data/layout1/memory.tar.gz``: made by the release before layout 2
(``scriptorium ingest`` of ``tests/data`` and ``examples/transcript.jsonl``, then through its API: three notes
archived under a thread whose name is encoded, a topic citing them with a wikilink and Markdown block links into
conversation topics, a conversation record linking back, a core record, and one source forgotten).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from scriptorium.errors import ReasonCode, SchemaTooNew
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace import layout as layout_module
from scriptorium.workspace.paths import (
    LAYOUT,
    LAYOUT_VERSION,
    conversation_file,
    conversation_topic_base,
    is_legacy_source_path,
    legacy_source_path,
    resolve_link,
    source_identity_from_path,
    source_path,
)
from scriptorium.workspace.sources import SourceMessage
from scriptorium.workspace.threads import read_entry
from scriptorium.workspace.topics import parse_topic
from tests.checks import tree_problems
from tests.conftest import tree_bytes

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "layout1" / "memory.tar.gz"
_WIKI = re.compile(r"\[\[([^\[\]|#\n]*)#\^([A-Za-z0-9_-]+)")
_MD = re.compile(r"\]\(([^()\s#]+)#\^([A-Za-z0-9_-]+)\)")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={root / '.git'}", *args], capture_output=True, text=True, check=True
    ).stdout


def _layout1(where: Path) -> Path:
    """A fresh copy of the layout-1 workspace, not opened yet."""
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(where, filter="tar")
    return where / "memory"


# -- (d) paths of both layouts ----------------------------------------------------------------------------


def test_a_source_path_is_sharded_by_its_thread_and_both_layouts_parse() -> None:
    path = source_path("claude-code", "comp-session", "u-1")
    assert path == "sources/claude-code/77/comp-session/u-1.md"
    assert source_identity_from_path(path) == ("claude-code", "comp-session", "u-1")
    old = legacy_source_path("claude-code", "comp-session", "u-1")
    assert old == "sources/claude-code/comp-session/u-1.md" and is_legacy_source_path(old)
    assert source_identity_from_path(old) == ("claude-code", "comp-session", "u-1"), "old commits still parse"
    assert not is_legacy_source_path(path)
    assert source_identity_from_path("sources/claude-code/00/comp-session/u-1.md") is None, "a wrong shard"
    odd = source_path("scriptorium", "notes & ideas", "n1")
    assert source_identity_from_path(odd) == ("scriptorium", "notes & ideas", "n1")
    topic = "topics/conversations/2026-11/2026-11-30-x.md"
    resolved = resolve_link(topic, "../../../" + odd.replace("%", "%25"))
    assert resolved is not None and source_identity_from_path(resolved) == ("scriptorium", "notes & ideas", "n1")
    assert conversation_topic_base("2026-11-30", "plan") == "topics/conversations/2026-11/2026-11-30-plan"


def test_a_topic_of_layout_1_reads_its_citations() -> None:
    text = "2026-11-30: Tea. [^e-1] ^m-1\n\n[^e-1]: [tea](../../sources/claude-code/comp-session/u-1.md#source-u-1)\n"
    topic = parse_topic("topics/conversations/2026-11-30-x.md", text)
    note = topic.footnotes["e-1"]
    assert note.source is not None and note.source.identity == "claude-code/comp-session/u-1"
    assert note.source_path == "sources/claude-code/comp-session/u-1.md"


# -- (a) a commit rewrites a few small trees ----------------------------------------------------------------


def _grown(root: Path, threads: int) -> MemoryWorkspace:
    """A workspace of ``threads`` conversations (a source and a topic each, thirty a month), then one more
    pass: a new conversation's source and its topic."""
    ws = MemoryWorkspace.init(root)
    messages = [
        SourceMessage("claude-code", f"session-{n:05d}", "u-1", "user", "2026-01-01T00:00:00Z", f"said {n}")
        for n in range(threads)
    ]
    changes = []
    for n in range(threads):
        month = n // 30
        day = f"{2000 + month // 12}-{month % 12 + 1:02d}-{n % 28 + 1:02d}"
        path = f"{conversation_topic_base(day, f'talk-{n}')}.md"
        changes.append(TopicChange(path, "create", f"{day}: Said {n} [k](claude-code/session-{n:05d}/u-1).\n"))
    with ws.lock():
        ws.archive_sources(messages)
    ws.apply_changes(changes, message="a history of conversations")
    new = SourceMessage("claude-code", "session-new", "u-1", "user", "2026-01-01T00:00:00Z", "said anew")
    with ws.lock():
        ws.archive_sources([new])
    day = "2099-01-05"
    ws.apply_changes(
        [
            TopicChange(
                f"{conversation_topic_base(day, 'new')}.md", "create", f"{day}: New [k](claude-code/session-new/u-1).\n"
            )
        ],
        message="one more pass",
    )
    return ws


def _new_trees(root: Path) -> tuple[int, int]:
    """(how many, how many bytes): the trees the last commit wrote that its parent did not have."""
    listing = _git(root, "diff-tree", "-r", "-t", "HEAD~1", "HEAD")
    shas = {line.split()[3] for line in listing.splitlines() if line.split()[1] == "040000"}
    shas.add(_git(root, "rev-parse", "HEAD^{tree}").strip())
    return len(shas), sum(int(_git(root, "cat-file", "-s", sha)) for sha in shas)


def test_a_commit_writes_a_few_small_trees_however_many_conversations_there_are(tmp_path: Path) -> None:
    sizes = {}
    for threads in (250, 1000):
        ws = _grown(tmp_path / str(threads) / "memory", threads)
        sizes[threads] = _new_trees(ws.root)
        ws.close()
    (count_n, bytes_n), (count_4n, bytes_4n) = sizes[250], sizes[1000]
    assert count_4n == count_n <= 12, sizes
    # Two flat folders would grow with every conversation (about 27 KB, then 105 KB here); a provider's shards
    # and a month's topics do not: what grows is the shards in use, at most 256 (30 bytes each), and the
    # months, twelve a year.
    assert bytes_4n < 2 * bytes_n and bytes_4n < 12_000, sizes


# -- (b) the migration of a layout-1 workspace --------------------------------------------------------------


def _links(root: Path) -> dict[str, list[tuple[str, str]]]:
    """Topic → (resolved target topic, record ID) of each of its block links, read from the files."""
    found: dict[str, list[tuple[str, str]]] = {}
    for file in sorted((root / "topics").rglob("*.md")):
        path = file.relative_to(root).as_posix()
        text = file.read_text()
        targets = [(f"{t.removesuffix('.md')}.md", bid) for t, bid in _WIKI.findall(text)]
        targets += [(str(resolve_link(path, t)), bid) for t, bid in _MD.findall(text)]
        if targets:
            found[path] = targets
    return found


def _memory(root: Path) -> tuple[dict[str, list[str]], dict[str, str]]:
    """Every record's IDs → the identities it cites, and every topic's block IDs → their topic."""
    cited: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for file in sorted((root / "topics").rglob("*.md")):
        path = file.relative_to(root).as_posix()
        topic = parse_topic(path, file.read_text())
        for record in topic.records:
            notes = [topic.footnotes[ref] for ref in record.refs]
            cited[" ".join(record.block_ids)] = [n.source.identity for n in notes if n.source is not None]
            owner.update(dict.fromkeys(record.block_ids, path))
            for note in notes:
                assert note.source_path is not None and read_entry(root, note.source_path), note
    return cited, owner


def test_the_migration_keeps_every_id_citation_and_link_and_the_history(tmp_path: Path) -> None:
    root = _layout1(tmp_path)
    old_head = _git(root, "rev-parse", "HEAD").strip()
    old_files = tree_bytes(root)
    cited_before, owner_before = _memory(root)
    links_before = _links(root)
    assert any("conversations/2026-11-30-" in t for targets in links_before.values() for t, _ in targets)
    assert not (root / ".scriptorium" / LAYOUT).exists()

    ws = MemoryWorkspace(root)  # opening migrates: to layout 2, then to layout 3
    assert json.loads((root / ".scriptorium" / LAYOUT).read_text())["version"] == 4
    assert tree_problems(root) == [], "the files, HEAD's tree and state.json agree"
    cited_after, owner_after = _memory(root)
    assert cited_after == cited_before, "every record keeps its IDs and cites the same sources"
    assert set(owner_after) == set(owner_before)
    for path, targets in _links(root).items():
        for target, bid in targets:
            assert owner_after.get(bid) == target, f"{path}: the link to ^{bid} names {target}"
    assert len(_links(root)) == len(links_before)
    files = tree_bytes(root)
    sources = ws.archive.keys(ws.git, ws.revision)
    assert len(sources) == sum(p.startswith("sources/") for p in old_files) == 20
    assert all(not is_legacy_source_path(p) and source_identity_from_path(p) for p in sources)
    conversations = sorted(p for p in files if p.startswith("sources/"))
    assert conversations == sorted({conversation_file(key) for key in sources}), "a file a conversation, no other"
    assert sorted(p for p in files if p.startswith("topics/conversations/")) == [
        "topics/conversations/2026-11/2026-11-30-compaction-fixture.md",
        "topics/conversations/2026-11/2026-11-30-planning-the-scriptorium-cluster.md",
        "topics/conversations/2026-11/2026-11-30-session-comp-session-agent-ag-1.md",
    ]
    forgotten = ws.archive.read(source_path("claude-code", "comp-session", "u-8"))
    assert forgotten.forgotten is not None and forgotten.text == "", "a tombstone stays a tombstone"
    for path in sources:  # each source's bytes are its identity's, wherever it is
        identity = source_identity_from_path(path)
        assert identity is not None and ws.archive.entry(path) == old_files[legacy_source_path(*identity)]
    assert ws.rebuild_views().changed_files == (), "the views are what the migrated topics render"

    # The history: a commit more a layout, the one before untouched and readable as layout 1, the one between
    # as layout 2.
    assert _git(root, "rev-parse", "HEAD~2").strip() == old_head
    between = _git(root, "ls-tree", "-r", "--name-only", "HEAD~1", "sources").split()
    assert sorted(between) == sorted(sources), "layout 2: a file a message, at its key"
    before = _git(root, "show", "HEAD~2:topics/work.md")
    note = next(iter(parse_topic("topics/work.md", before).footnotes.values()))
    assert note.source is not None and note.source_path is not None and is_legacy_source_path(note.source_path)
    assert _git(root, "show", f"HEAD~2:{note.source_path}").startswith("---\nsource:")

    # Writes go on: a record citing a migrated source, and run again the migration finds nothing to move.
    result = ws.apply_changes(
        [TopicChange("topics/after.md", "create", "After [k](claude-code/demo-session-0001/u-03).\n")],
        message="after",
    )
    link = f"../{conversation_file(source_path('claude-code', 'demo-session-0001', 'u-03'))}#source-u-03"
    assert result.git_committed and link in (root / "topics/after.md").read_text()
    again = layout_module.migrate(ws)
    assert again["sources_moved"] == 0 and again["topics_moved"] == [] and again["revision"] == ws.revision
    assert again["conversation_files"] == 0
    ws.close()


def test_a_dry_run_moves_nothing_and_a_newer_layout_is_refused(tmp_path: Path) -> None:
    root = _layout1(tmp_path)
    with MemoryWorkspace(root, migrate=False) as ws:
        before = tree_bytes(root)
        report = layout_module.migrate(ws, dry_run=True)
        assert report["sources_moved"] == 20 and len(report["topics_moved"]) == 3
        assert report["sources_in_conversation_files"] == 20 and report["conversation_files"] >= 1
        assert tree_bytes(root) == before and not (root / ".scriptorium" / LAYOUT).exists()
    (root / ".scriptorium" / LAYOUT).write_text(json.dumps({"version": LAYOUT_VERSION + 1}))
    with pytest.raises(SchemaTooNew) as refused:
        MemoryWorkspace(root)
    assert refused.value.reason is ReasonCode.SCHEMA_TOO_NEW
    assert tree_bytes(root) == before


def test_a_forget_after_the_migration_purges_the_text_from_the_commits_before_it(tmp_path: Path) -> None:
    from scriptorium.changes.forget import Selection, forget
    from scriptorium.workspace.purge import purge_history

    root = _layout1(tmp_path)
    said = "we chose PostgreSQL for sessions and Redis for the broker"
    assert said in _git(root, "log", "-p", "--all")
    with MemoryWorkspace(root) as ws:
        paths = forget(ws, Selection(sources=("claude-code/demo-session-0001/u-03",)))["paths"]
        purge_history(ws, paths)
    assert said not in _git(root, "log", "-p", "--all"), "layout 1's path of the source is purged too"


# -- (c) a kill at any step of the migration -----------------------------------------------------------------

SCRIPT = r"""
import os, signal, sys
from pathlib import Path
from scriptorium.workspace import install, MemoryWorkspace

root, target = sys.argv[1:3]
steps = []
def crash(step):
    steps.append(step)
    print("STEP", step, flush=True)
    if step == target:
        os.kill(os.getpid(), signal.SIGKILL)
install.crash_point = crash
MemoryWorkspace(Path(root)).close()
"""


def _open_killed_at(root: Path, step: str) -> tuple[int, list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), step],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    return proc.returncode, [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("STEP ")]


@pytest.mark.slow
def test_a_kill_at_any_step_of_the_migration_leaves_the_old_tree_or_the_new(tmp_path: Path) -> None:
    template = _layout1(tmp_path / "template")
    old = tree_bytes(template)
    clean = tmp_path / "clean" / "memory"
    shutil.copytree(template, clean, symlinks=True)
    rc, steps = _open_killed_at(clean, "")
    assert rc == 0 and "journal-written" in steps and steps[-1] == "journal-removed", steps
    new = tree_bytes(clean)
    assert new != old
    # Two transactions, layout 1 to 2 and 2 to 3: a kill at a step's first occurrence leaves the tree before the
    # first install, the one between (layout 2), or the new one.
    between = tmp_path / "between" / "memory"
    shutil.copytree(template, between, symlinks=True)
    with MemoryWorkspace(between, migrate=False) as ws, ws.lock():
        layout_module._to_layout_2(ws, 1, False, lambda line: None, None)
    mid = tree_bytes(between)
    journals = [n for n, s in enumerate(steps) if s == "journal-written"]
    assert len(journals) == 2, steps
    applied = [s for s in steps if s.startswith("applied-")]
    chosen = [s for s in dict.fromkeys(s for s in steps if not s.startswith("applied-"))]
    chosen += [applied[0], applied[len(applied) // 2], applied[-1]]
    for number, step in enumerate(chosen):
        root = tmp_path / f"run-{number}" / "memory"
        shutil.copytree(template, root, symlinks=True)
        rc, _ = _open_killed_at(root, step)
        assert rc == -9, f"the open should have been killed at {step}"
        with MemoryWorkspace(root, migrate=False) as ws:  # recovery alone: the old tree or the new one
            files = tree_bytes(root)
            at = steps.index(step)
            expected = "old" if at < journals[0] else "between" if at < journals[1] else "new"
            trees = {"old": old, "between": mid, "new": new}
            assert files == trees[expected], f"killed at {step}: not the {expected} tree"
            assert _git(root, "rev-parse", "HEAD^{tree}").strip() == ws.revision
        with MemoryWorkspace(root) as ws:  # and the next open finishes the migration
            assert tree_bytes(root) == new and tree_problems(root) == []


def test_a_source_archived_in_layout_2_and_never_installed_is_folded_into_its_conversation_file(
    tmp_path: Path,
) -> None:
    """A layout-2 pass killed between archiving and installing leaves a message's own file, in no commit; the
    migration to layout 3 archives it into its conversation file (the same bytes, still uncommitted) and removes
    its file, so no file of layout 2 is left and the next pass archiving that message again finds it."""
    root = _layout1(tmp_path)
    with MemoryWorkspace(root, migrate=False) as ws, ws.lock():
        layout_module._to_layout_2(ws, 1, False, lambda line: None, None)
    left = SourceMessage("claude-code", "demo-session-0001", "u-99", "user", "2026-11-30T12:00:00Z", "killed pass")
    with MemoryWorkspace(root, migrate=False) as ws, ws.lock():
        assert layout_module.read_layout(root) == 2
        [key] = ws.archive.archive([left])
    own = (root / key).read_bytes()
    committed_before = _git(root, "ls-tree", "-r", "HEAD", "sources")

    ws = MemoryWorkspace(root)  # migrates to layout 3
    try:
        assert not (root / key).exists() and not (root / key).parent.exists()
        assert not [p for p in (root / "sources").rglob("*.md") if p.relative_to(root).as_posix().count("/") == 4]
        assert ws.archive.entry(key) == own, "archived into its conversation file, its bytes unchanged"
        assert ws.archive.committed(ws.git, ws.revision, key) is None, "still uncommitted, as it was"
        assert key not in committed_before
        with ws.lock():
            assert ws.archive_sources([left]) == [key]  # archived before: found there, the same bytes
        result = ws.apply_changes(
            [TopicChange("topics/late.md", "create", "Late [k](claude-code/demo-session-0001/u-99).\n")],
            message="late",
        )
        assert result.git_committed and ws.archive.committed(ws.git, ws.revision, key) == own
        assert tree_problems(root) == []
    finally:
        ws.close()
