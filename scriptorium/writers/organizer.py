"""The offline organizer: deterministic rearrangement, no new content, no sources in sight.

What it does without a model:

* merges records that say exactly the same thing within a topic into one
  paragraph that keeps every block ID and every citation;
* applies the Core rule it can decide mechanically: a record of
  ``topics/core.md`` that duplicates a record elsewhere leaves Core and is
  merged into that record (IDs and citations kept);
* links a newer statement to the older one it restates, where it can tell by
  rule: a record of a changed topic names as superseded (``([supersedes](topic.md#^id))``)
  the newest installed record that says nearly the same differently (most of their
  terms shared, not all), on an earlier day, by the same speaker, from the same
  project (``restated``: found from the recall index's postings, not by reading
  every topic). A command renamed or a flag changed between two sessions: recall
  ranks the newer first and the page strikes the older through, linked to it. The
  user's words and writers' records only: an agent narrating its work says "Let's
  run the tests" in every session and replaces nothing (on the coding dev set, 158
  of 159 links were such narration before this rule).

Judging what is stale or project-specific needs a model (the LLM organizer).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from scriptorium.recall.branches import block_sources
from scriptorium.recall.text import ROLES, prose, speaker_of
from scriptorium.workspace.blocks import Block, split_record_line
from scriptorium.workspace.paths import CORE_SOURCE, relative_link
from scriptorium.workspace.topics import ParsedTopic, parse_date_prefix, parse_topic, supersedes_links
from scriptorium.workspace.views import plain_text
from scriptorium.writer_interface import MayCombine, Restated, TopicFiles

_REF = re.compile(r"(?<!\\)\[\^([^\]\s]+)\]")


def _key(text: str) -> str:
    return " ".join(re.sub(r"\\(.)", r"\1", text).lower().split())


@dataclass(slots=True)
class _Paragraph:
    block_index: int
    record_index: int
    key: str


class _Topic:
    """A topic's blocks with edit helpers that keep IDs and citations."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.parsed: ParsedTopic = parse_topic(path, text)
        self.blocks: list[Block | None] = list(self.parsed.blocks)
        self.paragraphs: list[_Paragraph] = []
        record_index = 0
        for index, block in enumerate(self.parsed.blocks):
            if block.kind == "record":
                record = self.parsed.records[record_index]
                self.paragraphs.append(_Paragraph(index, record_index, _key(plain_text(record))))
                record_index += 1
        self.changed = False

    def absorb(self, target: _Paragraph, refs: list[str], ids: tuple[str, ...]) -> None:
        """Add citation markup and block IDs to ``target``'s paragraph."""
        block = self.blocks[target.block_index]
        assert block is not None
        body, own = split_record_line(block.lines[-1])
        extra = "".join(ref for ref in refs if ref not in "\n".join(block.lines))
        merged_ids = tuple(dict.fromkeys([*own, *ids]))
        last = f"{body}{extra} " + " ".join(f"^{bid}" for bid in merged_ids)
        self.blocks[target.block_index] = Block("record", (*block.lines[:-1], last), block.start)
        self.changed = True

    def link_superseded(self, index: int, older: tuple[str, str]) -> None:
        """Name ``older`` (topic, memory ID) as superseded by block ``index``'s statement, before its IDs (a
        new paragraph has none yet)."""
        block = self.blocks[index]
        assert block is not None
        body, own = split_record_line(block.lines[-1])
        link = f" ([supersedes]({relative_link(self.path, older[0])}#^{older[1]}))"
        last = f"{body.rstrip()}{link}" + "".join(f" ^{bid}" for bid in own)
        self.blocks[index] = Block(block.kind, (*block.lines[:-1], last), block.start)
        self.changed = True

    def drop(self, paragraph: _Paragraph) -> None:
        self.blocks[paragraph.block_index] = None
        self.changed = True

    def sources(self, paragraph: _Paragraph) -> list[str]:
        """The archive paths the paragraph's record cites."""
        return self.parsed.cited_paths(self.parsed.records[paragraph.record_index])

    def inline_citations(self, paragraph: _Paragraph) -> list[str]:
        """The paragraph's citations rewritten as ``[label](provider/thread/message)``."""
        record = self.parsed.records[paragraph.record_index]
        out = []
        for label in record.refs:
            note = self.parsed.footnotes.get(label)
            if note and note.source and note.link_label:
                out.append(f" [{note.link_label}]({note.source.identity})")
        return out

    def text(self) -> str:
        return "\n".join(line for block in self.blocks if block is not None for line in block.lines) + "\n"


