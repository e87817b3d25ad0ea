"""Structured memory changes, for callers that name records by ID: create, update, delete and move them.

The operations are rendered into topic Markdown on the staging copy and then
go through the same transaction as any edit: normalization (IDs, citations),
validation, views, install, git. Nothing here writes the live workspace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from scriptorium.errors import InvalidArgument, NotFound, ReasonCode, RevisionConflict, ValidationRejected
from scriptorium.workspace.blocks import Block, split_record_line
from scriptorium.workspace.normalize import citation_source_path
from scriptorium.workspace.paths import check_topic_path
from scriptorium.workspace.results import TxnResult
from scriptorium.workspace.snapshot import Snapshot
from scriptorium.workspace.staging import Staging
from scriptorium.workspace.topics import parse_topic, valid_date
from scriptorium.workspace.transaction import PlanGuard, SourceRewrites
from scriptorium.workspace.workspace import MemoryWorkspace
from scriptorium.writer_interface import TopicFiles

Position = Literal["start", "end", "before", "after"]
POSITIONS = ("start", "end", "before", "after")


@dataclass(frozen=True, slots=True)
class Citation:
    """A record's evidence: an archived source (``provider/thread/message``) and its display label."""

    source: str
    label: str


NEW_SOURCE_PREFIX = "new-source-"
"""Citations naming request-level evidence; ``changes.new_sources`` resolves them first."""


@dataclass(frozen=True, slots=True)
class Destination:
    topic_path: str
    headings: tuple[str, ...] = ()
    position: Position = "end"
    anchor_memory_id: str | None = None


@dataclass(frozen=True, slots=True)
class CreateRecord:
    content: str
    time: str | None
    sources: tuple[Citation, ...]
    destination: Destination


@dataclass(frozen=True, slots=True)
class UpdateRecord:
    memory_id: str
    content: str
    time: str | None
    sources: tuple[Citation, ...]


@dataclass(frozen=True, slots=True)
class DeleteRecord:
    memory_id: str


@dataclass(frozen=True, slots=True)
class MoveRecords:
    memory_ids: tuple[str, ...]
    destination: Destination


Change = CreateRecord | UpdateRecord | DeleteRecord | MoveRecords


def missing_record(memory_id: str, *, anchor: bool = False) -> NotFound:
    """The refusal for a record that does not exist; the guard gives the same for one the requester may not
    see (:mod:`scriptorium.access.scope`), so the two cannot be told apart."""
    return NotFound(f"no {'anchor ' if anchor else ''}record ^{memory_id}")


def _bad(message: str) -> InvalidArgument:
    return InvalidArgument(message)


def render_record(content: str, time: str | None, sources: Sequence[Citation], ids: Sequence[str] = ()) -> list[str]:
    """The Markdown lines of one record; citations inline, for the normalizer to resolve."""
    text = content.strip()
    if not text:
        raise _bad("record content must not be empty")
    if "\n\n" in text or any(not line.strip() for line in text.split("\n")):
        raise _bad("record content is one paragraph: no blank lines")
    if (
        time is not None
        and time != "undated"
        and not (len(time) in (4, 7, 10) and time.replace("-", "").isdigit() and valid_date(time))
    ):
        raise _bad(f"time {time!r} is not YYYY, YYYY-MM, YYYY-MM-DD or undated")
    if not sources:
        raise _bad("a record needs at least one source")
    for cite in sources:
        if not isinstance(cite.label, str) or not cite.label.strip():
            raise _bad("every source needs a non-empty label")
        if "[" in cite.label or "]" in cite.label or "\n" in cite.label:
            raise _bad(f"label {cite.label!r} cannot contain brackets or line breaks")
        if cite.source.startswith(NEW_SOURCE_PREFIX):
            raise _bad(f"{cite.source} is not declared in the request's new_sources")
    prefix = f"{time}: " if time and time != "undated" else ""
    lines = (prefix + text).split("\n")
    citations = " ".join(f"[{c.label}]({c.source})" for c in sources)
    lines[-1] = f"{lines[-1]} {citations}" + "".join(f" ^{bid}" for bid in ids)
    return lines


