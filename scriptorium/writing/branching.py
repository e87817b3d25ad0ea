"""What a write pass does about branches and spawned sessions, beside the pass itself.

* :func:`organize_apart`: the organizer's turn, told which records it may combine and checked after
  (a new record citing sibling branches refuses the pass with ``BRANCHES_MERGED``);
* :func:`spawned_sessions`: the sessions a session's boundary write covers (forks and subagents of it,
  and theirs);
* :func:`together`: the parent's outcome with what those writes installed added in.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from scriptorium.errors import ReasonCode, ValidationRejected
from scriptorium.recall.branches import SiblingRule, cited_sets
from scriptorium.sessions import SessionStore
from scriptorium.workspace.paths import CORE_SOURCE
from scriptorium.workspace.staging import Staging, TopicView
from scriptorium.writer_interface import Organizer, Restated
from scriptorium.writing.outcomes import NothingDue, Outcome, Written


def organize_apart(
    organizer: Organizer,
    store: SessionStore,
    stage: Staging,
    changed: Collection[str] | None = None,
    restated: Restated | None = None,
) -> None:
    """The organizer's turn on the staged topics, kept from merging sibling branches: it is told which
    records may be combined, and what it produced is checked (``BRANCHES_MERGED``: nothing installs).
    ``restated``: where it finds the installed records a record restates (it may link it to them).

    ``changed``: the topics changed since the last organize (None: every topic). The organizer is told what
    changed (this pass's own topics included), and the check reads only the topics the organizer could
    have touched: what changed, the core, and what the organizer wrote."""
    rule = SiblingRule(store)
    scope = None if changed is None else {*changed, *stage.staged_topics(), CORE_SOURCE}
    before = cited_sets(stage, scope)
    organizer.organize(TopicView(stage), may_combine=rule.may_combine, changed=scope, restated=restated)
    touched = None
    if scope is not None:
        touched = scope | stage.staged_topics()
        if also := touched - scope:  # topics it wrote that had not changed: their sets as installed count before
            before |= cited_sets(stage, also, stage.baseline_text)
    for sources, (path, text) in cited_sets(stage, touched).items():
        if sources not in before and not rule.may_combine(sources):
            raise ValidationRejected(
                f"{path}: one record now cites sibling branches of a conversation (alternatives, not one fact)",
                reason=ReasonCode.BRANCHES_MERGED,
                guidance="Keep records from different branches apart: the writer may qualify them, not you.",
                rejected_text=text,
                path=path,
            )


def spawned_sessions(store: SessionStore, session_id: str) -> list[str]:
    """The sessions that came from ``session_id`` (forks, subagents), and theirs, nearest first: one indexed
    lookup per session found (every forced pass asks, so it must not read every session stored)."""
    todo, seen, out = [session_id], {session_id}, []
    while todo:
        for child in store.children_of(todo.pop(0)):
            if child.id not in seen:
                seen.add(child.id)
                out.append(child.id)
                todo.append(child.id)
    return out


def together(parent: Outcome, spawned: Sequence[Outcome]) -> Outcome:
    """The parent's outcome with what its spawned sessions' writes installed added in (counts summed,
    the last revision); the parent's own outcome when none installed anything."""
    written = [o for o in (parent, *spawned) if isinstance(o, Written)]
    if not written or written == [parent]:
        return parent
    return Written(
        written[-1].revision,
        tuple(dict.fromkeys(path for o in written for path in o.changed_files)),
        sum(o.nodes_written for o in written),
        sum(o.batches for o in written),
        parent.pending_nodes if isinstance(parent, Written | NothingDue) else 0,
        any(o.organized for o in written),
        sum(o.records_created for o in written),
        sum(o.sources_archived for o in written),
    )
