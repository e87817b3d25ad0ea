"""Purging forgotten text from git history: ``scriptorium memory forget … --purge-history``.

After a forget the installed tree holds no forgotten text, but every earlier commit still does: the
sources as archived, the records that quoted them, the views that copied those. A purge rewrites ``main``
so that no commit or object holds it:

* each forgotten source path holds, in every commit, the tombstone it holds now;
* every other blob of ``topics/``, ``timeline/`` and the root views loses, by identity, what cites a
  forgotten source (:mod:`scriptorium.workspace.erasure`): every record citing one, whatever else it cites
  (as the forget deletes it), the forgotten sources' footnotes, the views' entries of the removed records,
  and a topic left with nothing else (its path and heading are the conversation's title). Each remaining
  occurrence of a removed topic's name or of a forgotten text, as said or as a writer reshaped it (or one
  of its lines long enough to stand alone), is replaced by ``[forgotten]``; so is each in a commit
  message. The texts are read from the history itself (every earlier version of the forgotten paths), so
  a purge needs nothing but the paths and never writes the text anywhere;
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

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from scriptorium.errors import InvalidArgument
from scriptorium.workspace import epoch
from scriptorium.workspace import install as install_steps
from scriptorium.workspace.erasure import Eraser
from scriptorium.workspace.gitstore import BRANCH_REF, MODE_DIR, blob_sha
from scriptorium.workspace.paths import SOURCES, TIMELINE, TOPICS
from scriptorium.workspace.recovery import begin_purge, finish_purge
from scriptorium.workspace.sources import forgotten_forms, parse_source

if TYPE_CHECKING:
    from scriptorium.redaction import Redactor
    from scriptorium.workspace.snapshot import Snapshot
    from scriptorium.workspace.workspace import MemoryWorkspace

R = TypeVar("R", bound="_History")

SCANNED = (TOPICS, TIMELINE, "core.md", "recent.md", "relations.json")
"""Top-level entries whose blobs can copy a source's text; ``sources/`` holds only the forgotten paths'."""


class _Rewriter:
    def __init__(self, ws: MemoryWorkspace, paths: Sequence[str], tree: str, *, survey_only: bool = False) -> None:
        self.ws = ws
        self.git = ws.git
        self.survey_only = survey_only
        """A dry run: work out what would change, write no object."""
        self.forgotten = {p: self.git.lookup(tree, p) for p in paths}
        self.tombstones = {p: entry[1] for p, entry in self.forgotten.items() if entry is not None and not survey_only}
        self.trees: dict[tuple[str, str], str | None] = {}
        self.blobs: dict[tuple[str, str], str | None] = {}
        self.eraser = Eraser(paths)
        self.changed_blobs = 0
        self.dropped: set[str] = set()
        """Paths some commit's tree loses (a topic left with nothing but forgotten records)."""

    def survey(self, commits: Sequence[str]) -> None:
        """Every earlier version of the forgotten sources' text, and every record and topic that goes, from
        the history itself: a view of one commit names records written in earlier ones."""
        texts: set[str] = set()
        seen: set[str] = set()
        surveyed: set[tuple[str, str]] = set()
        for commit in commits:
            tree = self.git.commit_tree(commit)
            for path in self.forgotten:
                entry = self.git.lookup(tree, path)
                if entry is None or entry[1] in seen or entry[1] == self.tombstones.get(path):
                    continue
                seen.add(entry[1])
                data = self.git.read_blob(entry[1])
                try:
                    message = parse_source(path, data)
                except Exception:  # an unparsable version: its raw text is what to look for
                    texts.add(data.decode("utf-8", "replace"))
                    continue
                if message.forgotten is None:
                    texts.add(message.text)
            for path, sha in self._topic_files(tree, surveyed):
                self.eraser.survey(path, self.git.read_blob(sha))
        self.eraser.needles = [excerpt.encode("utf-8") for excerpt in forgotten_forms(texts)]
        self.eraser.finish_survey()

    def _topic_files(self, tree: str, surveyed: set[tuple[str, str]]) -> list[tuple[str, str]]:
        """The topic blobs of ``tree`` not surveyed yet (a tree seen before is skipped whole)."""
        out: list[tuple[str, str]] = []
        top = self.git.lookup(tree, TOPICS)
        stack = [(f"{TOPICS}/", top[1])] if top is not None and top[0] == MODE_DIR else []
        while stack:
            prefix, sha = stack.pop()
            if (prefix, sha) in surveyed:
                continue
            surveyed.add((prefix, sha))
            for name, (mode, child) in self.git.tree_entries(sha).items():
                if mode == MODE_DIR:
                    stack.append((f"{prefix}{name}/", child))
                elif (f"{prefix}{name}", child) not in surveyed:
                    surveyed.add((f"{prefix}{name}", child))
                    out.append((f"{prefix}{name}", child))
        return out

    def keep_current(self, tree: str) -> None:
        """Blobs of the installed tree stay as they are: the forget decided what the memory keeps (the same
        words said in a conversation not forgotten are not the forgotten text)."""
        for top in SCANNED:
            if top in (TOPICS, TIMELINE):
                for path, sha in self.git.list_files(tree, top).items():
                    self.blobs[(path, sha)] = sha
            elif (entry := self.git.lookup(tree, top)) is not None:
                self.blobs[(top, entry[1])] = entry[1]

    def message(self, text: str) -> str:
        return self.eraser.text(text.encode("utf-8")).decode("utf-8")

    def blob(self, path: str, sha: str) -> str | None:
        key = (path, sha)
        if key not in self.blobs:
            data = self.git.read_blob(sha)
            clean = self.eraser.blob(path, data)
            if clean is None:
                self.blobs[key] = None
                self.dropped.add(path)
            elif clean == data:
                self.blobs[key] = sha
            else:
                self.blobs[key] = blob_sha(clean) if self.survey_only else self.git.write_blob(clean)
            self.changed_blobs += clean != data
        return self.blobs[key]

    def tree(self, sha: str, prefix: str) -> str | None:
        """The tree at ``prefix`` rewritten: unchanged (same hash) where nothing forgotten is below it;
        None when nothing is left in it."""
        key = (sha, prefix)
        if key in self.trees:
            return self.trees[key]
        entries = dict(self.git.tree_entries(sha))
        changed = False
        for name, (mode, child) in list(entries.items()):
            path = f"{prefix}{name}"
            new: str | None
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
                new = self.blob(path, child)
            if new is None:
                del entries[name]
                changed = True
            elif new != child:
                entries[name] = (mode, new)
                changed = True
        result: str | None = sha
        if changed:
            if not entries:
                result = None
            elif self.survey_only:
                result = f"changed:{sha}:{prefix}"
            else:
                result = self.git.write_tree(entries)
        self.trees[key] = result
        return result