class _Topic:
    """One topic's blocks with record-level edits."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        parsed = parse_topic(path, text)
        self.blocks: list[Block] = [b for b in parsed.blocks if b.kind not in ("footnote", "blank")]
        self.notes: dict[str, str] = {label: note.body for label, note in parsed.footnotes.items()}

    def _record_index(self, memory_id: str) -> int | None:
        for index, block in enumerate(self.blocks):
            if block.kind == "record" and memory_id in split_record_line(block.lines[-1])[1]:
                return index
        return None

    def ids_of(self, memory_id: str) -> tuple[str, ...]:
        index = self._record_index(memory_id)
        assert index is not None
        return split_record_line(self.blocks[index].lines[-1])[1]

    def chain_at(self, index: int) -> tuple[str, ...]:
        chain: list[tuple[int, str]] = []
        for block in self.blocks[:index]:
            if block.kind == "heading":
                while chain and chain[-1][0] >= block.level:
                    chain.pop()
                chain.append((block.level, block.title))
        return tuple(title for _, title in chain)

    def take(self, memory_id: str) -> tuple[Block, list[tuple[str, str]]]:
        """Remove a record paragraph; return it and the footnote definitions it used."""
        index = self._record_index(memory_id)
        assert index is not None
        block = self.blocks.pop(index)
        text = "\n".join(block.lines)
        notes = [(label, body) for label, body in self.notes.items() if f"[^{label}]" in text]
        return block, notes

    def replace(self, memory_id: str, lines: list[str]) -> None:
        index = self._record_index(memory_id)
        assert index is not None
        self.blocks[index] = Block("record", tuple(lines), self.blocks[index].start)

    def insert(self, destination: Destination, paragraphs: list[tuple[str, ...]]) -> None:
        new = [Block("record", lines, -1) for lines in paragraphs]
        if destination.position in ("before", "after"):
            assert destination.anchor_memory_id is not None
            index = self._record_index(destination.anchor_memory_id)
            assert index is not None
            at = index if destination.position == "before" else index + 1
        else:
            start, end = self._section(destination.headings)
            at = start if destination.position == "start" else end
        self.blocks[at:at] = new

    def _section(self, headings: tuple[str, ...]) -> tuple[int, int]:
        """(first, past-last) block index of a section's own content, creating missing headings."""
        if not headings:
            first_heading = next((i for i, b in enumerate(self.blocks) if b.kind == "heading"), len(self.blocks))
            start = 1 if self.blocks and self.blocks[0].kind == "frontmatter" else 0
            return start, first_heading
        for index, block in enumerate(self.blocks):
            if block.kind == "heading" and self.chain_at(index + 1) == headings:
                end = index + 1
                while end < len(self.blocks) and self.blocks[end].kind != "heading":
                    end += 1
                return index + 1, end
        parent = headings[:-1]
        if parent:
            _start, end = self._section(parent)
            level = next(
                b.level for i, b in enumerate(self.blocks) if b.kind == "heading" and self.chain_at(i + 1) == parent
            )
            # Past the parent's subsections: the new heading closes the parent's range.
            while end < len(self.blocks) and not (
                self.blocks[end].kind == "heading" and self.blocks[end].level <= level
            ):
                end += 1
        else:
            level, end = 0, len(self.blocks)
        title = headings[-1]
        self.blocks.insert(end, Block("heading", ("#" * (level + 1) + " " + title,), -1, level + 1, title))
        return end + 1, end + 1

    def add_notes(self, notes: list[tuple[str, str]]) -> None:
        """Bring evidence definitions along; the same label with other semantics is a conflict."""
        for label, body in notes:
            existing = self.notes.get(label)
            if existing is not None and _semantics(self.path, label, existing) != _semantics(self.path, label, body):
                raise _bad(f"evidence label [^{label}] means different sources in {self.path} and the moved record")
            self.notes.setdefault(label, body)

    def text(self) -> str:
        lines: list[str] = []
        for block in self.blocks:
            if lines:
                lines.append("")
            lines.extend(block.lines)
        if self.notes:
            lines.append("")
            lines += [f"[^{label}]: {body}" for label, body in self.notes.items()]
        return "\n".join(lines) + "\n"


