"""Purging forgotten text from git history: ``scriptorium memory forget … --purge-history``.

After a forget the installed tree holds no forgotten text, but every earlier commit still does: the
sources as archived, the records that quoted them, the views that copied those. A purge rewrites ``main``
so that no commit or object holds it:

* each forgotten source path holds, in every commit, the tombstone it holds now;
* every other blob of ``topics/``, ``timeline/`` and the root views loses each line that links to a
  forgotten source (a citation's definition, whose keyword a writer may have taken from the text), and each
  occurrence of a forgotten text (or of one of its lines long enough to stand alone) is replaced by
  ``[forgotten]``; so is each in a commit message. The texts are read from the history itself (every
  earlier version of the forgotten paths), so a purge needs nothing but the paths and never writes the text
  anywhere;
* every blob of the installed tree is kept as it is (the forget decided what the memory keeps: the same
  words said in another conversation are not the forgotten text), and so is every other object: a tree
  whose paths are untouched keeps its hash, so does every source of
  another conversation; commits keep their dates, authors and order.

The installed tree does not change (it holds no forgotten text already), so neither does the revision;
commit hashes do. Moving ``main`` is a compare-and-swap on the old head, after a journal names the old and
the new head: killed at any step, the next open either finds ``main`` still at the old head (the purge is
rolled back: its objects are unreachable and pruned later) or at the new one (it is finished: the state file
names the new head, reflogs are expired and unreachable objects pruned). A last, empty commit records that a
purge happened — not what it purged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scriptorium.workspace import install as install_steps
from scriptorium.workspace.gitstore import BRANCH_REF, MODE_DIR
from scriptorium.workspace.paths import SOURCES, TIMELINE, TOPICS
from scriptorium.workspace.recovery import begin_purge, finish_purge
from scriptorium.workspace.sources import forgotten_excerpts, parse_source

if TYPE_CHECKING:
    from scriptorium.workspace.workspace import MemoryWorkspace

REDACTED = b"[forgotten]"
SCANNED = (TOPICS, TIMELINE, "core.md", "recent.md", "relations.json")
"""Top-level entries whose blobs can copy a source's text; ``sources/`` holds only the forgotten paths'."""


class _Rewriter:
    def __init__(self, ws: MemoryWorkspace, paths: Sequence[str], tree: str) -> None:
        self.ws = ws
        self.git = ws.git
        self.forgotten = {p: self.git.lookup(tree, p) for p in paths}
        self.tombstones = {p: entry[1] for p, entry in self.forgotten.items() if entry is not None}
        self.trees: dict[tuple[str, str], str] = {}
        self.blobs: dict[str, str] = {}
        self.needles: list[bytes] = []
        self.links = [p.removeprefix(f"{SOURCES}/").encode("utf-8") for p in paths]
        """How a line links to a forgotten source (its archive path below ``sources/``, as link targets end)."""
        self.changed_blobs = 0

    def collect_texts(self, commits: Sequence[str]) -> None:
        """Every earlier version of the forgotten sources' text, from the history itself."""
        texts: set[str] = set()
        seen: set[str] = set()
        for commit in commits:
            tree = self.git.commit_tree(commit)
            for path in self.forgotten:
                entry = self.git.lookup(tree, path)
                if entry is None or entry[1] in seen or entry[1] == self.tombstones.get(path):
                    continue
                seen.add(entry[1])
                try:
                    texts.add(parse_source(path, self.git.read_blob(entry[1])).text)
                except Exception:  # an unparsable version: its raw text is what to look for
                    texts.add(self.git.read_blob(entry[1]).decode("utf-8", "replace"))
        self.needles = [excerpt.encode("utf-8") for excerpt in forgotten_excerpts(texts)]

    def scrub(self, data: bytes, lines: bool = True) -> bytes:
        if lines and self.links and any(link in data for link in self.links):
            data = b"".join(line for line in data.splitlines(keepends=True) if not any(k in line for k in self.links))
        for needle in self.needles:
            if needle in data:
                data = data.replace(needle, REDACTED)
        return data

    def keep_current(self, tree: str) -> None:
        """Blobs of the installed tree stay as they are: the forget decided what the memory keeps (the same
        words said in a conversation not forgotten are not the forgotten text)."""
        for top in SCANNED:
            if top in (TOPICS, TIMELINE):
                for sha in self.git.list_files(tree, top).values():
                    self.blobs[sha] = sha
            elif (entry := self.git.lookup(tree, top)) is not None:
                self.blobs[entry[1]] = entry[1]

    def blob(self, sha: str) -> str:
        if sha not in self.blobs:
            data = self.git.read_blob(sha)
            clean = self.scrub(data)
            self.blobs[sha] = sha if clean == data else self.git.write_blob(clean)
            self.changed_blobs += clean != data
        return self.blobs[sha]

    def tree(self, sha: str, prefix: str) -> str:
        """The tree at ``prefix`` rewritten: unchanged (same hash) where nothing forgotten is below it."""
        key = (sha, prefix)
        if key in self.trees:
            return self.trees[key]
        entries = dict(self.git.tree_entries(sha))
        changed = False
        for name, (mode, child) in list(entries.items()):
            path = f"{prefix}{name}"
            if mode == MODE_DIR:
                if path.startswith(f"{SOURCES}/") or path == SOURCES:
                    if not any(p.startswith(f"{path}/") for p in self.forgotten):
                        continue
                elif prefix == "" and name not in SCANNED:
                    continue
                new = self.tree(child, f"{path}/")
            elif path in self.forgotten:
                new = self.tombstones.get(path, child)
            elif path.startswith(f"{SOURCES}/") or (prefix == "" and name not in SCANNED):
                continue
            else:
                new = self.blob(child)
            if new != child:
                entries[name] = (mode, new)
                changed = True
        result = self.git.write_tree(entries) if changed else sha
        self.trees[key] = result
        return result