class OfflineOrganizer:
    """Merges exact duplicates and moves duplicated Core records out of Core.

    It looks at what changed since the last organize (``changed``), and at the core: duplicates within a
    topic appear only when it changes, and a core record's duplicate elsewhere is looked for in every topic
    only when the core itself changed (else in the changed topics). A topic whose bytes are the same as when
    this organizer last left it unchanged is not parsed or merged again either. So a pass organizes what
    changed, not the whole workspace, however much is stored.
    """

    name = "offline"

    def __init__(self) -> None:
        self._settled: dict[str, tuple[str, _Topic]] = {}

    def organize(
        self,
        topics: TopicFiles,
        may_combine: MayCombine | None = None,
        changed: Collection[str] | None = None,
        restated: Restated | None = None,
    ) -> None:
        present = topics.list_topics()
        scope = present if changed is None else [p for p in present if p in changed or p == CORE_SOURCE]
        loaded, fresh, digests = self._load(topics, scope)
        allowed = may_combine or (lambda sources: True)
        for path in fresh:
            self._merge_duplicates(loaded[path], allowed)
            if restated is not None:
                self._link_restatements(loaded[path], restated, allowed)
        core = loaded.get(CORE_SOURCE)
        if core is not None:
            if changed is not None and CORE_SOURCE in fresh:  # the core changed: its duplicates may be anywhere
                more, _fresh, more_digests = self._load(topics, [p for p in present if p not in loaded])
                loaded |= more
                digests |= more_digests
            self._move_duplicates_out_of_core(core, loaded, allowed)
        settled = {} if changed is None else self._settled
        for path, topic in loaded.items():
            if topic.changed:
                topics.write(path, topic.text())
                settled.pop(path, None)
            else:  # unchanged and merged: the next pass may skip it while its bytes stay the same
                settled[path] = (digests[path], topic)
        self._settled = settled

    def _load(self, topics: TopicFiles, paths: Iterable[str]) -> tuple[dict[str, _Topic], list[str], dict[str, str]]:
        loaded: dict[str, _Topic] = {}
        fresh: list[str] = []
        digests: dict[str, str] = {}
        for path in paths:
            text = topics.read(path)
            digest = digests[path] = hashlib.sha1(text.encode()).hexdigest()
            settled = self._settled.get(path)
            if settled is not None and settled[0] == digest:
                loaded[path] = settled[1]
            else:
                loaded[path] = _Topic(path, text)
                fresh.append(path)
        return loaded, fresh, digests

    def _merge_duplicates(self, topic: _Topic, allowed: MayCombine) -> None:
        first: dict[str, _Paragraph] = {}
        for paragraph in topic.paragraphs:
            keeper = first.setdefault(paragraph.key, paragraph)
            if keeper is paragraph:
                continue
            if not allowed([*topic.sources(keeper), *topic.sources(paragraph)]):
                continue  # the same words on sibling branches: alternatives, kept apart
            record = topic.parsed.records[paragraph.record_index]
            topic.absorb(keeper, [f"[^{ref}]" for ref in record.refs], record.block_ids)
            topic.drop(paragraph)

    def _link_restatements(self, topic: _Topic, restated: Restated, allowed: MayCombine) -> None:
        """Each dated, cited statement of ``topic`` — a record, or a writer's new paragraph that becomes one at
        install — that names nothing as superseded yet names the installed records it restates
        (:data:`~scriptorium.writer_interface.Restated`); never one of its own IDs, never a record on a sibling
        branch of its conversation (alternatives, not a correction)."""
        for index, block in enumerate(topic.blocks):
            if block is None or block.kind not in ("record", "paragraph"):
                continue
            date, first = parse_date_prefix(block.lines[0])
            if date is None:
                continue
            body, own = split_record_line("\n".join((first, *block.lines[1:])))
            text = prose(body)
            if speaker_of(text) == ROLES[1] or supersedes_links(body):
                continue  # an agent narrating its work repeats itself ("Let's run the tests") and replaces nothing
            if not (sources := block_sources(topic.parsed, "\n".join(block.lines))):
                continue
            older = next(
                (
                    (path, memory_id)
                    for path, memory_id, cited in restated(text, date, sources)
                    if memory_id not in own and allowed([*sources, *cited])
                ),
                None,
            )
            if older is not None:  # the newest: it names the ones before it in turn (recall follows the chain)
                topic.link_superseded(index, older)

    def _move_duplicates_out_of_core(self, core: _Topic, loaded: dict[str, _Topic], allowed: MayCombine) -> None:
        elsewhere: dict[str, tuple[_Topic, _Paragraph]] = {}
        for path, topic in sorted(loaded.items()):
            if path == CORE_SOURCE:
                continue
            for paragraph in topic.paragraphs:
                if topic.blocks[paragraph.block_index] is not None:
                    elsewhere.setdefault(paragraph.key, (topic, paragraph))
        for paragraph in core.paragraphs:
            if core.blocks[paragraph.block_index] is None or paragraph.key not in elsewhere:
                continue
            topic, target = elsewhere[paragraph.key]
            if not allowed([*topic.sources(target), *core.sources(paragraph)]):
                continue
            record = core.parsed.records[paragraph.record_index]
            topic.absorb(target, core.inline_citations(paragraph), record.block_ids)
            core.drop(paragraph)
