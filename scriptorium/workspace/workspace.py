"""``MemoryWorkspace``: the memory repository on disk and the one path that changes it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from scriptorium.cache import BoundedCache
from scriptorium.errors import (
    InvalidArgument,
    NotFound,
    PreInstallFailed,
    ReasonCode,
    RevisionConflict,
    ScriptoriumError,
    WorkspaceMissing,
)
from scriptorium.fsutil import atomic_write
from scriptorium.logs import get_logger
from scriptorium.workspace import epoch, layout, recovery, snapshot_cache
from scriptorium.workspace import install as install_steps
from scriptorium.workspace.gitstore import GitStore
from scriptorium.workspace.install import Installer, InstallState
from scriptorium.workspace.lock import FileLock
from scriptorium.workspace.packing import Packer
from scriptorium.workspace.paths import (
    CORE_SOURCE,
    LAYOUT_VERSION,
    RUNTIME_DIR,
    SOURCES,
    STATS_FILE,
    TOPICS,
    check_topic_path,
    is_conversation_file,
    is_workspace,
    source_path,
)
from scriptorium.workspace.redacting import redact_staged
from scriptorium.workspace.results import PreInstall, TopicChange, TxnResult, WorkspaceConfig
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.sources import PreparedSources, SourceArchive, SourceMessage, render_source
from scriptorium.workspace.staging import READ_THROUGH, Staging, StagingOptions, sweep_orphans
from scriptorium.workspace.threads import ConversationArchive
from scriptorium.workspace.topics import ParsedTopic, parse_topic, parsed_size
from scriptorium.workspace.transaction import (
    Plan,
    PlanGuard,
    Planner,
    SourceRewrites,
    ViewSettings,
    whole_topic_deletions,
)
from scriptorium.workspace.views import CoreRendering, render_core

log = get_logger(__name__)


Edit = Callable[[Staging], None]
PreInstallHook = Callable[[PreInstall], None]
NO_REWRITES = SourceRewrites()


def _unchanged(stage: Staging) -> None:
    """The edit of a transaction that changes no topic itself (a forget with no record to delete)."""


PARSE_CACHE_LIMIT = 1_000_000
"""Parsed topic versions kept in memory (keyed by path and blob hash), at most (the bytes bound first)."""
PARSE_CACHE_BYTES = 96 << 20
"""Memory the parsed topics a workspace keeps may take (:func:`~scriptorium.workspace.topics.parsed_size`:
about 14 MB of topic text, a heavy user's quarter). A snapshot holds no parsed topic but those a transaction
changed, so this bounds a process's topics whatever the memory's size (a forget's peak with it: 283 MB at
six months with 160 MB here); older topics are parsed again as they are asked for."""


DERIVED_VERSION = 1
"""The layout of :data:`STATS_FILE` and :data:`CORE_MEMO`: derived files, so one of another layout (an older
or a newer release's) is computed again, never refused."""
"""``.scriptorium/stats.json``: the installed tree's topic, record and source counts (derived, rebuildable)."""

KEEP_AFTER_TOPICS = 32
"""A handle leaves its snapshot's indexes for the next process (:mod:`~scriptorium.workspace.snapshot_cache`)
when they differ from those on disk by this many topics or more: a command that changed a topic or two leaves
the next process those few to parse, not a rewrite of the whole file each time."""

CORE_MEMO = "core.json"
"""In the runtime folder: the resident block as rendered from one version of the core topic at one budget
(its blob ID and the budget say which): ``memory status``, ``memory core`` and the core route read the
figures there instead of loading the tokenizer and parsing the core in every new process. Derived, not
fsynced: a memo naming another blob or budget, or not parsing, is rendered again."""


@dataclass(frozen=True, slots=True)
class WorkspaceStats:
    tree: str
    topics: int
    records: int
    sources: int


@dataclass(slots=True)
class _Caches:
    parsed: BoundedCache[tuple[str, str], ParsedTopic] = field(
        default_factory=lambda: BoundedCache(PARSE_CACHE_LIMIT, PARSE_CACHE_BYTES)
    )
    snapshot: Snapshot | None = None
    moved: int = 0
    """Topics this handle's snapshot differs by from the indexes on disk (all of them when it built it)."""


def _text_size(topic: ParsedTopic) -> int:
    """The bytes of text ``topic`` was parsed from, about (its lines, each with its newline)."""
    return sum(len(line) + 1 for block in topic.blocks for line in block.lines)


def workspace_id(root: Path) -> str:
    return hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:12]


class MemoryWorkspace:
    """A memory workspace at ``<state>/memory``: topics, sources, views, git."""

    def __init__(self, root: Path, config: WorkspaceConfig | None = None, *, migrate: bool = True) -> None:
        """Open the workspace at ``root``: recover what an interrupted install left, and bring a workspace of an
        earlier file layout to the current one (:mod:`~scriptorium.workspace.layout`; ``migrate=False`` leaves
        it as it is, for a dry run to show what would move). A newer layout is refused (SCHEMA_TOO_NEW)."""
        self.root = Path(root)
        if not is_workspace(self.root):
            raise WorkspaceMissing(
                f"no memory workspace at {self.root}; "
                f"create it with `scriptorium memory init --state {self.root.parent}`"
            )
        self.config = config or WorkspaceConfig()
        self.id = workspace_id(self.root)
        self.key = _workspace_key(self.root / RUNTIME_DIR)
        """A stable identity for node write markers (survives moving the folder)."""
        self.git = GitStore(self.root / ".git")
        self.archive = self._open_archive()
        self.installer = Installer(self.root, self.git)
        self.packer = Packer(self.root / ".git", self.config.repack_loose_objects)
        """Starts a background repack when an install leaves too many loose objects (:mod:`.packing`)."""
        self._lock = FileLock(self.root / RUNTIME_DIR / "lock")
        self._caches = _Caches()
        self._epoch = epoch.signature(self.root)
        """The forget epoch this handle's caches were filled under (:mod:`scriptorium.workspace.epoch`)."""
        self._planner = Planner(
            self.git, self.archive, self._parse, ViewSettings(self.config.recent_limit, self.config.core_budget)
        )
        with self.lock():
            self.recover()
            if layout.read_layout(self.root) < LAYOUT_VERSION and migrate:
                layout.migrate(self)
        self.staging_sweep = sweep_orphans()
        """What this open found in the temp dir: orphaned staging folders removed, live ones left
        (``memory status`` reports it; long-running workers sweep again periodically)."""

    def _open_archive(self) -> SourceArchive:
        """The archive of the workspace's layout: a file a conversation from layout 3 on
        (:class:`~scriptorium.workspace.threads.ConversationArchive`), a file a message before."""
        archive_type = ConversationArchive if layout.read_layout(self.root) >= 3 else SourceArchive
        return archive_type(self.root, self.config.redactor)

    def reopen_archive(self) -> None:
        """Take the archive of the layout the workspace now has (the layout migration, once it moved)."""
        self.archive = self._planner.archive = self._open_archive()

    # -- lifecycle ---------------------------------------------------------------

    @classmethod
    def init(cls, root: Path, config: WorkspaceConfig | None = None) -> MemoryWorkspace:
        """Create a workspace (or open the one already there); safe when processes race to create it."""
        root = Path(root)
        if is_workspace(root):
            return cls(root, config)
        root.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(root.parent / f".{root.name}.init.lock").hold(timeout=60):
            if not (root / RUNTIME_DIR / "state.json").exists():
                cls._create(root)
        workspace = cls(root, config)
        if not workspace.snapshot().topic_shas and workspace.git.lookup(workspace.revision, "core.md") is None:
            workspace.rebuild_views(message="Render the initial views")
        return workspace

    @staticmethod
    def _create(root: Path) -> None:
        if (root / ".git").exists():
            shutil.rmtree(root / ".git")  # a creation that died before state.json was written
        root.mkdir(parents=True, exist_ok=True)
        (root / TOPICS).mkdir(exist_ok=True)
        git = GitStore.create(root / ".git")
        head = git.head()
        assert head is not None
        (root / RUNTIME_DIR).mkdir(exist_ok=True)
        layout.write_layout(root)  # before state.json: a workspace with a state says its layout
        Installer(root, git).write_state(InstallState(git.commit_tree(head), head))
        git.close()

    def close(self) -> None:
        self._keep_snapshot()
        self.git.close()

    def __enter__(self) -> MemoryWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def lock(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the workspace lock (re-entrant per thread); LockHeld after ``timeout``."""
        with self._lock.hold(self.config.lock_timeout if timeout is None else timeout):
            yield

    def recover(self) -> None:
        """Finish or discard an interrupted install or history purge (cheap when there is none)."""
        with self.lock():
            if recovery.recover(self.root, self.git, self.installer):
                self._caches.snapshot = None

    # -- reading -----------------------------------------------------------------

    @property
    def revision(self) -> str:
        """The byte-level tree hash of the installed workspace."""
        return self._state().tree

    @property
    def commit(self) -> str | None:
        """The commit of the installed tree (None: its git commit is still to be retried)."""
        return self._state().commit

    def _state(self) -> InstallState:
        state = self.installer.read_state()
        if state is None:
            head = self.git.head()
            if head is None:
                raise WorkspaceMissing(f"workspace at {self.root} has no history")
            state = InstallState(self.git.commit_tree(head), head)
        return state

    def _parse(self, path: str, sha: str, data: bytes | None = None) -> ParsedTopic:
        key = (path, sha)
        parsed = self._caches.parsed.get(key)
        if parsed is None:
            raw = data if data is not None else self.git.read_blob(sha)
            parsed = parse_topic(path, raw.decode("utf-8"))
            self._caches.parsed.put(key, parsed, parsed_size(len(raw)))
        return parsed

    def snapshot(self) -> Snapshot:
        """The parsed installed tree (re-read only when the revision moved)."""
        self.drop_caches_after_forget()
        state = self._state()
        cached = self._caches.snapshot
        if cached is not None and cached.tree == state.tree:
            cached.commit = state.commit
            return cached
        shas = self.git.list_files(state.tree, TOPICS)
        snap = self._kept_snapshot(state, shas)
        if snap is None:
            snap = Snapshot.build(state.tree, state.commit, shas, lambda p, s: self._parse(p, s))
            self._caches.moved = len(shas)
        self._caches.snapshot = snap
        return snap

    def _kept_snapshot(self, state: InstallState, shas: Mapping[str, str]) -> Snapshot | None:
        """The snapshot of the installed tree from the indexes another process kept, brought up to this tree
        by parsing the topics whose blobs differ; None when none are kept or most topics differ."""
        data = snapshot_cache.load(self.root)
        if data is None:
            return None
        kept = Snapshot.restore(data, lambda p, s: self._parse(p, s))
        if kept.tree == state.tree:
            kept.commit = state.commit
            return kept
        gone = [path for path in kept.topic_shas if path not in shas]
        moved = [path for path, sha in shas.items() if kept.topic_shas.get(path) != sha]
        if 2 * (len(gone) + len(moved)) > len(shas):
            return None  # most of it moved: building costs no more
        changed: dict[str, tuple[str, ParsedTopic] | None] = dict.fromkeys(gone)
        changed.update({path: (shas[path], self._parse(path, shas[path])) for path in moved})
        self._caches.moved = len(changed)
        snap = kept.derive(changed)
        snap.tree, snap.commit = state.tree, state.commit
        snap.topics.settle()  # installed: the parse cache answers for them
        return snap

    def _keep_snapshot(self) -> None:
        """Leave this process's snapshot indexes for the next process (when they moved since it found them),
        unless a forget landed since they were made."""
        snap = self._caches.snapshot
        if snap is None or self._caches.moved < KEEP_AFTER_TOPICS or epoch.signature(self.root) != self._epoch:
            return
        if snap.topics._held:  # derived for a transaction that did not install: not the installed tree's
            return
        snapshot_cache.save(self.root, snap.to_cache())
        self._caches.moved = 0

    def drop_caches_after_forget(self) -> bool:
        """When a forget landed since the caches were filled (in any process), drop them and the
        process-wide ones; True when it did."""
        now = epoch.signature(self.root)
        if now == self._epoch:
            return False
        self._epoch = now
        self._caches = _Caches()
        self.git.drop_caches()
        epoch.drop_process_caches()
        return True

    def read_topic(self, path: str) -> str:
        check_topic_path(path)
        snap = self.snapshot()
        sha = snap.topic_shas.get(path)
        if sha is None:
            raise NotFound(f"no topic at {path}", path=path)
        return self.git.read_blob(sha).decode("utf-8")

    def topics(self) -> list[str]:
        return sorted(self.snapshot().topic_shas)

    def core_rendering(self, exclude: frozenset[str] = frozenset()) -> CoreRendering:
        """The resident block as rendered now; ``exclude`` leaves records out (the injection omits pending ones).
        Reads the core topic alone when no parsed snapshot of the installed tree is at hand (a new process
        need not parse every topic to show the core)."""
        budget = self.config.core_budget
        if exclude:
            return render_core(self._installed_topic(CORE_SOURCE), budget, exclude)
        entry = self.git.lookup(self._state().tree, CORE_SOURCE)
        sha = entry[1] if entry is not None else ""
        memo = self._read_core_memo(sha, budget)
        if memo is not None:
            return memo
        rendering = render_core(self._installed_topic(CORE_SOURCE), budget)
        self._write_core_memo(sha, rendering)
        return rendering

    def _read_core_memo(self, sha: str, budget: int) -> CoreRendering | None:
        try:
            data = json.loads((self.root / RUNTIME_DIR / CORE_MEMO).read_text())
            if data.get("version") != DERIVED_VERSION or data["core"] != sha or data["budget"] != budget:
                return None
            return CoreRendering(
                str(data["text"]),
                budget,
                tuple(map(str, data["included_ids"])),
                tuple(map(str, data["omitted_ids"])),
                counted=int(data["tokens"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_core_memo(self, sha: str, rendering: CoreRendering) -> None:
        path = self.root / RUNTIME_DIR / CORE_MEMO
        scratch = path.with_name(f".{CORE_MEMO}.{os.getpid()}.{threading.get_ident()}.tmp")
        with contextlib.suppress(OSError):
            memo = {**asdict(rendering), "tokens": rendering.tokens}
            del memo["counted"]
            scratch.write_text(json.dumps({"version": DERIVED_VERSION, "core": sha, **memo}))
            os.replace(scratch, path)

    def _installed_topic(self, path: str) -> ParsedTopic | None:
        self.drop_caches_after_forget()
        state = self._state()
        cached = self._caches.snapshot
        if cached is not None and cached.tree == state.tree:
            return cached.topics.get(path)
        entry = self.git.lookup(state.tree, path)
        return None if entry is None else self._parse(path, entry[1])

    def stats(self) -> WorkspaceStats:
        """How many topics, records and sources the installed tree holds: kept up to date by every install
        (:data:`STATS_FILE`), counted again only when the file is missing or names another tree."""
        tree = self.revision
        kept = self._read_stats()
        if kept is not None and kept.tree == tree:
            return kept
        snap = self.snapshot()
        counted = WorkspaceStats(
            snap.tree,
            len(snap.topic_shas),
            sum(len(t.records) for t in snap.topics.values()),
            len(self.archive.keys(self.git, snap.tree)),
        )
        self._write_stats(counted)
        return counted

    def _read_stats(self) -> WorkspaceStats | None:
        try:
            data = json.loads((self.root / RUNTIME_DIR / STATS_FILE).read_text())
            if data.get("version") != DERIVED_VERSION:
                return None
            return WorkspaceStats(str(data["tree"]), int(data["topics"]), int(data["records"]), int(data["sources"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_stats(self, stats: WorkspaceStats) -> None:
        # Not fsynced: a stale or torn file names another tree, or does not parse, and is counted again.
        path = self.root / RUNTIME_DIR / STATS_FILE
        scratch = path.with_name(f".{STATS_FILE}.{os.getpid()}.{threading.get_ident()}.tmp")
        with contextlib.suppress(OSError):
            scratch.write_text(json.dumps({"version": DERIVED_VERSION, **asdict(stats)}))
            os.replace(scratch, path)

    def _sources_added(self, plan: Plan) -> int:
        """How many sources ``plan`` adds to the base tree (less those it removes: the layout migration's)."""
        added = 0
        for path, data in plan.files.items():
            if path.startswith(f"{SOURCES}/") and not is_conversation_file(path):
                existed = self.archive.committed(self.git, plan.base.tree, path) is not None
                added += (data is not None and not existed) - (data is None and existed)
        return added

    def _follow_stats(self, plan: Plan, tree: str, sources_added: int) -> None:
        """The installed tree's figures from the base tree's and what ``plan`` changed (nothing recounted)."""
        kept = self._read_stats()
        if kept is None or kept.tree != plan.base.tree:
            return
        base, staged = plan.base, plan.staged
        records = kept.records
        for path in plan.files:
            if path.startswith(f"{TOPICS}/"):
                before, after = base.topics.get(path), staged.topics.get(path)
                records += (len(after.records) if after else 0) - (len(before.records) if before else 0)
        self._write_stats(WorkspaceStats(tree, len(staged.topic_shas), records, kept.sources + sources_added))

    # -- writing -----------------------------------------------------------------

    def archive_sources(self, messages: Iterable[SourceMessage] | PreparedSources) -> list[str]:
        """Archive messages as sources (idempotent); include the paths in the next transaction.

        Messages already prepared (:meth:`prepare_sources`) are only put in place: the fsyncs are done.
        """
        prepared = messages if isinstance(messages, PreparedSources) else self.archive.prepare(messages)
        with self.lock():
            return self.archive.commit(prepared)

    def prepare_sources(self, messages: Iterable[SourceMessage]) -> PreparedSources:
        """Write messages' archive files aside and fsync them, without the lock (another thread may hold it):
        a long forced write prepares the next batch while the current one is written."""
        return self.archive.prepare(messages)

    def transact(
        self,
        edit: Edit,
        *,
        message: str,
        appended_sources: Sequence[str] = (),
        deletions: Iterable[str] = (),
        expected_revision: str | None = None,
        dry_run: bool = False,
        guard: PlanGuard | None = None,
        staging: StagingOptions = READ_THROUGH,
    ) -> TxnResult:
        """Run ``edit`` on a staging copy, then validate, install, rebuild views and commit.

        ``appended_sources``: archived paths this transaction adds (the one change the archive may see here).

        ``deletions``: the block IDs the change deletes on purpose (every other one must stay).

        ``dry_run``: validate only, and return what would change (the topic files' diff) without
        installing; the workspace keeps every byte.

        ``guard``: checks what the validated change does before it is installed or previewed (a requester's
        scope), and decides what a dry run's diff shows.

        ``staging``: how the staging folder is laid out for ``edit`` (:class:`StagingOptions`).

        Committed sources are rewritten only by :meth:`rewrite_sources` (forget, redaction), and a write pass's
        install is fenced by :meth:`write_pass`: this path does neither.

        Raises a ScriptoriumError (with reason code and repair guidance) when
        anything is rejected; then every installed byte, the revision and the
        git history are unchanged.
        """
        return self._transact(
            edit,
            message,
            appended_sources=appended_sources,
            deletions=deletions,
            expected_revision=expected_revision,
            dry_run=dry_run,
            guard=guard,
            staging=staging,
        )

    def rewrite_sources(
        self,
        rewrites: SourceRewrites,
        *,
        message: str,
        edit: Edit | None = None,
        deletions: Iterable[str] = (),
        expected_revision: str | None = None,
        dry_run: bool = False,
    ) -> TxnResult:
        """:meth:`transact` for forget and redaction: ``rewrites`` (:meth:`SourceRewrites.forget`,
        :meth:`SourceRewrites.redact`) replaces committed sources in place, with ``edit``'s changes to the
        records in the same transaction.

        A tombstone must be its own source's, marked forgotten and without text; a redacted copy must keep
        everything of the committed source but its text, keep some text, and not be of a forgotten source.
        A path with no committed source is NOT_FOUND.
        """
        return self._transact(
            edit or _unchanged,
            message,
            deletions=deletions,
            expected_revision=expected_revision,
            dry_run=dry_run,
            rewrites=rewrites,
        )

    def write_pass(
        self,
        edit: Edit,
        *,
        message: str,
        appended_sources: Sequence[str] = (),
        staging: StagingOptions = READ_THROUGH,
        pre_install: PreInstallHook | None = None,
    ) -> TxnResult:
        """:meth:`transact` for the write service (a writer's batch, an organize): ``pre_install`` is its pass
        lock's check (its fencing token), run under the workspace lock right before installing; a failure
        there installs nothing (PRE_INSTALL_FAILED, or the callback's own error)."""
        return self._transact(
            edit, message, appended_sources=appended_sources, staging=staging, pre_install=pre_install
        )

    def _transact(
        self,
        edit: Edit,
        message: str,
        *,
        appended_sources: Sequence[str] = (),
        deletions: Iterable[str] = (),
        expected_revision: str | None = None,
        dry_run: bool = False,
        guard: PlanGuard | None = None,
        staging: StagingOptions = READ_THROUGH,
        rewrites: SourceRewrites = NO_REWRITES,
        pre_install: PreInstallHook | None = None,
    ) -> TxnResult:
        if not message.strip():
            raise InvalidArgument("a transaction needs a commit message")
        # The kernel lock covers reading the baseline and installing, not the edit: a slow
        # writer (a model call) must not block other installs. A baseline that moved by
        # install time is a REVISION_CONFLICT, never a lost update.
        with self.lock():
            self.recover()
            base = self.snapshot()
        if expected_revision is not None and expected_revision != base.tree:
            raise RevisionConflict(
                f"the workspace moved from {expected_revision[:12]} to {base.tree[:12]}; reload and retry"
            )
        stage = Staging(
            self.root,
            self.id,
            base.topic_shas,
            appended_sources if staging.show_sources else (),
            materialize=staging.materialize,
            source_file=self.archive.stored_path,
        )
        try:
            edit(stage)
            raw = redact_staged(stage.collect(), self.config.redactor)
        finally:
            stage.cleanup()
        try:
            plan = self._planner.plan(base, raw, appended_sources, deletions)
        except ScriptoriumError as refused:
            if guard is None:
                raise
            raise guard.refusal(base, refused) from None
        plan.rewrite_sources(
            rewrites,
            lambda path: self.archive.committed(self.git, base.tree, path) is not None,
            lambda path: self.archive.committed(self.git, base.tree, path),
        )
        if guard is not None:
            guard.check(plan)
        if dry_run:
            return plan.preview(self.git.read_blob, guard)
        return self._apply(plan, message, pre_install)

    def _message(self, message: str) -> str:
        """A commit message as it is stored: without secrets (a caller's message may quote one)."""
        return message if self.config.redactor is None else self.config.redactor.text(message)

    def apply_changes(
        self,
        changes: Sequence[TopicChange],
        *,
        message: str,
        expected_revision: str | None = None,
        pre_install: PreInstallHook | None = None,
        dry_run: bool = False,
    ) -> TxnResult:
        """Whole-topic changes; deleting a topic explicitly deletes its records."""
        with self.lock():
            self.recover()
            deletions = whole_topic_deletions(self.snapshot(), changes)

            def edit(stage: Staging) -> None:
                for change in changes:
                    if change.action == "delete":
                        stage.delete(change.path)
                    else:
                        assert change.content is not None
                        stage.write(change.path, change.content)

            return self._transact(
                edit,
                message,
                deletions=deletions,
                expected_revision=expected_revision,
                dry_run=dry_run,
                pre_install=pre_install,
            )

    def rebuild_views(self, *, message: str = "Rebuild derived views") -> TxnResult:
        """Re-render every view from the topics (a no-op when they are current)."""
        with self.lock():
            self.recover()
            plan = self._planner.plan(self.snapshot(), {}, force_views=True)
            return self._apply(plan, message, None)

    def install_relayout(
        self,
        topics: Mapping[str, bytes | None],
        relocated: Mapping[str, bytes | None],
        message: str,
        link_file: Callable[[str], str] | None = None,
    ) -> TxnResult:
        """The layout migration's transaction (:func:`scriptorium.workspace.layout.migrate`, the one caller):
        ``topics`` as a staged edit (None deletes), ``relocated`` the committed sources it moves (new path →
        bytes, old path → None); validated as any change, the views rendered again, installed through the
        journal."""
        with self.lock():
            self.recover()
            plan = self._planner.plan(
                self.snapshot(), topics, force_views=True, relocated=relocated, link_file=link_file
            )
            return self._apply(plan, message, None)

    def commit_note(self, message: str) -> str | None:
        """Put a decision that changes no file into the history: an empty commit on ``main`` (the revision,
        a tree hash, stays). Returns the commit, or None when git refused the ref update."""
        if not message.strip():
            raise InvalidArgument("a note needs a commit message")
        with self.lock():
            self.recover()
            base = self.snapshot()
            commit = self.git.write_commit(base.tree, base.commit, self._message(message))
            self.git.sync_objects()
            committed = self.installer.install({}, base.tree, commit, base.commit).commit
        self.packer.after_install()
        return committed

    def promote_source(self, source: str, *, message: str | None = None) -> TxnResult:
        """Mark an archived source trusted: the one change its file may ever see.

        ``source`` is its identity (``provider/thread/message``) or archive path.
        Only the header's trust field changes, as its own committed transaction;
        promoting a trusted source changes nothing. Unknown sources are NOT_FOUND.
        """
        path = source if source.startswith(f"{SOURCES}/") else self._source_path(source)
        with self.lock():
            self.recover()
            base = self.snapshot()
            if not self.archive.exists(path):
                raise NotFound(f"no archived source {source}", path=path)
            current = self.archive.read(path)
            plan = Plan(base, base, {})
            if current.trust != "trusted":
                plan.files[path] = render_source(replace(current, trust="trusted"))
        return self._apply(plan, message or f"Promote source {current.identity} to trusted", None)

    @staticmethod
    def _source_path(identity: str) -> str:
        parts = identity.split("/")
        if len(parts) != 3 or not all(parts):
            raise InvalidArgument(f"a source is named provider/thread/message or by its archive path, not {identity!r}")
        return source_path(*parts)

    def _apply(self, plan: Plan, message: str, pre_install: PreInstallHook | None) -> TxnResult:
        base = plan.base
        omitted = plan.core.omitted_ids if plan.core else ()
        if plan.empty:
            return TxnResult(base.tree, base.tree, (), core_omitted_ids=omitted, message="nothing changed")
        sources_added = self._sources_added(plan)
        rewritten = self.archive.fold(plan.files, plan.archived)  # layout 3: sources into conversation files
        tree = self.git.build_tree(base.tree, plan.files)
        commit = self.git.write_commit(tree, base.commit, self._message(message))
        self.git.sync_objects()
        install_steps.crash_point("objects-written")
        changed_files = tuple(sorted(plan.files))
        with self.lock():
            self.recover()
            if pre_install is not None:
                try:
                    pre_install(PreInstall(base.tree, tree, changed_files, base))
                except ScriptoriumError:
                    raise
                except Exception as exc:  # the callback is trusted code, but its failure must not install
                    raise PreInstallFailed(f"pre-install callback failed: {exc}") from exc
            current = self._state().tree
            if current != base.tree:
                raise RevisionConflict(
                    f"another writer installed {current[:12]} after this transaction read {base.tree[:12]}; "
                    "retry on the new baseline"
                )
            if not self.archive.unchanged(rewritten):  # a pass archived into a conversation file this rewrites
                raise RevisionConflict("a source was archived into a conversation this change rewrites; retry")
            state = self.installer.install(plan.install_files, tree, commit, base.commit)
        self.packer.after_install()  # a detached process when one is due: never waited for here
        plan.staged.tree = tree
        plan.staged.commit = state.commit
        self._caches.moved += sum(path.startswith(f"{TOPICS}/") for path in plan.files)
        for path, topic in plan.staged.topics.settle().items():  # installed: the parse cache answers for them
            if (sha := plan.staged.topic_shas.get(path)) is not None:
                self._caches.parsed.put((path, sha), topic, parsed_size(_text_size(topic)))
        self._caches.snapshot = plan.staged
        self._follow_stats(plan, tree, sources_added)
        if plan.core is not None:  # rendered for the view already: the status figures come with it
            core = self.git.lookup(tree, CORE_SOURCE)
            self._write_core_memo(core[1] if core is not None else "", plan.core)
        git_ok = state.commit is not None
        log.info("workspace.installed", revision=tree, files=len(changed_files), git_committed=git_ok)
        return TxnResult(
            revision=tree,
            previous_revision=base.tree,
            changed_files=changed_files,
            created_ids=tuple(plan.created_ids),
            created_evidence_ids=tuple(plan.created_evidence),
            memory_committed=True,
            git_committed=git_ok,
            commit=state.commit,
            core_omitted_ids=omitted,
            reason=None if git_ok else ReasonCode.GIT_COMMIT_FAILED,
            message="installed" if git_ok else "installed; git commit failed and will be retried",
            sources_added=sources_added,
        )


def _workspace_key(runtime: Path) -> str:
    path = runtime / "workspace-id"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        key = uuid.uuid4().hex[:16]
        atomic_write(path, key.encode())
        return key

    return True
