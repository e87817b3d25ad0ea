"""A session store that keeps no secret: every text it is given is redacted, and every name.

What a runtime, an importer or a route hands the store — a node's content and metadata, a session's metadata
(its title, provider, parent), and the IDs that become the names of archived sources (session, node, parent,
head) — passes :class:`~scriptorium.redaction.Redactor` on its way in; IDs are redacted as names
(``redacted-aws-access-key-3f2a9c``), on reads too, so a caller asking with the ID it was given finds what was
stored under the redacted one. A secret cut in two between a node and the next one added with it, or between
a node and its parent already stored, is caught there (the new node's half; a parent stored earlier keeps
its half, which alone is no secret).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from scriptorium.redaction import Redactor
from scriptorium.sessions.model import PARENT_KEY, Node, Session, SessionStore

NAMED_METADATA = ("provider", PARENT_KEY)
"""Session metadata that names things (the provider is part of every archived source's path)."""


class RedactingStore:
    """:class:`~scriptorium.sessions.model.SessionStore` over another, redacting what goes in (see the module)."""

    def __init__(self, inner: SessionStore, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor

    def _metadata(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = self.redactor.value(dict(metadata))
        for key in NAMED_METADATA:
            if isinstance(out.get(key), str):
                out[key] = self.redactor.name(out[key])
        return out

    def _node(self, node: Node, content: str) -> Node:
        name = self.redactor.name
        return replace(
            node,
            id=name(node.id),
            session_id=name(node.session_id),
            parent_id=None if node.parent_id is None else name(node.parent_id),
            content=content,
            metadata=self.redactor.value(dict(node.metadata)),
        )

    def _contents(self, nodes: Sequence[Node]) -> list[str]:
        """Each node's content redacted, secrets cut in two between a node and its parent caught."""
        texts = [self.redactor.text(node.content) for node in nodes]
        by_id = {node.id: i for i, node in enumerate(nodes)}
        for i, node in enumerate(nodes):
            if node.parent_id is None or not texts[i]:
                continue
            j = by_id.get(node.parent_id)
            if j is not None:
                texts[j], texts[i] = self.redactor.split_secrets([texts[j], texts[i]])
            elif (parent := self.get_node(node.session_id, node.parent_id)) is not None and parent.content:
                texts[i] = self.redactor.split_secrets([parent.content, texts[i]])[1]
        return texts

    def create_session(
        self, session_id: str, metadata: Mapping[str, Any] | None = None, created_at: datetime | None = None
    ) -> Session:
        return self.inner.create_session(
            self.redactor.name(session_id), None if metadata is None else self._metadata(metadata), created_at
        )

    def get_session(self, session_id: str) -> Session | None:
        return self.inner.get_session(self.redactor.name(session_id))

    def list_sessions(self, updated_before: datetime | None = None) -> list[Session]:
        return self.inner.list_sessions(updated_before)

    def sessions_under(self, folder: str) -> dict[str, str]:
        return self.inner.sessions_under(folder)

    def children_of(self, session_id: str) -> list[Session]:
        return self.inner.children_of(self.redactor.name(session_id))

    def add_nodes(self, nodes: Sequence[Node], head: str | None = None, updated_at: datetime | None = None) -> int:
        contents = self._contents(nodes)
        redacted = [self._node(node, text) for node, text in zip(nodes, contents, strict=True)]
        return self.inner.add_nodes(redacted, None if head is None else self.redactor.name(head), updated_at)

    def set_head(self, session_id: str, head: str, updated_at: datetime | None = None) -> None:
        self.inner.set_head(self.redactor.name(session_id), self.redactor.name(head), updated_at)

    def get_node(self, session_id: str, node_id: str) -> Node | None:
        return self.inner.get_node(self.redactor.name(session_id), self.redactor.name(node_id))

    def get_branch(self, session_id: str, head: str | None = None) -> list[Node]:
        return self.inner.get_branch(self.redactor.name(session_id), None if head is None else self.redactor.name(head))

    def pending(self, session_id: str, head: str, workspace_id: str) -> list[Node]:
        return self.inner.pending(self.redactor.name(session_id), self.redactor.name(head), workspace_id)

    def branch_tips(self, session_id: str) -> list[str]:
        return self.inner.branch_tips(self.redactor.name(session_id))

    def mark_written(self, session_id: str, node_ids: Iterable[str], workspace_id: str, revision: str) -> None:
        name = self.redactor.name
        self.inner.mark_written(name(session_id), [name(n) for n in node_ids], workspace_id, revision)

    def unmark_written_except(self, workspace_id: str, revisions: Collection[str]) -> list[str]:
        return self.inner.unmark_written_except(workspace_id, revisions)

    def node_parents(self, session_id: str) -> dict[str, str | None]:
        return self.inner.node_parents(self.redactor.name(session_id))

    def content_node_ids(self, session_id: str) -> set[str]:
        return self.inner.content_node_ids(self.redactor.name(session_id))

    def node_count(self, session_id: str) -> int:
        return self.inner.node_count(self.redactor.name(session_id))

    def forget(self, session_id: str, node_ids: Iterable[str] | None, tombstone: Mapping[str, str]) -> int:
        ids = None if node_ids is None else [self.redactor.name(n) for n in node_ids]
        return self.inner.forget(self.redactor.name(session_id), ids, tombstone)

    def rewrite(self, session_id: str, text: Callable[[str], str], dry_run: bool = False) -> int:
        return self.inner.rewrite(self.redactor.name(session_id), text, dry_run)

    def compact(self) -> bool:
        return self.inner.compact()

    def close(self) -> None:
        self.inner.close()


def redacting(store: SessionStore, redactor: Redactor | None) -> SessionStore:
    """``store`` behind the redactor (itself when redaction is off)."""
    return store if redactor is None else RedactingStore(store, redactor)
