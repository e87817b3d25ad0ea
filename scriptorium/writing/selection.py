"""Step 1 of a write pass: select the unwritten content of a session's branches.

Every branch is walked back from its tip to the first node marked written for
this workspace; only user messages and assistant replies among them are
content. Nodes whose source is already in the installed tree count as written
(migration from unmarked stores, and a pass that died between its install and
its markers): they are marked, so the next walk stops there.
"""

from __future__ import annotations

from datetime import datetime

from scriptorium.sessions import Node, Session, SessionStore, audience_of, origin_of
from scriptorium.workspace import MemoryWorkspace
from scriptorium.writer_interface import BatchMessage
from scriptorium.writing.batch import to_message


class PendingContent:
    """What no pass has written yet into one workspace, read from the session store."""

    def __init__(self, workspace: MemoryWorkspace, store: SessionStore, key: str) -> None:
        self.workspace = workspace
        self.store = store
        self.key = key
        """Whose write markers count: the workspace's identity."""

    def on_branch(self, session: Session, tip: str) -> tuple[list[Node], list[BatchMessage]]:
        """Unwritten nodes on the branch ending at ``tip``, and the content among them.

        Passes write a branch oldest first, so what is installed but unmarked is a prefix of the pending
        content: when the oldest pending message is not in the tree, none is, and the newer ones are not
        looked up one by one.
        """
        key = self.key
        nodes = self.store.pending(session.id, tip, key)
        provider = str(session.metadata.get("provider", "session"))
        trust = str(session.metadata.get("trust", "trusted"))
        origin, audience = origin_of(session), audience_of(session)
        indexed = [
            (i, to_message(node, provider, trust, origin, audience)) for i, node in enumerate(nodes) if node.is_content
        ]
        tree = self.workspace.revision
        if not indexed or not self._installed(tree, indexed[0][1].source.path):
            return nodes, [m for _, m in indexed]
        for position in range(len(indexed) - 1, -1, -1):
            index, message = indexed[position]
            if self._installed(tree, message.source.path):
                # Already installed (a redelivered event after a crash before marking, or an
                # unmarked store): only mark, so the next walk stops here.
                self.store.mark_written(session.id, [n.id for n in nodes[: index + 1]], key, tree)
                return nodes[index + 1 :], [m for _, m in indexed[position + 1 :]]
        raise AssertionError("unreachable: the oldest pending message is installed")

    def _installed(self, tree: str, key: str) -> bool:
        """Whether ``tree`` holds source ``key`` (in its conversation file, in layout 3)."""
        return self.workspace.archive.committed(self.workspace.git, tree, key) is not None

    def _live(self, session_id: str) -> tuple[Session | None, list[str]]:
        session = self.store.get_session(session_id)
        if session is None or session.head is None:
            return None, []
        return session, list(dict.fromkeys([session.head, *self.store.branch_tips(session_id)]))

    def messages(self, session_id: str) -> int:
        """Unwritten user/assistant messages on every live branch of a session."""
        session, tips = self._live(session_id)
        if session is None:
            return 0
        return len({m.node.id for tip in tips for m in self.on_branch(session, tip)[1]})

    def since(self, session_id: str) -> datetime | None:
        """When the oldest unwritten message on any live branch was created (None: nothing pending)."""
        session, tips = self._live(session_id)
        if session is None:
            return None
        return min((m.node.created_at for tip in tips for m in self.on_branch(session, tip)[1]), default=None)

    def on_head(self, session_id: str) -> int:
        """Unwritten messages on the branch the session's head is on."""
        session = self.store.get_session(session_id)
        if session is None or session.head is None:
            return 0
        return len(self.on_branch(session, session.head)[1])