def _semantics(path: str, label: str, body: str) -> tuple[str | None, str | None]:
    """What a definition means: its label text and the source identity (link paths may differ)."""
    from scriptorium.workspace.normalize import citation_source_path

    note = parse_topic(path, f"[^{label}]: {body}\n").footnotes[label]
    found = citation_source_path(path, note.target) if note.target else None
    return note.link_label, found[0] if found else note.body


def _check_citation(source: str) -> None:
    """INVALID_SOURCE unless ``source`` names a source: ``provider/thread/message``, its ``sources/…`` path,
    or the request's own evidence (anything else would be rendered as a plain link, citing nothing)."""
    if source.startswith(NEW_SOURCE_PREFIX) or citation_source_path("topics/x.md", source) is not None:
        return
    raise ValidationRejected(
        f"cited source {source!r} is not provider/thread/message",
        reason=ReasonCode.INVALID_SOURCE,
        guidance="Cite only archived sources, written as provider/thread/message.",
    )


def _check(changes: Sequence[Change], snap: Snapshot) -> tuple[set[str], set[str]]:
    """Refuse a request that could not apply as one unambiguous edit (a bad destination, a missing record, two
    content operations or two moves of one record, a record both deleted and moved, an anchor that is moved or
    not where the destination says) before anything is rendered; return (content-op IDs, moved IDs)."""
    content_ids: set[str] = set()
    moved: set[str] = set()
    deleted: set[str] = set()
    for change in changes:
        if isinstance(change, CreateRecord | UpdateRecord):
            for cite in change.sources:
                _check_citation(cite.source)
        match change:
            case CreateRecord(destination=dest) | MoveRecords(destination=dest):
                check_topic_path(dest.topic_path)
                if dest.position not in POSITIONS:
                    raise _bad(f"position must be one of {', '.join(POSITIONS)}")
                if (dest.position in ("before", "after")) != (dest.anchor_memory_id is not None):
                    raise _bad("before/after need anchor_memory_id; start/end take none")
                if any(not h.strip() or "\n" in h or "\r" in h for h in dest.headings):
                    raise _bad("each heading is one non-empty line of text")
        match change:
            case UpdateRecord(memory_id=mid) | DeleteRecord(memory_id=mid):
                if snap.record(mid) is None:
                    raise missing_record(mid)
                if mid in content_ids:
                    raise _bad(f"^{mid} has more than one content operation")
                content_ids.add(mid)
                if isinstance(change, DeleteRecord):
                    deleted.add(mid)
            case MoveRecords(memory_ids=ids):
                if not ids:
                    raise _bad("move_records needs at least one memory_id")
                for mid in ids:
                    if snap.record(mid) is None:
                        raise missing_record(mid)
                    if mid in moved:
                        raise _bad(f"^{mid} is moved more than once")
                    moved.add(mid)
    if deleted & moved:
        raise _bad(f"^{sorted(deleted & moved)[0]} is both deleted and moved")
    for change in changes:
        if isinstance(change, CreateRecord | MoveRecords):
            anchor = change.destination.anchor_memory_id
            if anchor is None:
                continue
            record = snap.record(anchor)
            if record is None:
                raise missing_record(anchor, anchor=True)
            if isinstance(change, MoveRecords) and anchor in change.memory_ids:
                raise _bad(f"anchor ^{anchor} is part of the records being moved")
            if record.topic != change.destination.topic_path or record.headings != change.destination.headings:
                raise _bad(f"anchor ^{anchor} is not in {change.destination.topic_path} under that heading chain")
    return content_ids, moved


