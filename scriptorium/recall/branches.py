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
from collections.abc import Callable, Collection, Iterable, Sequence

from scriptorium.recall.places import BRANCH_KEY, Place, stored_place
from scriptorium.sessions import (
    Branch,
    Node,
    Session,
    SessionStore,
    branch_positions,
    open_store,
    origin_of,
    spawned_from,
)
from scriptorium.workspace.paths import source_identity_from_path
from scriptorium.workspace.topics import ParsedTopic, footnote_refs
from scriptorium.writer_interface import BranchContext, TopicFiles


class BranchView:
    """Branch status of records, by the sources they cite.

    A session's graph is read once and its positions kept while its head, its ``updated_at`` and its
    node count stay the same (a new branch adds nodes; a head move changes the head): a search pays
    one session row and one count per session among its hits.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._known: dict[str, tuple[tuple[object, ...], dict[str, Branch]]] = {}
        self._places: dict[str, Place | None] = {}
        self._turn_branches: dict[tuple[str, str], str | None] = {}
        self._lock = threading.Lock()

    def positions(self, session_id: str) -> dict[str, Branch]:
        """The session's branch positions (empty for an unknown session).

        A session with forks, or a fork, is read with its whole family (:func:`fork_family`): a fork is a
        branch of its parent's conversation, parting where the prefix it repeats ends."""
        session = self.store.get_session(session_id)
        if session is None:
            return {}
        family = fork_family(self.store, session)
        key = tuple((s.id, s.head, s.updated_at, self.store.node_count(s.id)) for s in family)
        with self._lock:
            known = self._known.get(session_id)
        if known is not None and known[0] == key:
            return known[1]
        if len(family) == 1:
            shape, content = self.store.node_parents(session_id), self.store.content_node_ids(session_id)
            found = branch_positions(shape, session.head, content)
        else:
            found = family_positions(self.store, family).get(session_id, {})
        with self._lock:
            self._known[session_id] = (key, found)
        return found

    def __call__(self, cited: Sequence[Iterable[str]]) -> list[Branch | None]:
        """The status of each record, given each record's cited source paths."""
        nodes = [[identity for path in paths if (identity := source_identity_from_path(path))] for paths in cited]
        sessions = {thread for record in nodes for _provider, thread, _message in record}
        positions = {session_id: self.positions(session_id) for session_id in sessions}
        out: list[Branch | None] = []
        for record in nodes:
            found = {positions.get(thread, {}).get(message) for _provider, thread, message in record}
            out.append("current" if "current" in found else "alternative" if "alternative" in found else None)
        return out

    def places(self, sessions: Collection[str]) -> dict[str, Place | None]:
        """Where each of ``sessions`` ran (:func:`~scriptorium.recall.places.stored_place`; None without a
        folder): one session row each the first time, kept after (a session's folder and project are set
        when it is first imported)."""
        out: dict[str, Place | None] = {}
        for session_id in sessions:
            with self._lock:
                known = self._places.get(session_id, False)
            if known is False:
                session = self.store.get_session(session_id)
                known = stored_place(session.metadata) if session is not None else None
                if session is not None:
                    with self._lock:
                        self._places[session_id] = known
            out[session_id] = known if isinstance(known, Place) else None
        return out

    def turn_branches(self, turns: Collection[tuple[str, str]]) -> dict[tuple[str, str], str | None]:
        """The git branch each (session, node) turn was said on, as its runtime recorded it (None: not
        recorded): one node row each the first time, kept after (a turn's metadata does not change)."""
        out: dict[tuple[str, str], str | None] = {}
        for turn in turns:
            with self._lock:
                known = self._turn_branches.get(turn, False)
            if known is False:
                node = self.store.get_node(*turn)
                branch = node.metadata.get(BRANCH_KEY) if node is not None else None
                known = branch if isinstance(branch, str) and branch else None
                if node is not None:
                    with self._lock:
                        self._turn_branches[turn] = known
            out[turn] = known if isinstance(known, str) else None
        return out

    def where(self, cited: Iterable[str]) -> dict[str, list[str]]:
        """Where a record was said, from the sessions of ``cited`` (source paths): the projects they ran in
        (by name, sorted) and the git branches their turns were said on, as the runtimes recorded them
        (each turn's, else its session's). Empty lists when nothing is known."""
        identities = [i for path in cited if (i := source_identity_from_path(path))]
        places = self.places({thread for _provider, thread, _message in identities})
        turns = self.turn_branches({(thread, message) for _provider, thread, message in identities})
        branches = {
            branch
            for _provider, thread, message in identities
            if (branch := turns.get((thread, message)) or ((p := places.get(thread)) and p.branch))
        }
        return {
            "projects": sorted({place.name for place in places.values() if place is not None}),
            "git_branches": sorted(branches),
        }

    def projects(self, cited: Iterable[str]) -> frozenset[str]:
        """The identities of the projects the sessions of ``cited`` (source paths) ran in, "" for a session with
        no known folder (:meth:`where` gives their names)."""
        sessions = {identity[1] for path in cited if (identity := source_identity_from_path(path)) is not None}
        return frozenset(place.project if place is not None else "" for place in self.places(sessions).values())

    def origins(self, cited: Iterable[str]) -> list[dict[str, str]]:
        """Where the sessions of ``cited`` (source paths) came from: ``{"session", "continued_from"}``
        for a fork, ``{"session", "spawned_by"}`` for a subagent; sessions that came from nowhere are left out."""
        out: list[dict[str, str]] = []
        for session_id in dict.fromkeys(i[1] for path in cited if (i := source_identity_from_path(path))):
            session = self.store.get_session(session_id)
            origin = origin_of(session) if session is not None else None
            if origin is not None:
                out.append({"session": session_id, origin[0]: origin[1]})
        return out


