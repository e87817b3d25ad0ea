"""Import Codex CLI rollouts (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``) into a session store.

Each line is ``{timestamp, type, payload}``. What each becomes:

* ``session_meta`` → the session (``payload.id``; ``cwd``, ``cli_version`` and a
  ``forked_from_id`` parent in its metadata);
* ``response_item`` ``message``: role ``user`` → USER, ``assistant`` → ASSISTANT
  (``input_text`` / ``output_text`` blocks); injected context (``<environment_context>``,
  ``<user_instructions>``, AGENTS.md blocks) and ``developer``/``system`` roles → SYSTEM;
* ``function_call``, ``custom_tool_call``, ``local_shell_call``, ``web_search_call`` →
  TOOL_CALL (the tool's name only, never its arguments); ``function_call_output`` and
  ``custom_tool_call_output`` → TOOL_RESULT, paired with their call by ``call_id``;
* ``event_msg`` ``user_message`` / ``agent_message``: Codex writes every user turn and
  reply twice, as a ``response_item`` and as an event; the second of the two is left out
  (one node per message, whichever comes first);
* ``compacted`` → COMPACTION_SUMMARY;
* ``reasoning``, ``turn_context`` and every other event are not nodes; line types this
  importer does not know are counted in ``skipped`` and never fatal.

A rollout is linear: each node follows the previous one. Node IDs are the line
numbers (``l<n>``), stable for an append-only file. A thread reverted to an earlier
turn (app-server ``thread/revert``) goes on in a new rollout of the same thread,
``rollout-…-<thread>_<rollout>.jsonl``, whose ``session_meta`` names the history it
continues (``history_base``: the rollout's ID — the thread's for the first — and the
ordinal where it is cut; a rollout's line ``n`` has ordinal ``base + n - 1``). Its nodes
are ``l<n>-<last 12 hex digits of its rollout ID>``, so no two files' IDs meet; its first
node hangs under the last node before the cut on the branch holding the base rollout,
and the turns the revert dropped stay behind as the other branch (nothing is lost). A
continuation needs its base imported first (they sort so); a base never imported
leaves it a root of its own. A thread rolled back in place (app-server ``thread/rollback``,
the TUI's backtrack) gains a ``thread_rolled_back`` event (``num_turns``) and goes on in
the same file: the head goes back to before the turns it drops, the next turn hangs
there, and the dropped turns stay as the branch left. A forked rollout replays
its parent's conversation first; while its messages repeat the parent
session's, in order, they are kept as SYSTEM nodes marked ``copy_of``, so the
shared prefix is written once, in the parent.

Only USER and ASSISTANT nodes are ever written into memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scriptorium.producers.importing import EPOCH, ImportedSession, Increment, json_objects, parse_time
from scriptorium.recall.places import BRANCH_KEY, REMOTE_KEY
from scriptorium.sessions import PARENT_KEY, SPAWN_KEY, Node, NodeKind, SessionStore

PROVIDER = "codex"
INJECTED_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
    "<user_shell_command>",
    "<turn_aborted>",
)
TOOL_CALLS = {"function_call", "custom_tool_call", "local_shell_call", "web_search_call"}
TOOL_OUTPUTS = {"function_call_output", "custom_tool_call_output"}
KNOWN_TYPES = {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}

ParentTurns = Callable[[str], list[tuple[str, str, str]]]
"""A parent session's content nodes on its head branch, as (node id, role, text), oldest first."""
Branches = Callable[[str], list[list[Node]]]
"""A session's stored branches, each root first (for a continued rollout's attachment point)."""
ORDINAL_KEY = "codex_ordinal"