class _History(Protocol):
    """What rewrites ``main``: a commit's tree and message as they become, and how many blobs changed."""

    changed_blobs: int

    def tree(self, sha: str, prefix: str) -> str | None: ...

    def message(self, text: str) -> str: ...


def purge_history(ws: MemoryWorkspace, paths: Sequence[str], *, dry_run: bool = False) -> dict[str, Any]:
    """Rewrite ``main`` without the forgotten sources' text (see the module); returns what it did.

    ``dry_run``: nothing is written; the result says what a purge would rewrite (run before the forget, it
    counts what the forget is about to leave in history)."""

    def rewriter(base: Snapshot, commits: Sequence[str]) -> _Rewriter:
        found = _Rewriter(ws, paths, base.tree, survey_only=dry_run)
        found.survey(commits)
        if not dry_run:
            found.keep_current(base.tree)
        return found

    def counts(found: _Rewriter) -> dict[str, Any]:
        return {
            "record_ids_removed": len(found.eraser.removed_ids),
            "paths_removed": sorted(found.dropped),
            "texts_looked_for": len(found.eraser.needles),
        }

    return _rewrite_main(ws, rewriter, counts, "without forgotten content", dry_run=dry_run)


def purge_secrets(
    ws: MemoryWorkspace, redactor: Redactor, known: Mapping[str, str] | None = None, *, dry_run: bool = False
) -> dict[str, Any]:
    """Rewrite ``main`` so that no commit, tree, blob or message holds a secret (``scriptorium memory redact
    --purge-history``): every version of every file and every commit message is read with ``redactor``, and
    each secret found there or in ``known`` (secret → placeholder) is replaced by its placeholder wherever it
    occurs, as said or as written inside a JSON string. The installed tree must hold none already (the
    redaction's transaction ran): otherwise INVALID_ARGUMENT, and nothing is written."""

    def rewriter(base: Snapshot, commits: Sequence[str]) -> _Replacer:
        found = _Replacer(ws, survey_only=dry_run)
        found.survey(commits, redactor, dict(known or {}))
        return found

    def counts(found: _Replacer) -> dict[str, Any]:
        return {"secrets_found": found.secrets}

    return _rewrite_main(ws, rewriter, counts, "without redacted secrets", dry_run=dry_run)