def purge_history(ws: MemoryWorkspace, paths: Sequence[str]) -> dict[str, Any]:
    """Rewrite ``main`` without the forgotten sources' text (see the module); returns what it did."""
    repo = ws.git.repo
    with ws.lock():
        ws.recover()
        base = ws.snapshot()
        old_head = ws.git.head()
        if old_head is None or base.commit != old_head:
            from scriptorium.errors import RevisionConflict

            raise RevisionConflict("the installed state and main disagree; retry once the pending commit lands")
        commits = repo.git.rev_list("--reverse", "--topo-order", BRANCH_REF).split()
        rewriter = _Rewriter(ws, paths, base.tree)
        rewriter.collect_texts(commits)
        rewriter.keep_current(base.tree)
        mapping: dict[str, str] = {}
        rewritten = 0
        for commit in commits:
            meta = repo.commit(commit)
            tree = rewriter.tree(meta.tree.hexsha, "")
            parents = [mapping[p.hexsha] for p in meta.parents]
            original = meta.message if isinstance(meta.message, str) else meta.message.decode("utf-8", "replace")
            message = rewriter.scrub(original.encode("utf-8"), lines=False).decode("utf-8")
            same = tree == meta.tree.hexsha and message == original and parents == [p.hexsha for p in meta.parents]
            if same:
                mapping[commit] = commit
                continue
            assert len(parents) <= 1, "main is linear"
            mapping[commit] = ws.git.write_commit(tree, parents[0] if parents else None, message, meta.committed_date)
            rewritten += 1
        new_head = mapping[old_head]
        ws.git.sync_objects()
        install_steps.crash_point("purge-objects-written")
        if new_head == old_head:
            return {"commits_rewritten": 0, "blobs_rewritten": 0, "head": old_head}
        assert ws.git.commit_tree(new_head) == base.tree, "a purge never changes the installed tree"
        begin_purge(ws.root, old_head, new_head)
        install_steps.crash_point("purge-journal-written")
        ws.git.update_ref(new_head, old_head)
        install_steps.crash_point("purge-ref-updated")
        finish_purge(ws.root, ws.git, ws.installer, new_head)
    note = ws.commit_note(f"Purge history: {rewritten} commit(s) rewritten without forgotten content")
    return {
        "commits_rewritten": rewritten,
        "blobs_rewritten": rewriter.changed_blobs,
        "head": note or new_head,
        "texts_looked_for": len(rewriter.needles),
    }
