"""An immutable, parsed view of one installed tree, updated incrementally.

A transaction reads its baseline as a :class:`Snapshot` of the installed tree
(never of the staging copy). Parsed topics are cached by ``(path, blob sha)``,
and the next snapshot is derived from the previous one by replacing only the
changed topics, so a small edit costs what it changes, not the workspace size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from scriptorium.workspace.topics import ParsedTopic, Record
from scriptorium.workspace.views import timeline_path


@dataclass(slots=True)
class Snapshot:
    """Topics of one installed tree and the indexes validation and views need."""

    tree: str
    commit: str | None
    topic_shas: dict[str, str]
    topics: dict[str, ParsedTopic]
    id_to_topic: dict[str, str] = field(default_factory=dict)
    timeline_members: dict[str, Counter[str]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        tree: str,
        commit: str | None,
        topic_shas: Mapping[str, str],
        parse: Callable[[str, str], ParsedTopic],
    ) -> Snapshot:
        snap = cls(tree, commit, dict(topic_shas), {})
        for path, sha in topic_shas.items():
            snap._add(parse(path, sha))
        return snap

    def _add(self, topic: ParsedTopic) -> None:
        self.topics[topic.path] = topic
        for record in topic.records:
            for bid in record.block_ids:
                self.id_to_topic[bid] = topic.path
            if record.date:
                self.timeline_members.setdefault(timeline_path(record.date), Counter())[topic.path] += 1

    def _remove(self, path: str) -> None:
        topic = self.topics.pop(path, None)
        if topic is None:
            return
        for record in topic.records:
            for bid in record.block_ids:
                if self.id_to_topic.get(bid) == path:
                    del self.id_to_topic[bid]
            if record.date:
                key = timeline_path(record.date)
                members = self.timeline_members[key]
                members[path] -= 1
                if members[path] <= 0:
                    del members[path]
                if not members:
                    del self.timeline_members[key]

    def derive(
        self,
        tree: str,
        commit: str | None,
        changed: Mapping[str, tuple[str, ParsedTopic] | None],
    ) -> Snapshot:
        """A new snapshot: this one with ``changed`` topics replaced (None removes)."""
        snap = Snapshot(
            tree,
            commit,
            dict(self.topic_shas),
            dict(self.topics),
            dict(self.id_to_topic),
            {key: Counter(members) for key, members in self.timeline_members.items()},
        )
        for path in changed:
            snap._remove(path)
            snap.topic_shas.pop(path, None)
        for path, entry in changed.items():
            if entry is not None:
                sha, topic = entry
                snap.topic_shas[path] = sha
                snap._add(topic)
        return snap

    def records(self) -> list[Record]:
        return [record for topic in self.topics.values() for record in topic.records]

    def record(self, block_id: str) -> Record | None:
        path = self.id_to_topic.get(block_id)
        if path is None:
            return None
        return next((r for r in self.topics[path].records if block_id in r.block_ids), None)

    def timeline_records(self, key: str) -> list[Record]:
        members = self.timeline_members.get(key, Counter())
        return [
            record
            for path in members
            for record in self.topics[path].records
            if record.date and timeline_path(record.date) == key
        ]

    def incoming_links(self, targets: set[str]) -> list[Record]:
        """Records anywhere that link to one of ``targets``."""
        return [r for r in self.records() if targets.intersection(r.links)] if targets else []