class _Replacer:
    """Every blob and message of the history with each secret replaced by its placeholder."""

    def __init__(self, ws: MemoryWorkspace, *, survey_only: bool) -> None:
        self.git = ws.git
        self.survey_only = survey_only
        self.pairs: list[tuple[bytes, bytes]] = []
        self.secrets = 0
        self.trees: dict[str, str | None] = {}
        self.blobs: dict[str, str] = {}
        self.changed_blobs = 0

    def survey(self, commits: Sequence[str], redactor: Redactor, secrets: dict[str, str]) -> None:
        """The secrets of every blob and message of ``commits`` (with those already known), as byte pairs."""
        seen: set[str] = set()

        def look(data: bytes) -> None:
            secrets.update(redactor.redact(data.decode("utf-8", "replace"))[1])

        for commit in commits:
            meta = self.git.repo.commit(commit)
            look(meta.message.encode("utf-8") if isinstance(meta.message, str) else meta.message)
            stack = [meta.tree.hexsha]
            while stack:
                tree = stack.pop()
                if tree in seen:
                    continue
                seen.add(tree)
                for _name, (mode, child) in self.git.tree_entries(tree).items():
                    if mode == MODE_DIR:
                        stack.append(child)
                    elif child not in seen:
                        seen.add(child)
                        look(self.git.read_blob(child))
        pairs: dict[bytes, bytes] = {}
        for secret, placeholder in secrets.items():
            pairs[secret.encode("utf-8")] = placeholder.encode("utf-8")
            escaped = json.dumps(secret)[1:-1].encode("utf-8")  # as a JSON file holds it
            pairs.setdefault(escaped, json.dumps(placeholder)[1:-1].encode("utf-8"))
        self.pairs = sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True)
        self.secrets = len(secrets)

    def replaced(self, data: bytes) -> bytes:
        for secret, placeholder in self.pairs:
            if secret in data:
                data = data.replace(secret, placeholder)
        return data

    def message(self, text: str) -> str:
        return self.replaced(text.encode("utf-8")).decode("utf-8")

    def blob(self, sha: str) -> str:
        if sha not in self.blobs:
            data = self.git.read_blob(sha)
            clean = self.replaced(data)
            if clean == data:
                self.blobs[sha] = sha
            else:
                self.changed_blobs += 1
                self.blobs[sha] = blob_sha(clean) if self.survey_only else self.git.write_blob(clean)
        return self.blobs[sha]

    def tree(self, sha: str, prefix: str) -> str | None:
        if sha in self.trees:
            return self.trees[sha]
        entries = dict(self.git.tree_entries(sha))
        changed = False
        for name, (mode, child) in list(entries.items()):
            new = self.tree(child, f"{prefix}{name}/") if mode == MODE_DIR else self.blob(child)
            if new != child:
                assert new is not None, "a replacement never empties a tree"
                entries[name] = (mode, new)
                changed = True
        result = sha
        if changed:
            result = f"changed:{sha}" if self.survey_only else self.git.write_tree(entries)
        self.trees[sha] = result
        return result


def _rewrite_main(
    ws: MemoryWorkspace,
    rewriter: Callable[[Snapshot, Sequence[str]], R],
    counts: Callable[[R], dict[str, Any]],
    what: str,
    *,
    dry_run: bool,
) -> dict[str, Any]:
    """Rewrite every commit of ``main`` with the history ``rewriter`` makes (see the module for the steps)."""
    repo = ws.git.repo
    with ws.lock():
        ws.recover()
        base = ws.snapshot()
        old_head = ws.git.head()
        if old_head is None or base.commit != old_head:
            from scriptorium.errors import RevisionConflict

            raise RevisionConflict("the installed state and main disagree; retry once the pending commit lands")
        commits = repo.git.rev_list("--reverse", "--topo-order", BRANCH_REF).split()
        history = rewriter(base, commits)
        mapping: dict[str, str] = {}
        rewritten = 0
        for commit in commits:
            meta = repo.commit(commit)
            tree = history.tree(meta.tree.hexsha, "")
            assert tree is not None, "a commit's tree always keeps its sources"
            parents = [mapping[p.hexsha] for p in meta.parents]
            original = meta.message if isinstance(meta.message, str) else meta.message.decode("utf-8", "replace")
            message = history.message(original)
            same = tree == meta.tree.hexsha and message == original and parents == [p.hexsha for p in meta.parents]
            if same:
                mapping[commit] = commit
                continue
            assert len(parents) <= 1, "main is linear"
            rewritten += 1
            if dry_run:
                mapping[commit] = f"changed:{commit}"
                continue
            mapping[commit] = ws.git.write_commit(tree, parents[0] if parents else None, message, meta.committed_date)
        found = {"commits_rewritten": rewritten, "blobs_rewritten": history.changed_blobs, **counts(history)}
        if dry_run:
            epoch.drop_process_caches()  # this process read the texts; no other did
            return {"dry_run": True, **found}
        new_head = mapping[old_head]
        if new_head != old_head and ws.git.commit_tree(new_head) != base.tree:
            raise InvalidArgument(
                "the installed memory still holds what the purge would take out of history",
                guidance="run the same command without --purge-history first, then purge",
            )
        ws.git.sync_objects()
        install_steps.crash_point("purge-objects-written")
        if new_head == old_head:
            epoch.drop_process_caches()
            return {**found, "head": old_head}
        begin_purge(ws.root, old_head, new_head)
        install_steps.crash_point("purge-journal-written")
        ws.git.update_ref(new_head, old_head)
        install_steps.crash_point("purge-ref-updated")
        finish_purge(ws.root, ws.git, ws.installer, new_head)
    epoch.bump(ws.root)
    note = ws.commit_note(f"Purge history: {rewritten} commit(s) rewritten {what}")
    return {**found, "head": note or new_head}
