"""Plan a transaction: normalize staged topics, validate every rule, derive views, build the tree.

Planning writes nothing to the live workspace; only git objects (inert until
a ref points at them) are created. The rules, each what a reader relies on:

1. the source archive is unchanged except for entries archived by this pass;
2. every pre-existing block ID is still present, except explicit deletions,
   which must leave no dangling link;
3. block links target existing ``#^block`` IDs;
4. every cited source exists;
5. substantive uncited prose is rejected before empty structure is pruned.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from scriptorium.errors import InvalidArgument, NotFound, ReasonCode, ScriptoriumError, ValidationRejected
from scriptorium.workspace.gitstore import GitStore, blob_sha
from scriptorium.workspace.normalize import TopicNormalizer
from scriptorium.workspace.paths import (
    CORE_SOURCE,
    CORE_VIEW,
    RECENT_VIEW,
    RELATIONS_VIEW,
    SOURCES,
    TIMELINE,
    TOPICS,
    LookAlikePath,
    check_new_topic_name,
    check_topic_path,
    source_identity_from_path,
    topic_name_key,
)
from scriptorium.workspace.results import TopicChange, TxnResult
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.sources import SourceArchive, SourceMessage, parse_source, render_source
from scriptorium.workspace.staging import source_not_archived
from scriptorium.workspace.topics import ParsedTopic, timeline_path
from scriptorium.workspace.views import (
    CoreRendering,
    render_core,
    render_edges,
    render_recent,
    render_timeline_file,
)


class PlanGuard(Protocol):
    """A check of what a transaction does, after normalization and validation, before anything is installed
    (and before a dry run answers); it also decides what the dry run's diff may show. The access layer's
    requester guard is one (:mod:`scriptorium.access.guard`)."""

    def check(self, plan: Plan) -> None: ...

    def topics_diff(self, plan: Plan, read_blob: Callable[[str], bytes]) -> str: ...

    def refusal(self, base: Snapshot, refused: ScriptoriumError) -> ScriptoriumError:
        """What a refusal of the change may tell its sender (it may quote records the sender cannot see)."""
        ...


@dataclass(frozen=True, slots=True)
class SourceRewrites:
    """Committed sources a transaction rewrites in place (archive path → the source as it becomes): besides
    promotion, the only changes a source file may see. Made by forget (:meth:`forget`) and redaction
    (:meth:`redact`) only, and handed to :meth:`MemoryWorkspace.rewrite_sources
    <scriptorium.workspace.workspace.MemoryWorkspace.rewrite_sources>`; every other transaction has none."""

    tombstones: Mapping[str, SourceMessage] = field(default_factory=dict)
    """Sources forgotten: each as :func:`~scriptorium.workspace.sources.tombstone` made it (its identity kept,
    its text gone)."""
    redactions: Mapping[str, SourceMessage] = field(default_factory=dict)
    """Sources redacted: each the same source with the secrets in its text replaced by their placeholders
    (:mod:`scriptorium.changes.redact`)."""

    @classmethod
    def forget(cls, tombstones: Mapping[str, SourceMessage]) -> SourceRewrites:
        return cls(tombstones=tombstones)

    @classmethod
    def redact(cls, redactions: Mapping[str, SourceMessage]) -> SourceRewrites:
        return cls(redactions=redactions)


@dataclass(frozen=True, slots=True)
class ViewSettings:
    recent_limit: int
    core_budget: int


@dataclass(slots=True)
class Plan:
    """A validated transaction, ready to install."""

    base: Snapshot
    staged: Snapshot
    files: dict[str, bytes | None]
    """Every path whose bytes change in the tree (None deletes)."""
    archived: set[str] = field(default_factory=set)
    """Paths in ``files`` already on disk with those bytes (archived sources): committed, not reinstalled."""
    created_ids: list[str] = field(default_factory=list)
    created_evidence: list[str] = field(default_factory=list)
    core: CoreRendering | None = None

    @property
    def empty(self) -> bool:
        return not self.files

    def topics_diff(self, read_blob: Callable[[str], bytes]) -> str:
        """The unified diff this plan makes to the topic files (what a dry run shows)."""
        chunks: list[str] = []
        for path in sorted(p for p in self.files if p.startswith(f"{TOPICS}/")):
            sha = self.base.topic_shas.get(path)
            before = read_blob(sha).decode("utf-8") if sha else ""
            data = self.files[path]
            after = (data or b"").decode("utf-8")
            old, new = (f"a/{path}" if sha else "/dev/null"), (f"b/{path}" if data is not None else "/dev/null")
            chunks += difflib.unified_diff(before.splitlines(True), after.splitlines(True), old, new)
        return "".join(chunks)

    def preview(self, read_blob: Callable[[str], bytes], guard: PlanGuard | None = None) -> TxnResult:
        """This validated plan as a dry run's result: what would change, and the topics' unified diff (as much
        of it as ``guard`` lets its caller see)."""
        base = self.base
        return TxnResult(
            base.tree,
            base.tree,
            tuple(sorted(self.files)),
            created_ids=tuple(self.created_ids),
            created_evidence_ids=tuple(self.created_evidence),
            core_omitted_ids=self.core.omitted_ids if self.core else (),
            message="dry run: validated, nothing installed",
            dry_run=True,
            diff=guard.topics_diff(self, read_blob) if guard is not None else self.topics_diff(read_blob),
        )

    def forget_sources(self, tombstones: Mapping[str, SourceMessage], committed: Callable[[str], bool]) -> None:
        """Replace each committed source at a path of ``tombstones`` by its tombstone (identity kept, no text)."""
        for path, stone in tombstones.items():
            if not path.startswith(f"{SOURCES}/") or not committed(path):
                raise NotFound(f"no committed source at {path} to forget", path=path)
            if stone.path != path or stone.forgotten is None or stone.text:
                raise InvalidArgument(f"{path}: a tombstone keeps the source's identity and has no text", path=path)
            self.files[path] = render_source(stone)

    def redact_sources(self, redactions: Mapping[str, SourceMessage], read: Callable[[str], bytes | None]) -> None:
        """Replace each committed source at a path of ``redactions`` by its redacted copy: the same source but
        for its text, which a secret left (``read``: the committed bytes of a path, None when there are none)."""
        for path, redacted in redactions.items():
            committed = read(path) if path.startswith(f"{SOURCES}/") else None
            if committed is None:
                raise NotFound(f"no committed source at {path} to redact", path=path)
            before = parse_source(path, committed)
            if replace(before, text=redacted.text) != redacted or before.forgotten is not None or not redacted.text:
                raise InvalidArgument(
                    f"{path}: a redacted source keeps everything of the source but its text, and a forgotten "
                    "one has none to redact",
                    path=path,
                )
            self.files[path] = render_source(redacted)

    def rewrite_sources(
        self, rewrites: SourceRewrites, committed: Callable[[str], bool], read: Callable[[str], bytes | None]
    ) -> None:
        """Forget, then redact, the committed sources ``rewrites`` names (``committed``: whether a path is in
        the base tree; ``read``: its committed bytes, None when there are none)."""
        self.forget_sources(rewrites.tombstones, committed)
        if rewrites.redactions:
            self.redact_sources(rewrites.redactions, read)

    @property
    def install_files(self) -> dict[str, bytes | None]:
        """What the installer must put on disk: everything but the already-archived sources."""
        return {path: data for path, data in self.files.items() if path not in self.archived}


def whole_topic_deletions(base: Snapshot, changes: Sequence[TopicChange]) -> set[str]:
    """The block IDs whole-topic ``changes`` delete (every record of a deleted topic), after checking that
    each names a topic path, that creates and updates carry content, and that their topics do not (create)
    or do (update, delete) exist."""
    deletions: set[str] = set()
    for change in changes:
        check_topic_path(change.path)
        if change.action == "delete":
            topic = base.topics.get(change.path)
            if topic is None:
                raise NotFound(f"no topic at {change.path}", path=change.path)
            deletions |= topic.block_ids()
        elif change.content is None:
            raise InvalidArgument(f"{change.action} of {change.path} needs content", path=change.path)
        elif change.action == "create" and change.path in base.topic_shas:
            raise InvalidArgument(f"{change.path} already exists; use update", path=change.path)
        elif change.action == "update" and change.path not in base.topic_shas:
            raise NotFound(f"no topic at {change.path}", path=change.path)
    return deletions


def _reject(reason: ReasonCode, message: str, guidance: str, rejected: str = "", path: str = "") -> ValidationRejected:
    return ValidationRejected(message, reason=reason, guidance=guidance, rejected_text=rejected, path=path)


def _quoting(quotes: tuple[str, ...], *args: str | ReasonCode) -> ValidationRejected:
    refusal = _reject(*args)  # type: ignore[arg-type]
    refusal.quotes = quotes
    return refusal


class Planner:
    """Turns raw staged topic changes into a validated :class:`Plan`."""

    def __init__(
        self,
        git: GitStore,
        archive: SourceArchive,
        parse: Callable[[str, str, bytes], ParsedTopic],
        views: ViewSettings,
    ) -> None:
        self.git = git
        self.archive = archive
        self.parse = parse
        self.views = views

    def plan(
        self,
        base: Snapshot,
        raw: Mapping[str, bytes | None],
        appended_sources: Iterable[str] = (),
        deletions: Iterable[str] = (),
        force_views: bool = False,
        relocated: Mapping[str, bytes | None] | None = None,
        link_file: Callable[[str], str] | None = None,
    ) -> Plan:
        """``relocated``: committed sources this transaction moves (the layout migration's only: new path →
        its bytes, old path → None); cited at their new paths, they count as archived. ``link_file``: the
        file a citation links (the archive's, unless the migration links the layout it moves to)."""
        deletions = set(deletions)
        relocated = relocated or {}
        for bid in deletions:
            if bid not in base.id_to_topic:
                raise NotFound(f"no record ^{bid} to delete")
        _check_new_names(base, raw)
        appended_sources = list(appended_sources)
        archived_now = set(appended_sources)  # archived by this pass: no need to ask the disk
        archived_now.update(path for path, data in relocated.items() if data is not None)
        normalizer = TopicNormalizer(
            lambda path: path in archived_now or self.archive.exists(path),
            lambda bid: bid in base.id_to_topic,
            link_file or self.archive.stored_path,
        )
        changed: dict[str, tuple[str, ParsedTopic] | None] = {}
        topic_files: dict[str, bytes | None] = {}
        plan = Plan(base, base, {})
        for path, data in sorted(raw.items()):
            if data is None:
                if path in base.topics:
                    changed[path] = None
                    topic_files[path] = None
                continue
            text = _decode(path, data)
            result = normalizer.normalize(path, text)
            plan.created_ids += result.created_ids
            plan.created_evidence += result.created_evidence
            if result.text is None:
                if path in base.topics:
                    changed[path] = None
                    topic_files[path] = None
                continue
            encoded = result.text.encode("utf-8")
            sha = blob_sha(encoded)
            if base.topic_shas.get(path) == sha:
                continue
            changed[path] = (sha, self.parse(path, sha, encoded))
            topic_files[path] = encoded
        self._check_ids(base, changed, deletions)
        self._check_not_forgotten(base, changed, archived_now)
        cited = self._cited_sources(changed)
        plan.files.update(topic_files)
        sources = self._new_sources(base, [path for path in [*appended_sources, *cited] if path not in relocated])
        plan.files.update(sources)
        plan.archived = set(sources)
        plan.files.update(relocated)
        staged = base.derive(changed)
        plan.staged = staged
        if plan.files or force_views:
            self._views(plan, changed, force_views)
        return plan

    # -- rules -------------------------------------------------------------------

    def _check_ids(
        self, base: Snapshot, changed: Mapping[str, tuple[str, ParsedTopic] | None], deletions: set[str]
    ) -> None:
        old_ids: set[str] = set()
        for path in changed:
            if path in base.topics:
                old_ids |= base.topics[path].block_ids()
        counts: Counter[str] = Counter()
        new_links: list[tuple[str, str, str]] = []
        for entry in changed.values():
            if entry is None:
                continue
            for record in entry[1].records:
                counts.update(record.block_ids)
                new_links += [(record.topic, record.memory_id, target) for target in record.links]
        new_ids = set(counts)
        for bid, count in counts.items():
            owner = base.id_to_topic.get(bid)
            if count > 1 or (owner is not None and owner not in changed):
                raise _reject(
                    ReasonCode.INVALID_TOPIC_FORMAT,
                    f"block ID ^{bid} appears more than once",
                    "A record lives in one place: when you move a record, remove it from where it was.",
                    f"^{bid}",
                )
        lost = old_ids - new_ids - deletions
        if lost:
            lost_list = sorted(lost)
            texts = [f"^{bid}: {rec.text}" for bid in lost_list if (rec := base.record(bid))]
            raise _quoting(
                tuple(lost_list),
                ReasonCode.BLOCK_ID_LOST,
                f"{len(lost_list)} existing record(s) disappeared: " + ", ".join(f"^{b}" for b in lost_list[:10]),
                "Records may be rewritten, merged or moved, but each keeps its ^id: put the IDs back "
                "(a merged paragraph may end with several ^ids). Only an explicit delete removes a record.",
                "\n".join(texts),
            )

        def present(bid: str) -> bool:
            if bid in new_ids:
                return True
            owner = base.id_to_topic.get(bid)
            return owner is not None and owner not in changed

        for topic, source_id, target in new_links:
            if not present(target):
                raise _reject(
                    ReasonCode.DANGLING_LINK,
                    f"record ^{source_id} links to ^{target}, which does not exist",
                    "Link only to existing records, as [[topics/path#^id]].",
                    f"^{source_id} → ^{target}",
                    topic,
                )
        removed = old_ids - new_ids
        for record in base.incoming_links(removed):
            if record.topic not in changed:
                target = sorted(removed.intersection(record.links))[0]
                refusal = _reject(
                    ReasonCode.DANGLING_LINK,
                    f"deleting ^{target} would leave a dangling link from ^{record.memory_id}",
                    "Remove or update the links to a record in the same change that deletes it.",
                    record.text,
                    record.topic,
                )
                refusal.quotes = (record.memory_id,)
                raise refusal

    def _check_not_forgotten(
        self, base: Snapshot, changed: Mapping[str, tuple[str, ParsedTopic] | None], archived_now: set[str]
    ) -> None:
        """A citation a change adds names no forgotten source: its file keeps only a tombstone, and an old
        request (a proposal held before the forget) must not bring the text back citing it. Refused exactly
        as a source not in the archive."""
        for path, entry in changed.items():
            if entry is None:
                continue
            parsed = entry[1]
            old = base.topics.get(path)
            had = {r.memory_id: set(old.cited_paths(r)) for r in old.records} if old is not None else {}
            for record in parsed.records:
                before = had.get(record.memory_id)
                if before is None and (moved := base.record(record.memory_id)) is not None:
                    before = set(base.topics[moved.topic].cited_paths(moved))
                for cited in parsed.cited_paths(record):
                    if cited in archived_now or (before is not None and cited in before):
                        continue
                    if self.archive.exists(cited) and self.archive.read(cited).forgotten is not None:
                        identity = source_identity_from_path(cited)
                        assert identity is not None
                        raise _reject(
                            ReasonCode.INVALID_SOURCE,
                            f"cited source {'/'.join(identity)} is not in the archive",
                            "Cite only archived sources, written as [short keyword](provider/thread/message).",
                            record.text,
                            path,
                        )

    def _cited_sources(self, changed: Mapping[str, tuple[str, ParsedTopic] | None]) -> list[str]:
        paths: list[str] = []
        for entry in changed.values():
            if entry is None:
                continue
            for note in entry[1].footnotes.values():
                if note.source_path is not None:
                    paths.append(note.source_path)
        return paths

    def _new_sources(self, base: Snapshot, paths: Iterable[str]) -> dict[str, bytes]:
        """Archive files to add to the tree: named by this pass, or cited and not yet committed."""
        out: dict[str, bytes] = {}
        for path in dict.fromkeys(paths):
            if self.archive.committed(self.git, base.tree, path) is not None:
                continue
            data = self.archive.entry(path)
            if data is None:
                raise source_not_archived(path)
            parse_source(path, data)
            out[path] = data
        return out

    # -- views -------------------------------------------------------------------

    def _views(self, plan: Plan, changed: Mapping[str, tuple[str, ParsedTopic] | None], force: bool) -> None:
        base, staged = plan.base, plan.staged
        keys: set[str] = set()
        for path, entry in changed.items():
            old = base.topics.get(path)
            before = set(old.records) if old else set()
            after = set(entry[1].records) if entry else set()
            # Only records that differ (text, date, place) move their Timeline files.
            for record in before ^ after:
                if record.date:
                    keys.add(timeline_path(record.date))
        if force or self._timeline_stale(base):
            keys |= set(staged.timeline_members) | set(self.git.list_files(base.tree, TIMELINE))
        candidates: dict[str, bytes | None] = {}
        for key in keys:
            topics = staged.timeline_topics(key)
            candidates[key] = render_timeline_file(key, topics) if topics else None
        candidates[RECENT_VIEW] = render_recent(staged.newest(self.views.recent_limit))
        candidates[RELATIONS_VIEW] = render_edges(staged.all_edges())
        if force or CORE_SOURCE in changed or self.git.lookup(base.tree, CORE_VIEW) is None:
            plan.core = render_core(staged.topics.get(CORE_SOURCE), self.views.core_budget)
            candidates[CORE_VIEW] = plan.core.text.encode("utf-8")
        for path, data in candidates.items():
            current = self.git.lookup(base.tree, path)
            if data is None:
                if current is not None:
                    plan.files[path] = None
            elif current is None or current[1] != blob_sha(data):
                plan.files[path] = data

    def _timeline_stale(self, base: Snapshot) -> bool:
        """Whether the installed Timeline files are not the ones ``base``'s records call for (a workspace
        from before the one-file-per-day layout): then every Timeline file is rendered again."""
        return set(self.git.list_files(base.tree, TIMELINE)) != set(base.timeline_members)


def _check_new_names(base: Snapshot, raw: Mapping[str, bytes | None]) -> None:
    """Refuse a new topic whose name shows a character as nothing, or passes for the core's or an existing
    topic's name (the same :func:`~scriptorium.workspace.paths.topic_name_key`: case, width, invisible and
    look-alike characters aside). Costs the new topics, not the workspace: the keys are the snapshot's."""
    core = topic_name_key(CORE_SOURCE)
    named: dict[str, str] = {}
    for path, data in sorted(raw.items()):
        if data is None or path in base.topic_shas:
            continue
        key = check_new_topic_name(path)
        if key == core and path != CORE_SOURCE:
            raise LookAlikePath(path, CORE_SOURCE, core=True)
        existing = base.topics_named_like(key)
        if existing:
            raise LookAlikePath(path, existing[0], core=False)
        if key in named:
            raise LookAlikePath(path, named[key], core=False)
        named[key] = path


def _decode(path: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _reject(
            ReasonCode.INVALID_TOPIC_FORMAT,
            f"{path} is not valid UTF-8 (byte {exc.start})",
            "Topic files are UTF-8 Markdown.",
            path=path,
        ) from exc
    if "\x00" in text:
        raise _reject(
            ReasonCode.INVALID_TOPIC_FORMAT, f"{path} contains NUL characters", "Remove NUL bytes.", path=path
        )
    return text
