"""Normalize one edited topic file: allocate IDs, resolve citations, prune empty structure.

Order matters: substantive uncited prose is rejected *before* empty
sections and topics are pruned, so pruning can never hide lost content.
Unchanged bytes stay unchanged; only what the rules require is rewritten.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import unquote

from scriptorium.errors import ReasonCode, ValidationRejected
from scriptorium.workspace.blocks import Block, split_record_line
from scriptorium.workspace.paths import key_of_link, relative_link, source_identity_from_path, source_path
from scriptorium.workspace.topics import ParsedTopic, footnote_refs, inline_links, parse_topic

_SOURCE_REF = re.compile(r"^[A-Za-z0-9_.-]+/[^/\s]+/[^/\s]+$")
_ARCHIVE_IN_TARGET = re.compile(r"(?:^|/)(sources/[^/#]+/(?:[^/#]+/)?[^/#]+/[^/#]+\.md)(?:#(.*))?$")
"""An archive path at the end of a link target, of either layout (:func:`source_identity_from_path` decides)."""
_HAS_WORD = re.compile(r"\w")

SourceExists = Callable[[str], bool]

UNCITED_GUIDANCE = (
    "Every statement in a topic must be a record that cites a source. End the paragraph with "
    "[short keyword](provider/thread/message) naming the archived message it comes from, "
    "or delete the paragraph."
)


class IdAllocator:
    """Runtime-allocated, creation-ordered IDs: ``m-`` (records) and ``e-`` (evidence).

    Nine base-36 digits of milliseconds then three of sequence, so sorting IDs
    sorts by creation time.
    """

    _lock = threading.Lock()
    _last: tuple[int, int] = (0, 0)

    def __init__(self, taken: Callable[[str], bool]) -> None:
        self._taken = taken

    @classmethod
    def _next_stamp(cls) -> tuple[int, int]:
        with cls._lock:
            now = int(time.time() * 1000)
            last_ms, seq = cls._last
            cls._last = (last_ms, seq + 1) if now <= last_ms else (now, 0)
            return cls._last

    def new(self, prefix: str) -> str:
        while True:
            ms, seq = self._next_stamp()
            candidate = f"{prefix}-{_stamp36(ms)}{_base36(seq, 3)}"
            if not self._taken(candidate):
                return candidate


@lru_cache(maxsize=16)
def _stamp36(ms: int) -> str:
    """The millisecond part of an ID; a pass allocates hundreds within the same few milliseconds."""
    return _base36(ms, 9)


def _base36(value: int, width: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while value:
        value, rem = divmod(value, 36)
        out = digits[rem] + out
    return out.rjust(width, "0")[-width:]


@dataclass(slots=True)
class NormalizeResult:
    """The normalized bytes (None: the topic is empty and removed) and what was allocated."""

    text: str | None
    created_ids: list[str] = field(default_factory=list)
    created_evidence: list[str] = field(default_factory=list)


def _reject(reason: ReasonCode, message: str, guidance: str, rejected: str, path: str) -> ValidationRejected:
    return ValidationRejected(message, reason=reason, guidance=guidance, rejected_text=rejected, path=path)


def citation_source_path(topic: str, target: str) -> tuple[str, str] | None:
    """(archive path, fragment) a link target cites, from the target alone.

    Accepts a bare ``provider/thread/message`` source_ref or any link whose
    path ends in an archive path (``sources/<p>/<shard>/<t>/<m>.md``, layout 1's
    ``sources/<p>/<t>/<m>.md``, or a conversation file ``sources/<p>/<shard>/<t>.md`` with the message's
    ``#source-<m>`` fragment); labels are never consulted. The path returned is always
    the current layout's: a topic normalized links its sources where they are now.
    """
    if "://" in target or target.startswith("#"):
        return None
    # A block link of three parts (``../../core.md#^id``, ``conversations/2026-11/….md#^id``, as topics in a
    # month's folder write them) is never one: it names a record, and no provider is named "." or "..".
    is_link = target.endswith(".md") or "#^" in target or target.startswith(("../", "./"))
    if _SOURCE_REF.match(target) and not is_link:
        provider, thread, message = (unquote(part) for part in target.split("/"))
        return source_path(provider, thread, message), ""
    path_part, _, fragment = target.partition("#")
    match = _ARCHIVE_IN_TARGET.search(unquote(path_part) + ("#" + fragment if fragment else ""))
    key = key_of_link(match.group(1), match.group(2) or "") if match else None
    if match is None or key is None:
        return None
    return key, match.group(2) or ""


class TopicNormalizer:
    """Normalizes edited topics against the archive and the IDs the workspace knows."""

    def __init__(
        self,
        source_exists: SourceExists,
        known_ids: Callable[[str], bool],
        link_file: Callable[[str], str] | None = None,
    ) -> None:
        """``link_file``: the file a citation of a source key links (the archive's: the message's own file in
        layout 2, its conversation's in layout 3)."""
        self._source_exists = source_exists
        self._known_ids = known_ids
        self._link_file = link_file or (lambda key: key)
        self._allocator = IdAllocator(self._taken)
        self._issued: set[str] = set()

    def _taken(self, candidate: str) -> bool:
        return candidate in self._issued or self._known_ids(candidate)

    def _allocate(self, prefix: str) -> str:
        new = self._allocator.new(prefix)
        self._issued.add(new)
        return new

    def _archive_target(self, topic: str, target: str, rejected: str) -> tuple[str, str] | None:
        found = citation_source_path(topic, target)
        if found is None:
            return None
        path, fragment = found
        identity = source_identity_from_path(path)
        assert identity is not None
        if not self._source_exists(path):
            raise _reject(
                ReasonCode.INVALID_SOURCE,
                f"cited source {'/'.join(identity)} is not in the archive",
                "Cite only archived sources, written as [short keyword](provider/thread/message).",
                rejected,
                topic,
            )
        if fragment and fragment != f"source-{identity[2]}":
            raise _reject(
                ReasonCode.INVALID_SOURCE,
                f"link fragment #{fragment} does not name source {'/'.join(identity)}",
                "Use the archive link the runtime wrote, or cite as [keyword](provider/thread/message).",
                rejected,
                topic,
            )
        return path, f"{relative_link(topic, self._link_file(path))}#source-{identity[2]}"

    def normalize(self, path: str, text: str) -> NormalizeResult:
        """Return the normalized topic or raise ValidationRejected with repair guidance."""
        text = text.replace("\r\n", "\n")
        parsed = parse_topic(path, text)
        result = NormalizeResult(text=None)
        definitions = self._normalize_definitions(parsed)
        new_defs: list[str] = []
        by_content: dict[tuple[str, str], str] = {}
        for label, (link_label, target) in definitions.items():
            by_content.setdefault((link_label, target), label)
        blocks: list[Block] = []
        for block in parsed.blocks:
            if block.kind in ("record", "paragraph"):
                block = self._normalize_paragraph(path, block, definitions, by_content, new_defs, result)
            elif block.kind == "code":
                raise _reject(
                    ReasonCode.INVALID_TOPIC_FORMAT,
                    "topics hold cited records, not code blocks",
                    UNCITED_GUIDANCE,
                    "\n".join(block.lines),
                    path,
                )
            blocks.append(block)
        rendered = self._prune_and_render(path, blocks, definitions, new_defs)
        result.text = rendered
        return result

    def _normalize_definitions(self, parsed: ParsedTopic) -> dict[str, tuple[str, str]]:
        """label → (keyword, canonical target) for every footnote citing the archive."""
        out: dict[str, tuple[str, str]] = {}
        for label, note in parsed.footnotes.items():
            if note.target is None or note.link_label is None:
                continue
            canonical = self._archive_target(parsed.path, note.target, f"[^{label}]: {note.body}")
            if canonical is not None:
                out[label] = (note.link_label, canonical[1])
        if parsed.duplicate_footnotes:
            label = parsed.duplicate_footnotes[0]
            raise _reject(
                ReasonCode.INVALID_TOPIC_FORMAT,
                f"footnote [^{label}] is defined twice",
                "Keep one definition per footnote label.",
                f"[^{label}]",
                parsed.path,
            )
        return out

    def _normalize_paragraph(
        self,
        path: str,
        block: Block,
        definitions: dict[str, tuple[str, str]],
        by_content: dict[tuple[str, str], str],
        new_defs: list[str],
        result: NormalizeResult,
    ) -> Block:
        raw = "\n".join(block.lines)
        body_last, ids = split_record_line(block.lines[-1])
        body = "\n".join([*block.lines[:-1], body_last])

        def replace(match: re.Match[str]) -> str:
            found = self._archive_target(path, match.group(2), raw)
            if found is None:
                return match.group(0)
            key = (match.group(1), found[1])
            label = by_content.get(key)
            if label is None:
                label = self._allocate("e")
                by_content[key] = label
                definitions[label] = key
                new_defs.append(label)
                result.created_evidence.append(label)
            return f"[^{label}]"

        for match in reversed(inline_links(body)):
            body = body[: match.start()] + replace(match) + body[match.end() :]
        refs = footnote_refs(body)
        if not any(ref in definitions for ref in refs):
            if not ids and not _HAS_WORD.search(body):
                return Block("blank", ("",), block.start)
            raise _reject(
                ReasonCode.INVALID_TOPIC_FORMAT,
                "uncited prose" if not ids else f"record ^{ids[0]} cites no archived source",
                UNCITED_GUIDANCE,
                raw,
                path,
            )
        for ref in refs:
            if ref not in definitions:
                raise _reject(
                    ReasonCode.INVALID_TOPIC_FORMAT,
                    f"footnote [^{ref}] has no citation definition",
                    "Define every footnote you reference, or cite inline as [keyword](provider/thread/message).",
                    raw,
                    path,
                )
        for bid in ids:
            if not self._known_ids(bid) and bid not in self._issued:
                raise _reject(
                    ReasonCode.INVALID_TOPIC_FORMAT,
                    f"block ID ^{bid} was not allocated by the runtime",
                    "Do not invent ^ids: write new records without one and the runtime allocates it.",
                    raw,
                    path,
                )
        if not ids:
            new_id = self._allocate("m")
            result.created_ids.append(new_id)
            ids = (new_id,)
        lines = body.split("\n")
        lines[-1] = lines[-1].rstrip() + " " + " ".join(f"^{bid}" for bid in ids)
        return Block("record", tuple(lines), block.start)

    def _prune_and_render(
        self,
        path: str,
        blocks: list[Block],
        definitions: dict[str, tuple[str, str]],
        new_defs: list[str],
    ) -> str | None:
        # Labels in order of first reference: what is kept, and the order definitions are written in.
        order = dict.fromkeys(
            ref for block in blocks if block.kind == "record" for ref in footnote_refs("\n".join(block.lines))
        )
        keep: list[Block] = []
        notes: dict[str, Block] = {}
        for index, block in enumerate(blocks):
            if block.kind == "heading" and not _section_has_record(blocks, index):
                continue
            if block.kind == "footnote":
                label = block.lines[0][2 : block.lines[0].index("]")]
                if label in order:
                    if label in definitions:
                        keyword, target = definitions[label]
                        block = Block("footnote", (f"[^{label}]: [{keyword}]({target})",), block.start)
                    notes[label] = block
                continue
            keep.append(block)
        if not any(block.kind == "record" for block in keep):
            return None
        for label in new_defs:
            if label in order:
                keyword, target = definitions[label]
                notes[label] = Block("footnote", (f"[^{label}]: [{keyword}]({target})",), -1)
        # Canonical form: every footnote definition at the end, in order of first reference.
        keep.extend(notes[label] for label in order if label in notes)
        return _render(keep)


def _section_has_record(blocks: list[Block], index: int) -> bool:
    level = blocks[index].level
    for block in blocks[index + 1 :]:
        if block.kind == "heading" and block.level <= level:
            return False
        if block.kind == "record":
            return True
    return False


def _render(blocks: list[Block]) -> str:
    """Join blocks, one blank line between content blocks, none at the ends."""
    lines: list[str] = []
    previous: str | None = None
    for block in blocks:
        if block.kind == "blank":
            continue
        if previous is not None and not (previous == "footnote" and block.kind == "footnote"):
            lines.append("")
        lines.extend(block.lines)
        previous = block.kind
    return "\n".join(lines) + "\n"