def _text(content: object, kinds: tuple[str, ...]) -> str:
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    parts = [str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") in kinds]
    return "\n\n".join(p for p in parts if p).strip()


def _compaction_output(entry: Mapping[str, Any], payload: Mapping[str, Any]) -> bool:
    """Whether a rollout line holds a compaction's output (``metadata.compaction_output``, on the line or on
    its item)."""
    for holder in (entry, payload):
        metadata = holder.get("metadata")
        if isinstance(metadata, Mapping) and metadata.get("compaction_output") is True:
            return True
    return False


def _norm(text: str) -> str:
    return " ".join(text.split())


class _Reader:
    """Turns rollout lines into nodes, carrying its state between increments."""

    def __init__(
        self,
        state: dict[str, Any],
        parent_turns: ParentTurns | None,
        rollout: str | None = None,
        branches: Branches | None = None,
    ) -> None:
        self.session_id: str | None = state.get("session")
        self.rollout: str | None = state.get("rollout", rollout)
        """This file's rollout ID when it is not the thread's own (the part of its name after ``_``)."""
        self.base: dict[str, Any] = dict(state.get("base") or {})
        """What a continued rollout continues: ``{"rollout": ID, "end": ordinal}``."""
        self.branches = branches
        self.last: str | None = state.get("last")
        self.time = parse_time(state.get("time"), EPOCH)
        self.mirror: dict[str, list[tuple[str, str | None]]] = {
            role: [_mirrored(entry) for entry in entries] for role, entries in (state.get("mirror") or {}).items()
        }
        """Per role, the messages of the current run of that role whose other copy has not come yet: (text,
        the copy it came as — ``item`` or ``event``; None from an older state, pairing with either)."""
        self.calls: dict[str, str] = dict(state.get("calls") or {})
        self.fork: dict[str, Any] = dict(state.get("fork") or {})
        self.turns: list[list[str | None]] = [list(t) for t in state.get("turns") or []]
        """The user turns on the way to the last node, oldest first: [its first node, that node's parent]."""
        self.moved = False
        """Whether a rollback moved the head back (the head is then the last node kept, not a new one)."""
        self.parent_turns = parent_turns
        self.metadata: dict[str, Any] = {}
        self.nodes: list[Node] = []
        self.skipped: dict[str, int] = {}

    def state(self) -> dict[str, Any]:
        return {
            "session": self.session_id,
            "last": self.last,
            "time": self.time.isoformat(),
            "mirror": {role: [list(entry) for entry in entries] for role, entries in self.mirror.items()},
            "calls": dict(list(self.calls.items())[-256:]),
            "fork": self.fork,
            "turns": self.turns[-256:],
            "rollout": self.rollout,
            "base": self.base,
        }

    def line(self, number: int, entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        payload = entry.get("payload") if isinstance(entry.get("payload"), Mapping) else {}
        assert isinstance(payload, Mapping)
        self.time = parse_time(entry.get("timestamp"), self.time)
        if kind not in KNOWN_TYPES:
            self.skipped[str(kind)] = self.skipped.get(str(kind), 0) + 1
            return
        if kind == "session_meta":
            self._session_meta(payload)
        elif self.session_id is None:
            self.skipped["before_session_meta"] = self.skipped.get("before_session_meta", 0) + 1
        elif kind == "response_item" and _compaction_output(entry, payload):
            # Codex 0.171+ keeps a compaction's summary as an ordinary assistant message marked this way: the
            # model's own digest of the turns already read, never a reply to write into memory.
            text = _text(payload.get("content"), ("output_text", "input_text", "text"))
            self._node(number, NodeKind.COMPACTION_SUMMARY, "assistant", text, {"codex_type": "compaction_output"})
        elif kind == "response_item":
            self._response_item(number, payload)
        elif kind == "event_msg":
            self._event(number, payload)
        elif kind == "compacted":
            summary = str(payload.get("message") or "")
            self._node(number, NodeKind.COMPACTION_SUMMARY, "assistant", summary, {"codex_type": "compacted"})

    def _session_meta(self, payload: Mapping[str, Any]) -> None:
        if self.session_id is None and isinstance(payload.get("id"), str):
            self.session_id = payload["id"]
        for key in ("cwd", "cli_version", "originator"):
            if isinstance(payload.get(key), str):
                self.metadata[key] = payload[key]
        git = payload.get("git")  # GitInfo at the session's start (codex-rs/protocol: SessionMetaLine.git)
        if isinstance(git, Mapping):
            for field, key in (("repository_url", REMOTE_KEY), ("branch", BRANCH_KEY), ("commit_hash", "git_commit")):
                if isinstance(git.get(field), str) and git[field]:
                    self.metadata[key] = git[field]
        base = payload.get("history_base")
        if isinstance(base, Mapping) and not self.base and not self.nodes and self.last is None:
            end, rollout = base.get("end_ordinal_exclusive"), base.get("thread_id")
            if isinstance(end, int) and isinstance(rollout, str) and self.rollout:
                self.base = {"rollout": rollout, "end": end}
                self.last = self._attachment()
        parent = payload.get("forked_from_id")
        if isinstance(parent, str) and parent:
            self.metadata.update({PARENT_KEY: parent, SPAWN_KEY: "fork"})  # continued from the parent
            self.fork.setdefault("parent", parent)
            self.fork.setdefault("matched", 0)

    def _response_item(self, number: int, payload: Mapping[str, Any]) -> None:
        item = payload.get("type")
        if item == "message":
            role = str(payload.get("role"))
            if role == "user":
                self._message(number, "user", _text(payload.get("content"), ("input_text", "text")), "message")
            elif role == "assistant":
                self._message(number, "assistant", _text(payload.get("content"), ("output_text", "text")), "message")
            else:  # developer / system instructions
                text = _text(payload.get("content"), ("input_text", "text"))
                self._node(number, NodeKind.SYSTEM, role, text, {"codex_type": "message"})
        elif item in TOOL_CALLS:
            meta = {"codex_type": item, "tool": str(payload.get("name") or item)}
            node = self._node(number, NodeKind.TOOL_CALL, "assistant", "", meta)
            if isinstance(payload.get("call_id"), str):
                self.calls[payload["call_id"]] = node.id
                meta["call_id"] = payload["call_id"]
        elif item in TOOL_OUTPUTS:
            meta = {"codex_type": item}
            call = payload.get("call_id")
            if isinstance(call, str):
                meta["call_id"] = call
                if call in self.calls:
                    meta["call_node"] = self.calls.pop(call)
            self._node(number, NodeKind.TOOL_RESULT, "user", "", meta)
        # reasoning and anything else a response may hold: not conversation content

    def _event(self, number: int, payload: Mapping[str, Any]) -> None:
        event = payload.get("type")
        if event == "user_message":
            self._message(number, "user", str(payload.get("message") or "").strip(), "user_message")
        elif event == "agent_message":
            self._message(number, "assistant", str(payload.get("message") or "").strip(), "agent_message")
        elif event == "thread_rolled_back":
            self._rolled_back(payload.get("num_turns"))

    def _rolled_back(self, count: object) -> None:
        """``thread/rollback`` dropped the last ``count`` user turns: the next node hangs where the first of
        them did, so the dropped ones stay behind as the branch left (nothing is lost)."""
        if not isinstance(count, int) or count < 1 or not self.turns:
            return
        dropped, self.turns = self.turns[-count:], self.turns[:-count]
        self.last, self.moved = dropped[0][1], True
        self.mirror = {}  # a dropped turn's copy still waiting never comes now

    def _message(self, number: int, role: str, text: str, source: str) -> None:
        if not text:
            return
        if role == "user" and text.startswith(INJECTED_PREFIXES):
            self._node(number, NodeKind.SYSTEM, role, text, {"codex_type": source, "injected": True})
            return
        key = _norm(text)
        copy = "item" if source == "message" else "event"
        waiting = self.mirror.get(role, [])
        for index, (said, came_as) in enumerate(waiting):
            if said == key and came_as != copy:  # the other copy of a message already taken: pair them
                self.mirror[role] = waiting[:index] + waiting[index + 1 :]
                return
        # A message said again (the same copy twice: "continue" after an interrupted turn) is a message again.
        self.mirror[role] = [*waiting, (key, copy)][-8:]
        # The other role's copies still waiting never get their twin now (an interrupted turn wrote one copy):
        # forgotten, so the same words said again later are not taken for that twin (test_codex_mirror.py).
        self.mirror[_other(role)] = []
        meta: dict[str, Any] = {"codex_type": source}
        copied = self._copied_from_parent(role, key)
        if copied is not None:
            meta["copy_of"] = copied
            self._turn(role, self._node(number, NodeKind.SYSTEM, role, text, meta))
            return
        kind = NodeKind.USER if role == "user" else NodeKind.ASSISTANT
        self._turn(role, self._node(number, kind, role, text, meta))

    def _turn(self, role: str, node: Node) -> None:
        if role == "user":  # a user message opens a turn (what thread/rollback counts)
            self.turns.append([node.id, node.parent_id])

    def _copied_from_parent(self, role: str, key: str) -> str | None:
        """The parent's node this message replays, while a forked rollout still repeats its parent."""
        if not self.fork or self.fork.get("done") or self.parent_turns is None:
            return None
        turns = self.parent_turns(str(self.fork["parent"]))
        matched = int(self.fork.get("matched", 0))
        if matched < len(turns) and turns[matched][1] == role and _norm(turns[matched][2]) == key:
            self.fork["matched"] = matched + 1
            return turns[matched][0]
        self.fork["done"] = True
        return None

    def _attachment(self) -> str | None:
        """The node a continued rollout's first node follows: on the branch holding the base rollout's
        nodes, the last one before the cut (None when the base was never imported)."""
        if self.session_id is None or self.branches is None:
            return None
        rollout, end = str(self.base["rollout"]), int(self.base["end"])
        for branch in self.branches(self.session_id):
            if not any(_from_rollout(node, rollout, self.session_id) for node in branch):
                continue
            before = [node for node in branch if (o := _ordinal(node)) is not None and o < end]
            if before:
                return before[-1].id
        return None

    def _node(self, number: int, kind: NodeKind, role: str, text: str, meta: dict[str, Any]) -> Node:
        assert self.session_id is not None
        node_id = f"l{number}"
        if self.base:
            node_id = f"l{number}-{str(self.rollout)[-12:]}"
            meta = {**meta, ORDINAL_KEY: int(self.base["end"]) + number - 1}
        node = Node(node_id, self.session_id, self.last, role, kind, text, self.time, meta)
        self.nodes.append(node)
        self.last = node.id
        return node


def _first_rollout_line(node: Node) -> int | None:
    """The line of a thread's first rollout a node came from (its ID is ``l<n>``), else None."""
    digits = node.id[1:]
    return int(digits) if node.id.startswith("l") and digits.isdigit() else None


def _ordinal(node: Node) -> int | None:
    """Where a node's line stands in its thread's history (a first rollout's line ``n``: ``n - 1``)."""
    found = node.metadata.get(ORDINAL_KEY)
    if isinstance(found, int):
        return found
    line = _first_rollout_line(node)
    return line - 1 if line is not None else None


def _from_rollout(node: Node, rollout: str, thread: str) -> bool:
    """Whether a node came from ``rollout`` as ``history_base`` names it: the thread's own ID for its first
    rollout (nodes ``l<n>``), else a continuation's ID (nodes ``l<n>-<its tail>``)."""
    if rollout == thread:
        return _first_rollout_line(node) is not None
    return node.id.endswith(f"-{rollout[-12:]}")


def rollout_id(path: Path | None) -> str | None:
    """A continued rollout's own ID, from its name (``rollout-<time>-<thread>_<rollout>.jsonl``); None for a
    thread's first rollout."""
    if path is None or "_" not in path.stem:
        return None
    found = path.stem.rsplit("_", 1)[1]
    return found if len(found) >= 12 else None


def _mirrored(entry: object) -> tuple[str, str | None]:
    """A saved mirror entry: ``[text, copy]``, or a bare text as older releases saved it."""
    if isinstance(entry, list | tuple) and len(entry) == 2:
        return str(entry[0]), entry[1] if entry[1] in ("item", "event") else None
    return str(entry), None


def _other(role: str) -> str:
    return "assistant" if role == "user" else "user"


FORMAT = "codex"


def recognizes(number: int, entry: Mapping[str, Any]) -> bool:
    """A rollout line: a typed envelope around a ``payload``."""
    kind = entry.get("type")
    return "payload" in entry and kind in ("session_meta", "response_item", "event_msg", "turn_context", "compacted")


def read(increment: Increment, store: SessionStore | None) -> tuple[list[ImportedSession], dict[str, Any]]:
    """:func:`parse_increment`, with what ``store`` holds already: a forked thread's parent's turns, and the
    branches a continued rollout attaches to."""
    if store is None:
        return parse_increment(increment)
    return parse_increment(increment, _parent_turns(store), _branches(store))


def _branches(store: SessionStore) -> Branches:
    def branches(session_id: str) -> list[list[Node]]:
        return [store.get_branch(session_id, tip) for tip in store.branch_tips(session_id)]

    return branches


def _parent_turns(store: SessionStore) -> ParentTurns:
    cache: dict[str, list[tuple[str, str, str]]] = {}

    def turns(session_id: str) -> list[tuple[str, str, str]]:
        if session_id not in cache:
            cache[session_id] = [(n.id, n.role, n.content) for n in store.get_branch(session_id) if n.is_content]
        return cache[session_id]

    return turns


def parse_increment(
    increment: Increment, parent_turns: ParentTurns | None = None, branches: Branches | None = None
) -> tuple[list[ImportedSession], dict[str, Any]]:
    """The session nodes in the lines a rollout gained, and the state to continue from."""
    objects, bad = json_objects(increment.lines, increment.redactor)
    reader = _Reader(increment.start_state, parent_turns, rollout_id(increment.path), branches)
    for number, entry in objects:
        reader.line(number, entry)
    if reader.session_id is None:
        return [], increment.start_state
    session = ImportedSession(reader.session_id, None, PROVIDER, bad_lines=bad, metadata=reader.metadata)
    session.nodes = reader.nodes
    session.skipped.update(reader.skipped)
    session.head = reader.last if reader.nodes or reader.moved else None
    session.updated_at = max((n.created_at for n in reader.nodes), default=reader.time if reader.moved else EPOCH)
    return [session], reader.state()