def fork_family(store: SessionStore, session: Session) -> list[Session]:
    """``session`` with the sessions it is a fork of and the forks of those, the first it came from first:
    one conversation whose branches part where a fork stops repeating its parent. Just ``session`` when it
    neither is a fork nor has one (a subagent is a session of its own, no branch). One indexed lookup per
    session of the family."""
    top, seen = session, {session.id}
    while (came := spawned_from(top)) is not None and came[1] == "fork" and came[0] not in seen:
        parent = store.get_session(came[0])
        if parent is None:
            break
        top = parent
        seen.add(top.id)
    family, todo = [top], [top]
    while todo:
        for child in store.children_of(todo.pop(0).id):
            if child.id not in {s.id for s in family} and (came := spawned_from(child)) and came[1] == "fork":
                family.append(child)
                todo.append(child)
    return family


def family_positions(store: SessionStore, family: Sequence[Session]) -> dict[str, dict[str, Branch]]:
    """The branch positions of each session of a fork family, as one graph: a fork's nodes that repeat its
    parent's (``copy_of``) are the parent's, so its own first turn hangs under the last one it repeats.
    The head is the head of the session changed last (the branch the conversation went on in): going back
    to the parent and going on there swaps the two, as a head moving inside one session does."""
    parents: dict[tuple[str, str], tuple[str, str] | None] = {}
    content: set[tuple[str, str]] = set()
    alias: dict[tuple[str, str], tuple[str, str]] = {}
    for session in family:
        came = spawned_from(session)
        if session is not family[0] and came is not None:
            for node in store.get_branch(session.id):  # the prefix it repeats is on every branch of a fork
                copied = node.metadata.get("copy_of")
                if isinstance(copied, str) and copied:
                    alias[(session.id, node.id)] = (came[0], copied)

    def resolve(node: tuple[str, str]) -> tuple[str, str]:
        seen: set[tuple[str, str]] = set()
        while node in alias and node not in seen:
            seen.add(node)
            node = alias[node]
        return node

    for session in family:
        for node_id, parent_id in store.node_parents(session.id).items():
            if (session.id, node_id) not in alias:
                parents[(session.id, node_id)] = resolve((session.id, parent_id)) if parent_id is not None else None
        content |= {(session.id, node_id) for node_id in store.content_node_ids(session.id)}
    last = max(family, key=lambda s: s.updated_at)
    head = resolve((last.id, last.head)) if last.head is not None else None
    keyed = {_joined(node): _joined(parent) if parent else None for node, parent in parents.items()}
    found = branch_positions(keyed, _joined(head) if head else None, {_joined(node) for node in content})
    out: dict[str, dict[str, Branch]] = {}
    for session_id, node_id in parents:
        if (status := found.get(_joined((session_id, node_id)))) is not None:
            out.setdefault(session_id, {})[node_id] = status
    return out


def _joined(node: tuple[str, str]) -> str:
    return f"{node[0]}\x00{node[1]}"


def branch_context(
    store: SessionStore,
    session_id: str,
    head: str | None,
    tip: str,
    citable: Callable[[Node], bool],
    per_branch: int = 3,
) -> BranchContext | None:
    """Where the branch ending at ``tip`` stands, for a writer: None when no fork lies above it.

    ``citable`` says which of the other branches' messages may be cited (archived already); the first
    ``per_branch`` of each are given, oldest first.
    """
    parents, content = store.node_parents(session_id), store.content_node_ids(session_id)
    status = branch_positions(parents, head, content).get(tip)
    if status is None:
        return None
    children: dict[str, list[str]] = {}
    for child, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(child)

    def holds_content(start: str) -> bool:
        stack = [start]
        while stack:
            step = stack.pop()
            if step in content:
                return True
            stack += children.get(step, [])
        return False

    step, below = tip, tip
    while (parent := parents.get(step)) is not None:  # up to the nearest fork above the tip's branch
        if sum(holds_content(kid) for kid in children.get(parent, [])) > 1:
            break
        step = below = parent
    if parent is None:
        return None
    session = store.get_session(session_id)
    provider = str(session.metadata.get("provider", "session")) if session is not None else "session"
    siblings: list[tuple[str, str]] = []
    for kid in sorted(children.get(parent, [])):
        if kid == below:
            continue
        taken, stack = 0, [kid]
        while stack and taken < per_branch:  # the sibling branch's first messages, following its first child
            step = stack.pop(0)
            found = store.get_node(session_id, step)
            if found is not None and found.is_content and citable(found):
                siblings.append((f"{provider}/{session_id}/{found.id}", found.content))
                taken += 1
            stack += sorted(children.get(step, []))[:1]
    return BranchContext(status, parent, tuple(siblings))


