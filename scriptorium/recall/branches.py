"""Which branch a record comes from: current, alternative, or none in particular — read from the session store.

A record cites archived sources; a source is one node of one session
(``sources/<provider>/<session>/<node>.md``). Its status is derived when it is
asked for, from the session graph as it is then
(:func:`scriptorium.sessions.branch_positions`): nothing is stored in the topic
or the archive, so it survives records being rewritten, merged or moved, and it
follows the head — when the user goes back to a left branch and continues
there, the two swap. A record is ``current`` if one of its sources is on the
head's path below a fork, else ``alternative`` if one is on a branch that was
left, else ``None`` (a conversation that never forked, or its shared prefix).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from scriptorium.sessions import Branch, SessionStore, branch_positions, open_store
from scriptorium.workspace.paths import source_identity_from_path


class BranchView:
    """Branch status of records, by the sources they cite (one graph read per session asked about)."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def __call__(self, cited: Sequence[Iterable[str]]) -> list[Branch | None]:
        """The status of each record, given each record's cited source paths."""
        nodes = [[identity for path in paths if (identity := source_identity_from_path(path))] for paths in cited]
        sessions = {thread for record in nodes for _provider, thread, _message in record}
        positions: dict[str, dict[str, Branch]] = {}
        for session_id in sessions:
            session = self.store.get_session(session_id)
            if session is not None:
                shape, content = self.store.node_parents(session_id), self.store.content_node_ids(session_id)
                positions[session_id] = branch_positions(shape, session.head, content)
        out: list[Branch | None] = []
        for record in nodes:
            found = {positions.get(thread, {}).get(message) for _provider, thread, message in record}
            out.append("current" if "current" in found else "alternative" if "alternative" in found else None)
        return out


_views: dict[str, BranchView] = {}
_views_lock = threading.Lock()


def shared_view(url: str) -> BranchView:
    """The process's view over the session store at ``url`` (opened on first use, then kept)."""
    with _views_lock:
        view = _views.get(url)
        if view is None:
            view = _views[url] = BranchView(open_store(url))
        return view
