"""The workspace's file layout, and the migrations from layout 1 to 2 and from 2 to 3.

Layout 1 kept two flat folders that every commit rewrote, whole: ``sources/<provider>/`` (one entry per
session) and ``topics/conversations/`` (one entry per conversation topic). Their trees grew to tens of
kilobytes, written again by each transaction, so a heavy year's ``.git`` grew by more each month. Layout 2
shards both (:mod:`scriptorium.workspace.paths`):

* ``sources/<provider>/<shard>/<thread>/<message>.md``, the shard the first two hex digits of the SHA-1 of the
  thread's name as the path writes it (256 shards: :func:`~scriptorium.workspace.paths.source_shard`);
* ``topics/conversations/<yyyy-mm>/<date>-<title>.md``: one folder a month.

A commit then writes the trees on its own paths only: a shard of a few sessions, a month of topics. A source's
identity (``provider/thread/message``) and the short citation form stay as they were.

The version is ``.scriptorium/layout.json`` (none: layout 1). Opening a workspace of layout 1 migrates it,
under the workspace lock, in one transaction through the usual planner and journaled install (a process
killed at any step leaves, after the next open, the old tree or the new one, never a mix): every source and
conversation topic moves to its new path, and every topic is normalized again, so that each citation links its
source where it now is (the normalizer writes the canonical link whatever layout a link named); block links
naming a moved topic (``[[topics/conversations/…#^id]]``, ``[x](….md#^id)``) and the links of a topic that
moved are rewritten to the new paths. Every memory ID, citation and link stays valid; the views are rendered
again. Commits before it stay as they are (their paths parse as layout 1's). Run again, it finds nothing to
move. A workspace of a newer layout than this release knows is refused (``SCHEMA_TOO_NEW``).

Layout 3 keeps each conversation's sources in one file, ``sources/<provider>/<shard>/<thread>.md``
(:mod:`scriptorium.workspace.threads`): a message of about 700 bytes no longer takes a file-system block of its
own. The migration from layout 2, a second transaction after the first, writes each conversation's file from its
committed sources (in the order they were said, their bytes unchanged), removes their own files, and normalizes
every topic citing a source again, so that each citation links the message's anchor in its conversation's file.
A message a layout-2 pass archived and never installed is then archived into its conversation's file (still
uncommitted) and its own file removed.

Layout 4 cuts a long conversation's file into parts (``<thread>.md``, ``<thread>+2.md``, …, each about
:attr:`~scriptorium.workspace.threads.ConversationArchive.PART_BYTES`): a pass appending to it writes its last
part again, not the whole conversation. A layout-3 workspace is already one of layout 4 (its conversations each
in one part): the step writes the version alone, so that an earlier release refuses the workspace rather than
read a part as a source of layout 1.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from scriptorium.errors import InvalidArgument, SchemaTooNew
from scriptorium.formats import VERSION_KEY, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.logs import get_logger
from scriptorium.workspace.blocks import BLOCK_ID
from scriptorium.workspace.paths import (
    LAYOUT,
    LAYOUT_VERSION,
    RUNTIME_DIR,
    SOURCES,
    STATS_FILE,
    conversation_file,
    conversation_topic_moved,
    is_conversation_file,
    is_legacy_source_path,
    relative_link,
    resolve_link,
    source_identity_from_path,
    source_path,
)
from scriptorium.workspace.sources import parse_source
from scriptorium.workspace.threads import ConversationArchive, join

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from scriptorium.workspace.gitstore import GitStore
    from scriptorium.workspace.results import TxnResult
    from scriptorium.workspace.snapshot import Snapshot
    from scriptorium.workspace.sources import SourceArchive


class MemoryWorkspace(Protocol):
    """What the migration uses of :class:`~scriptorium.workspace.workspace.MemoryWorkspace` (which opens
    through here: no import of it)."""

    root: Path
    git: GitStore
    archive: SourceArchive

    def lock(self, timeout: float | None = None) -> AbstractContextManager[None]: ...

    def recover(self) -> None: ...

    def snapshot(self) -> Snapshot: ...

    def install_relayout(
        self,
        topics: Mapping[str, bytes | None],
        relocated: Mapping[str, bytes | None],
        message: str,
        link_file: Callable[[str], str] | None = None,
    ) -> TxnResult: ...

    def reopen_archive(self) -> None: ...


log = get_logger(__name__)

Progress = Callable[[str], None]
MIGRATION_MESSAGE = "Migrate the workspace to layout 2: sources sharded by thread, conversation topics by month"
MIGRATION_MESSAGE_3 = "Migrate the workspace to layout 3: one file a conversation in sources/"
PROGRESS_EVERY = 10_000
"""Sources read between two progress lines (a heavy year holds about 100,000)."""


def read_layout(root: Path) -> int:
    """The layout version of the workspace at ``root`` (1 when it records none: an earlier release made it).
    SCHEMA_TOO_NEW when a newer release wrote a layout this one does not know."""
    path = root / RUNTIME_DIR / LAYOUT
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return 1
    except ValueError as exc:
        raise InvalidArgument(f"{path} is not JSON", path=str(path)) from exc
    version = data.get(VERSION_KEY) if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidArgument(f"{path}: 'version' is {version!r}, not a positive whole number", path=str(path))
    if version > LAYOUT_VERSION:
        raise SchemaTooNew(
            f"the workspace has file layout {version}; this release knows layouts up to {LAYOUT_VERSION}",
            guidance="a newer Scriptorium migrated it: upgrade to read or change it",
            path=str(path),
        )
    return version


def write_layout(root: Path, version: int = LAYOUT_VERSION) -> None:
    atomic_write(root / RUNTIME_DIR / LAYOUT, json.dumps(versioned({}, version)).encode())


_WIKI_PATH = re.compile(rf"(?<!\\)\[\[([^\[\]|#\n]*)(#\^{BLOCK_ID}(?:\|[^\[\]\n]*)?\]\])")
_MD_PATH = re.compile(rf"(?<!\\)\]\(([^()\s#]+)(#\^{BLOCK_ID}\))")


def relink(text: str, old: str, new: str, moved: Mapping[str, str]) -> str:
    """``text`` of the topic at ``old``, to be kept at ``new``, with its block links following the topics
    ``moved`` (old path → new path): a wikilink names a workspace path (with or without ``.md``), a Markdown
    link a path relative to its topic (written again when either end moved)."""
    if "#^" not in text:
        return text

    def wiki(match: re.Match[str]) -> str:
        target = match.group(1)
        if target in moved:
            return f"[[{moved[target]}{match.group(2)}"
        if f"{target}.md" in moved:
            return f"[[{moved[f'{target}.md'].removesuffix('.md')}{match.group(2)}"
        return match.group(0)

    def markdown(match: re.Match[str]) -> str:
        target = resolve_link(old, match.group(1))
        if target is None:
            return match.group(0)
        now = moved.get(target, target)
        if now == target and new == old:
            return match.group(0)
        return f"]({relative_link(new, now)}{match.group(2)}"

    return _MD_PATH.sub(markdown, _WIKI_PATH.sub(wiki, text))


@dataclass(slots=True)
class MigrationPlan:
    """What the migration of one installed tree moves and rewrites."""

    sources: dict[str, str] = field(default_factory=dict)
    """Old archive path → new, for each source of layout 1."""
    topics: dict[str, str] = field(default_factory=dict)
    """Old topic path → new, for each conversation topic of layout 1."""
    rewritten: dict[str, bytes] = field(default_factory=dict)
    """Topic (at its new path) → its text with its links on the new paths, before normalizing."""

    @property
    def empty(self) -> bool:
        return not self.sources and not self.topics and not self.rewritten


def survey(ws: MemoryWorkspace, base: Snapshot, progress: Progress | None = None) -> MigrationPlan:
    """What layout 2 moves in ``base``: its layout-1 sources and conversation topics, and the topics whose
    links must follow (those citing a moved source, linking to a moved topic, or moved themselves)."""
    found = MigrationPlan()
    listed = ws.git.list_files(base.tree, SOURCES)
    for number, path in enumerate(sorted(listed), 1):
        if is_legacy_source_path(path):
            identity = source_identity_from_path(path)
            assert identity is not None
            found.sources[path] = source_path(*identity)
        if progress is not None and number % PROGRESS_EVERY == 0:
            progress(f"read {number:,} of {len(listed):,} source paths")
    for path in base.topic_shas:
        target = conversation_topic_moved(path)
        if target is not None and target not in base.topic_shas:
            found.topics[path] = target
    moved_sources = set(found.sources)
    for path, sha in sorted(base.topic_shas.items()):
        new = found.topics.get(path, path)
        text = ws.git.read_blob(sha).decode("utf-8")
        relinked = relink(text, path, new, found.topics)
        cites_moved = any(note.source_path in moved_sources for note in base.topics[path].footnotes.values())
        if new != path or relinked != text or cites_moved:
            found.rewritten[new] = relinked.encode("utf-8")
    return found


def migrate(ws: MemoryWorkspace, *, dry_run: bool = False, progress: Progress | None = None) -> dict[str, Any]:
    """Bring ``ws`` to the current layout (see the module), a step a layout, each in one transaction; returns
    what it moved. Idempotent: a workspace of the current layout has nothing moved (its layout file is written if
    it was missing). With ``dry_run`` nothing changes."""
    say = progress or (lambda line: None)
    with ws.lock():
        ws.recover()
        before = read_layout(ws.root)
        report: dict[str, Any] = {"layout_before": before, "layout": LAYOUT_VERSION, "dry_run": dry_run}
        report.update(_to_layout_2(ws, before, dry_run, say, progress))
        report.update(_to_layout_3(ws, before, dry_run, say))
        if not dry_run:
            write_layout(ws.root, 4)  # from 3: nothing moves (see LAYOUT_VERSION)
            ws.reopen_archive()
    log.info(
        "workspace.layout_migrated",
        sources=report["sources_moved"],
        topics_moved=len(report["topics_moved"]),
        topics_rewritten=report["topics_rewritten"],
        conversation_files=report["conversation_files"],
        revision=report["revision"],
    )
    return report


def _to_layout_2(
    ws: MemoryWorkspace, before: int, dry_run: bool, say: Progress, progress: Progress | None
) -> dict[str, Any]:
    base = ws.snapshot()
    if before >= 2:
        return {"sources_moved": 0, "topics_moved": [], "topics_rewritten": 0, "revision_before": base.tree}
    say(f"surveying {len(base.topic_shas):,} topics and the archive of revision {base.tree[:12]}")
    found = survey(ws, base, progress)
    report: dict[str, Any] = {
        "sources_moved": len(found.sources),
        "topics_moved": sorted(f"{old} -> {new}" for old, new in found.topics.items()),
        "topics_rewritten": len(found.rewritten),
        "revision_before": base.tree,
    }
    if dry_run or found.empty:
        if not dry_run:
            write_layout(ws.root, 2)
        return report
    say(f"moving {len(found.sources):,} sources and {len(found.topics):,} conversation topics")
    result = _install(ws, base, found, say)
    write_layout(ws.root, 2)
    say(f"installed revision {result.revision[:12]} ({len(result.changed_files):,} files changed)")
    return report


def _to_layout_3(ws: MemoryWorkspace, before: int, dry_run: bool, say: Progress) -> dict[str, Any]:
    """Every conversation's sources into one file, and every topic citing a source normalized again (its
    citations link the message's anchor in its conversation's file)."""
    base = ws.snapshot()
    done = {"conversation_files": 0, "sources_in_conversation_files": 0, "revision": base.tree}
    if before >= 3:
        return {**done, "commit": base.commit, "changed_files": 0}
    listed = ws.git.list_files(base.tree, SOURCES)
    groups: dict[str, list[tuple[tuple[str, str], bytes]]] = {}
    for number, (path, sha) in enumerate(sorted(listed.items()), 1):
        identity = source_identity_from_path(path)
        if identity is None or is_conversation_file(path):
            continue  # in a conversation file already (a migration killed after its install), or not a source
        key = source_path(*identity)
        data = b"" if dry_run else ws.git.read_blob(sha)
        time = "" if dry_run else parse_source(key, data).time
        groups.setdefault(conversation_file(key), []).append(((time, key), data))
        if number % PROGRESS_EVERY == 0:
            say(f"read {number:,} of {len(listed):,} sources")
    sources = sum(len(entries) for entries in groups.values())
    report = {**done, "conversation_files": len(groups), "sources_in_conversation_files": sources}
    if dry_run or not groups:
        report["uncommitted_sources_folded"] = len(_left_over(ws.root))
        if not dry_run:
            _fold_left_over(ws)
            write_layout(ws.root, 3)
        return {**report, "commit": base.commit, "changed_files": 0}
    relocated: dict[str, bytes | None] = {}
    for conversation, entries in groups.items():
        entries.sort()  # in the order they were said (archive order is not kept per message): a pure function
        relocated[conversation] = join(data for _order, data in entries)
        relocated.update(dict.fromkeys((key for (_time, key), _data in entries), None))
    citing = {path: ws.git.read_blob(sha) for path, sha in base.topic_shas.items() if _cites(base, path)}
    say(f"writing {len(groups):,} conversation files of {sources:,} sources; normalizing {len(citing):,} topics")
    result = ws.install_relayout(citing, relocated, MIGRATION_MESSAGE_3, link_file=conversation_file)
    report["uncommitted_sources_folded"] = _fold_left_over(ws)
    write_layout(ws.root, 3)
    stats = ws.root / RUNTIME_DIR / STATS_FILE
    stats.unlink(missing_ok=True)  # counted again by the next status: the install counted files, not sources
    say(f"installed revision {result.revision[:12]} ({len(result.changed_files):,} files changed)")
    return {**report, "revision": result.revision, "commit": result.commit, "changed_files": len(result.changed_files)}


def _left_over(root: Path) -> list[str]:
    """The files of single messages under ``sources/`` (layout 2's, ``<provider>/<shard>/<thread>/<message>.md``):
    after the migration's install, those a pass archived and never installed (killed between the two)."""
    found = []
    for folder, _dirs, names in os.walk(root / SOURCES):
        relative = Path(folder).relative_to(root).as_posix()
        for name in names:
            path = f"{relative}/{name}"
            if not name.startswith(".") and path.count("/") == 4 and source_identity_from_path(path) is not None:
                found.append(path)
    return sorted(found)


def _fold_left_over(ws: MemoryWorkspace) -> int:
    """Each message a layout-2 pass archived and never installed, archived into its conversation file as layout
    3 archives it (its bytes the same; still uncommitted, as it was: the next pass archiving that message again
    finds it there), its own file then removed; how many."""
    left = _left_over(ws.root)
    if left:
        archive = ConversationArchive(ws.root, ws.archive.redactor)
        archive.archive([parse_source(key, (ws.root / key).read_bytes()) for key in left])
        for key in left:
            (ws.root / key).unlink()
        archive.prune({(ws.root / key).parent for key in left})
    return len(left)


def _cites(base: Snapshot, path: str) -> bool:
    return any(note.source_path for note in base.topics[path].footnotes.values())


def _install(ws: MemoryWorkspace, base: Snapshot, found: MigrationPlan, say: Progress) -> TxnResult:
    """One transaction: the sources' new paths hold their committed bytes and their old paths go; the topics
    are moved and normalized (citations on the new paths), the views rendered again."""
    relocated: dict[str, bytes | None] = {}
    listed = ws.git.list_files(base.tree, SOURCES)
    for number, (old, new) in enumerate(sorted(found.sources.items()), 1):
        data = ws.git.read_blob(listed[old])
        parse_source(new, data)  # the same identity at its new path
        relocated[new] = data
        relocated[old] = None
        if number % PROGRESS_EVERY == 0:
            say(f"read {number:,} of {len(found.sources):,} sources")
    raw: dict[str, bytes | None] = dict.fromkeys(found.topics)
    raw.update(found.rewritten)
    say(f"normalizing {len(found.rewritten):,} topics")
    return ws.install_relayout(raw, relocated, MIGRATION_MESSAGE)