def apply_to_topics(changes: Sequence[Change], snap: Snapshot, topics: TopicFiles) -> None:
    """Render already-checked ``changes`` into the staged topics."""
    docs: dict[str, _Topic] = {}

    def doc(path: str) -> _Topic:
        if path not in docs:
            docs[path] = _Topic(path, topics.read(path) if topics.exists(path) else "")
        return docs[path]

    for change in changes:
        match change:
            case UpdateRecord(memory_id=mid):
                topic = doc(snap.id_to_topic[mid])
                topic.replace(mid, render_record(change.content, change.time, change.sources, topic.ids_of(mid)))
            case DeleteRecord(memory_id=mid):
                topic = doc(snap.id_to_topic[mid])
                ids = topic.ids_of(mid)
                named = {c.memory_id for c in changes if isinstance(c, DeleteRecord)}
                if not set(ids) <= named:
                    raise _bad(
                        f"^{mid} shares a paragraph with {', '.join('^' + i for i in ids if i != mid)}: delete all"
                    )
                topic.take(mid)
            case CreateRecord(destination=dest):
                doc(dest.topic_path).insert(dest, [tuple(render_record(change.content, change.time, change.sources))])
            case MoveRecords(memory_ids=ids, destination=dest):
                _move(ids, dest, snap, doc)
    for path, topic in docs.items():
        topics.write(path, topic.text())


def _move(ids: tuple[str, ...], dest: Destination, snap: Snapshot, get: Callable[[str], _Topic]) -> None:
    groups: list[tuple[str, ...]] = []
    position = 0
    while position < len(ids):
        mid = ids[position]
        topic = get(snap.id_to_topic[mid])
        paragraph_ids = topic.ids_of(mid)
        if tuple(ids[position : position + len(paragraph_ids)]) != paragraph_ids:
            raise _bad(
                f"^{mid} shares its paragraph with {' '.join('^' + i for i in paragraph_ids)}: "
                "move all of them, contiguously, in that order"
            )
        groups.append(paragraph_ids)
        position += len(paragraph_ids)
    paragraphs: list[tuple[str, ...]] = []
    notes: list[tuple[str, str]] = []
    for group in groups:
        block, used = get(snap.id_to_topic[group[0]]).take(group[0])
        paragraphs.append(block.lines)
        notes += used
    target = get(dest.topic_path)
    target.add_notes(notes)
    target.insert(dest, paragraphs)


def update_records(
    workspace: MemoryWorkspace,
    changes: Sequence[Change],
    *,
    message: str,
    expected_revision: str | None = None,
    appended_sources: Sequence[str] = (),
    dry_run: bool = False,
    guard: PlanGuard | None = None,
    rewrites: SourceRewrites | None = None,
) -> TxnResult:
    """Apply structured changes through the workspace transaction (all or nothing; ``dry_run``: validate
    only; ``guard``: a requester's scope, see :meth:`MemoryWorkspace.transact`).

    ``appended_sources``: archived paths this request added (see ``changes.new_sources``).

    ``rewrites``: forget's or redaction's rewrites of committed sources, in the same transaction
    (:meth:`MemoryWorkspace.rewrite_sources`); such a transaction archives nothing and has no requester.
    """
    if not changes:
        raise _bad("memory_changes must not be empty")
    if rewrites is not None and (guard is not None or appended_sources):
        raise InvalidArgument("a forget or a redaction archives no source and answers to no requester's guard")
    with workspace.lock():
        snap = workspace.snapshot()
        if expected_revision is not None and expected_revision != snap.tree:
            raise RevisionConflict(f"the workspace moved from {expected_revision[:12]} to {snap.tree[:12]}; reload")
        _check(changes, snap)
        # Deleting one ID deletes its paragraph: every ID the paragraph carries is explicit.
        deletions = {
            bid
            for change in changes
            if isinstance(change, DeleteRecord) and (record := snap.record(change.memory_id)) is not None
            for bid in record.block_ids
        }

        def edit(stage: Staging) -> None:
            apply_to_topics(changes, snap, stage)

        if rewrites is not None:
            return workspace.rewrite_sources(
                rewrites, edit=edit, message=message, deletions=deletions, expected_revision=snap.tree, dry_run=dry_run
            )
        return workspace.transact(
            edit,
            message=message,
            deletions=deletions,
            expected_revision=snap.tree,
            appended_sources=appended_sources,
            dry_run=dry_run,
            guard=guard,
        )