class SiblingRule:
    """Whether sources may stand in one record: never two nodes of one session on sibling branches.

    Two nodes are on sibling branches when neither is an ancestor of the other (their paths part at
    a fork). A writer may still cite both in one qualified statement ("FastAPI, chosen over Flask"):
    the rule constrains the organizer, which only rearranges, and backs that with
    :meth:`check` on what an organizer pass produced.
    """

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._parents: dict[str, dict[str, str | None]] = {}

    def _ancestors(self, session_id: str, node: str) -> set[str]:
        parents = self._parents.get(session_id)
        if parents is None:
            parents = self._parents[session_id] = self.store.node_parents(session_id)
        seen: set[str] = set()
        step: str | None = node
        while step is not None and step in parents and step not in seen:
            seen.add(step)
            step = parents[step]
        return seen

    def may_combine(self, sources: Iterable[str]) -> bool:
        """False when two of ``sources`` (archive paths) are nodes of one session on sibling branches."""
        by_session: dict[str, set[str]] = {}
        for path in sources:
            if (identity := source_identity_from_path(path)) is not None:
                by_session.setdefault(identity[1], set()).add(identity[2])
        for session_id, nodes in by_session.items():
            if len(nodes) < 2:
                continue
            lines = {node: self._ancestors(session_id, node) for node in nodes}  # each includes the node
            for a in nodes:
                for b in nodes:
                    if a < b and a not in lines[b] and b not in lines[a] and lines[a] and lines[b]:
                        return False
        return True

    def forget(self) -> None:
        """Drop the graphs read (a new pass reads them again: the conversation may have grown)."""
        self._parents.clear()


def cited_sets(
    topics: TopicFiles, paths: Iterable[str] | None = None, read: Callable[[str], str | None] | None = None
) -> dict[frozenset[str], tuple[str, str]]:
    """Every record (and cited paragraph) of ``topics`` — of ``paths`` only, when given — citing two or more
    sources: its sources → (topic, text). Footnote citations and inline ``[k](provider/thread/message)`` ones
    alike (a writer's new text is still inline when the organizer runs). ``read``: another version of each
    topic's text (None: the topic is not there), instead of ``topics.read``."""
    from scriptorium.workspace.topics import parse_topic

    out: dict[frozenset[str], tuple[str, str]] = {}
    for path in topics.list_topics() if paths is None else sorted(paths):
        text = read(path) if read is not None else (topics.read(path) if topics.exists(path) else None)
        if text is None:
            continue
        topic = parse_topic(path, text)
        if topic.multi_cited is None:  # computed once per parsed topic: unchanged topics cost nothing
            topic.multi_cited = []
            for block in topic.blocks:
                if block.kind not in ("record", "paragraph"):
                    continue
                body = "\n".join(block.lines)
                if body.count("](") + body.count("[^") < 2:  # one citation at most: nothing to combine
                    continue
                sources = block_sources(topic, body)
                if len(sources) > 1:
                    topic.multi_cited.append((frozenset(sources), body))
        for cited, body in topic.multi_cited:
            out.setdefault(cited, (path, body))
    return out


def block_sources(topic: ParsedTopic, body: str) -> set[str]:
    """The archive paths a block of ``topic`` (its lines, ``body``) cites: through footnotes, and through inline
    ``[k](provider/thread/message)`` links, as a writer's new text still is when the organizer runs."""
    from scriptorium.workspace.normalize import citation_source_path
    from scriptorium.workspace.topics import inline_links

    sources = {found[0] for link in inline_links(body) if (found := citation_source_path(topic.path, link.group(2)))}
    for ref in footnote_refs(body):
        if (note := topic.footnotes.get(ref)) is not None and note.source_path is not None:
            sources.add(note.source_path)
    return sources


_views: dict[str, BranchView] = {}
_views_lock = threading.Lock()


def shared_view(url: str) -> BranchView:
    """The process's view over the session store at ``url`` (opened on first use, then kept)."""
    with _views_lock:
        view = _views.get(url)
        if view is None:
            view = _views[url] = BranchView(open_store(url))
        return view
