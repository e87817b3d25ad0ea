"""Conversation files: every archived message of one conversation in one file, or a long one's in parts (the
archive's layouts 3 and 4).

Layouts 1 and 2 keep each archived message as a file of its own (``sources/<provider>/<shard>/<thread>/
<message>.md``): about 700 bytes of text, each taking a file-system block or more, so a heavy user's year
of sources takes about three times the raw transcripts on disk by itself (417 MB for 132 MB; the same
messages as one file per conversation: 56 MB, measured on ``benchmarks/year.py``'s year). Layout 3 keeps a
conversation's messages in one file, ``sources/<provider>/<shard>/<thread>.md``:

* each entry is a message's archive bytes exactly as :func:`~scriptorium.workspace.sources.render_source`
  writes them (front matter, the ``source-<message>`` anchor, the text), after a line giving its length,
  ``<!-- source <bytes> -->`` (an HTML comment: a Markdown viewer shows the messages, not the framing). The
  length, not a separator, ends an entry, so no text a conversation holds can end one early or forge one;
* entries are in archive order, and a file only grows: a message is appended once, never moved; a
  tombstone or a promotion replaces its entry's bytes in place;
* a source keeps its identity and its key, the per-message path the rest of the workspace names it by
  (:func:`~scriptorium.workspace.paths.source_path`); its conversation's file is
  :func:`~scriptorium.workspace.paths.conversation_file`, and a citation links ``<part>#source-<message>``;
* layout 4: a long conversation's file is in parts, ``<thread>.md``, ``<thread>+2.md``, … (listed, not
  counted: :meth:`ConversationArchive.parts`). A message is appended to the last part while that stays within
  :attr:`ConversationArchive.PART_BYTES`, else it starts the next, and stays in its part for good; so a pass
  appending to a long conversation writes its last part again, not all the conversation said.

This module is the format (splitting, joining and editing a conversation file; a malformed one is refused with
``INVALID_SOURCE`` naming the file and the offset) and the archive over it; keys, files and links map in
:mod:`scriptorium.workspace.paths`.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import os
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from scriptorium.cache import BoundedCache
from scriptorium.errors import ReasonCode, ValidationRejected
from scriptorium.workspace.paths import (
    SOURCES,
    conversation_file,
    conversation_of,
    conversation_part,
    is_conversation_file,
    part_number,
    part_of,
    source_identity_from_path,
    source_path,
)
from scriptorium.workspace.sources import (
    SOURCE_FILE_MODE,
    PreparedSources,
    SourceArchive,
    SourceMessage,
    not_archived,
    parse_source,
    put_in_place,
    render_source,
)

if TYPE_CHECKING:
    from scriptorium.workspace.gitstore import GitStore
    from scriptorium.workspace.results import TextRedactor

_MARK = re.compile(rb"<!-- source (0|[1-9][0-9]{0,9}) -->\n")
_MODE_DIR = 0o040000
"""A tree entry's mode for a folder (git's; not imported from the git store, which readers of the archive, a
hook among them, do not load)."""
_SOURCE_LINE = re.compile(rb"\A---\nsource: (\"[^\n]*\")\n")
MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""No archived message is longer (a transcript's message is kilobytes); a length past it is a damaged file."""


def _invalid(message: str, path: str) -> ValidationRejected:
    return ValidationRejected(
        message,
        reason=ReasonCode.INVALID_SOURCE,
        guidance="Conversation files are written by the archive only; restore the file from git.",
        path=path,
    )


def join(entries: Iterable[bytes]) -> bytes:
    """A conversation file of ``entries`` (each a message's archive bytes), in order."""
    return b"".join(map(_framed, entries))


def _framed(entry: bytes) -> bytes:
    """One entry as a conversation file holds it: its length line, then its bytes."""
    return b"<!-- source %d -->\n%s" % (len(entry), entry)


def split(path: str, data: bytes) -> dict[str, bytes]:
    """The entries of conversation file ``path``: source key → the message's archive bytes, in file order.
    Raises ValidationRejected(INVALID_SOURCE) when the framing is broken, an entry names no source of this
    conversation, or a message is in it twice."""
    return split_from(path, data, 0, {}, [])


def split_from(path: str, data: bytes, at: int, entries: dict[str, bytes], ends: list[int]) -> dict[str, bytes]:
    """:func:`split` of ``data`` from byte ``at``, the entries before it already in ``entries`` (extended in
    place and returned), each entry's end offset appended to ``ends``."""
    while at < len(data):
        mark = _MARK.match(data, at)
        if mark is None:
            raise _invalid(f"conversation file {path} has no entry mark at byte {at}", path)
        size = int(mark.group(1))
        start = mark.end()
        if size > MAX_ENTRY_BYTES or start + size > len(data):
            raise _invalid(f"conversation file {path}: the entry at byte {at} runs past the end", path)
        entry = data[start : start + size]
        key = _key_of_entry(path, entry, at)
        if key in entries:
            raise _invalid(f"conversation file {path} holds {key} twice", path)
        entries[key] = entry
        at = start + size
        ends.append(at)
    return entries


def _key_of_entry(path: str, entry: bytes, at: int) -> str:
    """The key of the entry at byte ``at``: its conversation is the file's (provider and thread as the path
    names them), its message what its ``source:`` line says after them (a name may hold a slash)."""
    line = _SOURCE_LINE.match(entry)
    try:
        identity = json.loads(line.group(1)) if line else None
    except ValueError:
        identity = None
    conversation = source_identity_from_path(f"{conversation_of(path)[:-3]}/x.md")
    if not isinstance(identity, str) or conversation is None:
        raise _invalid(f"conversation file {path}: the entry at byte {at} names no source", path)
    prefix = f"{conversation[0]}/{conversation[1]}/"
    if not identity.startswith(prefix) or identity == prefix:
        raise _invalid(f"conversation file {path}: the entry at byte {at} is of another conversation", path)
    return source_path(conversation[0], conversation[1], identity.removeprefix(prefix))


def edit(path: str, data: bytes, entries: Mapping[str, bytes], held: Mapping[str, bytes] | None = None) -> bytes:
    """Conversation file ``path`` (``data``; empty: none yet) with ``entries`` (source key → archive bytes):
    an entry it holds takes the new bytes in place, a new one is appended, in the order given. ``held`` is
    ``data`` split, when the caller has it. Appending only copies ``data`` (no entry is framed again)."""
    if held is None:
        held = split(path, data) if data else {}
    for key in entries:
        if conversation_file(key) != conversation_of(path):
            raise _invalid(f"{key} is not a source of conversation file {path}", path)
    if all(held[key] == new for key, new in entries.items() if key in held):
        return data + join(new for key, new in entries.items() if key not in held)
    return join({**held, **entries}.values())


class _Parsed:
    """A conversation file's bytes and their entries (``data == join(entries.values())``), with each entry's
    end offset: the bytes that extend them (an append) or that they extend (the file before an append) are
    split without reading their entries again."""

    __slots__ = ("data", "ends", "entries")

    def __init__(self, data: bytes, entries: dict[str, bytes], ends: list[int]) -> None:
        self.data = data
        self.entries = entries
        self.ends = ends

    @classmethod
    def of(cls, path: str, data: bytes) -> _Parsed:
        ends: list[int] = []
        return cls(data, split_from(path, data, 0, {}, ends), ends)

    def split(self, path: str, data: bytes) -> tuple[_Parsed, bool]:
        """``data`` split, and whether to remember it in place of this one (not when this one extends it)."""
        known = self.data
        if len(data) >= len(known) and data.startswith(known):
            if len(data) == len(known):
                return self, False
            ends = list(self.ends)
            return _Parsed(data, split_from(path, data, len(known), dict(self.entries), ends), ends), True
        if known.startswith(data):  # the file before an append: the entries that end where it ends
            count = bisect.bisect_left(self.ends, len(data))
            if not data or (count < len(self.ends) and self.ends[count] == len(data)):
                count += 1 if data else 0
                return _Parsed(data, dict(itertools.islice(self.entries.items(), count)), self.ends[:count]), False
        return _Parsed.of(path, data), True

    def appended(self, entries: Mapping[str, bytes]) -> _Parsed:
        """These bytes with ``entries`` (none of them held) appended."""
        data = [self.data]
        ends = list(self.ends)
        at = len(self.data)
        for entry in entries.values():
            framed = _framed(entry)
            data.append(framed)
            at += len(framed)
            ends.append(at)
        return _Parsed(b"".join(data), {**self.entries, **entries}, ends)


def _number(part: str) -> int:
    """The number of conversation file part ``part``."""
    found = part_of(part)
    assert found is not None, part
    return found[1]


class ConversationArchive(SourceArchive):
    """The ``sources/`` folder in layouts 3 and 4: one file a conversation, a long one in parts (see the module).
    It reads, tests and archives sources by key as :class:`~scriptorium.workspace.sources.SourceArchive` does
    in layout 2, with the same guarantees: archiving the same batch twice is byte-identical, a message archived
    once is never given other bytes, and :meth:`prepare` writes and fsyncs outside the workspace lock what
    :meth:`commit` puts in place under it."""

    PART_BYTES = 512 * 1024
    """A conversation's file is cut into parts of about this many bytes (layout 4): a pass appending to a long
    conversation writes its last part again, not all it said (a part holds one entry at least, whatever its
    size)."""

    CACHED_KEYS = 65536
    """Sources whose part is remembered (a few MB)."""

    CACHED_FILES = 256
    CACHED_BYTES = 16 * 1024 * 1024
    """Conversation files kept split in memory, each cache at most this many of them and these bytes (a few
    long conversations weigh what hundreds of short ones do): a pass reads its few, a reader of one
    conversation its one."""

    def __init__(self, root: Path, redactor: TextRedactor | None = None) -> None:
        super().__init__(root, redactor)
        self._stat_split: BoundedCache[str, tuple[tuple[int, int, int], dict[str, bytes]]] = BoundedCache(
            self.CACHED_FILES, self.CACHED_BYTES
        )
        """The work tree's conversation files split, by path, with the stat signature they were read at."""
        self._blobs: BoundedCache[str, dict[str, bytes]] = BoundedCache(self.CACHED_FILES, self.CACHED_BYTES)
        """Committed conversation files split, by blob ID."""
        self._where: dict[str, str] = {}
        """Source key → the part it was read in (a hint, checked on use; emptied past :attr:`CACHED_KEYS`)."""
        self._parsed: BoundedCache[str, _Parsed] = BoundedCache(self.CACHED_FILES, self.CACHED_BYTES)
        """The last bytes of each conversation file split, by path: a pass appending to a long conversation
        splits its new entries only, wherever the bytes come from (the work tree, a blob, a prepared file)."""

    def _split(self, conversation: str, data: bytes) -> dict[str, bytes]:
        """``data``, conversation file ``conversation``'s bytes, split (:func:`split`)."""
        return self._parse(conversation, data).entries if data else {}

    def _parse(self, conversation: str, data: bytes) -> _Parsed:
        """``data``, conversation file ``conversation``'s bytes, parsed: only what extends the last bytes of it
        split here, or the entries of the bytes that it extends."""
        known = self._parsed.get(conversation)
        parsed, remember = (_Parsed.of(conversation, data), True) if known is None else known.split(conversation, data)
        if remember:
            self._remember(conversation, parsed)
        return parsed

    def _remember(self, conversation: str, parsed: _Parsed) -> None:
        self._parsed.put(conversation, parsed, 2 * len(parsed.data))

    def entries(self, conversation: str) -> dict[str, bytes]:
        """The entries of one conversation file as it is now (none when it does not exist)."""
        full = os.path.join(self.root, conversation)
        try:
            with open(full, "rb") as handle:
                st = os.fstat(handle.fileno())
                signature = (st.st_ino, st.st_size, st.st_mtime_ns)
                cached = self._stat_split.get(conversation)
                if cached is not None and cached[0] == signature:
                    return cached[1]
                data = handle.read()
        except FileNotFoundError:
            return {}
        found = self._split(conversation, data)
        self._stat_split.put(conversation, (signature, found), len(data))
        if len(self._where) + len(found) > self.CACHED_KEYS:
            self._where.clear()
        self._where.update(dict.fromkeys(found, conversation))
        return found

    def parts(self, conversation: str) -> list[str]:
        """The parts of ``conversation`` (its first part's path) the work tree holds, in order (none: not
        archived here). One listing of its shard's folder, a few conversations' files."""
        folder = conversation.rpartition("/")[0]
        try:
            names = os.listdir(os.path.join(self.root, folder))
        except FileNotFoundError:
            return []
        numbered = [(part_number(conversation, name), name) for name in names]
        return [f"{folder}/{name}" for number, name in sorted((n, name) for n, name in numbered if n is not None)]

    def _index(self, conversation: str) -> dict[str, str]:
        """Each source key ``conversation`` holds → the part holding it (one listing and one look at each part:
        what a batch of one conversation's sources asks, at once)."""
        return {key: part for part in self.parts(conversation) for key in self.entries(part)}

    def _locate(self, key: str) -> str | None:
        """The part holding source ``key`` in the work tree, None when it is not archived (newest first: what a
        pass reads back it has just appended). A message stays in its part: where it was found is looked at
        first (a pass asks for each source it cites, readers for each hit)."""
        if not key.startswith(f"{SOURCES}/"):
            return None
        known = self._where.get(key)
        if known is not None and key in self.entries(known):
            return known
        for part in reversed(self.parts(conversation_file(key))):
            if key in self.entries(part):
                return part
        return None

    def take_back(self, keys: Sequence[str]) -> None:
        by_file: dict[str, set[str]] = {}
        for key in keys:
            part = self._locate(key)
            if part is not None:
                by_file.setdefault(part, set()).add(key)
        for part, gone in by_file.items():
            target = os.path.join(self.root, part)
            held = self._split(part, self._held_bytes(part))
            kept = [data for key, data in held.items() if key not in gone]
            if not kept:  # a part emptied goes (the parts are listed, not counted: a gap is no loss)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)
                continue
            folder, _, name = target.rpartition("/")
            tmp = f"{folder}/.{name}.{uuid.uuid4().hex[:12]}.tmp"
            self._write(tmp, join(kept))
            os.replace(tmp, target)
        self.prune({(self.root / part).parent for part in by_file})

    def entries_of(self, conversation: str) -> list[str]:
        if not is_conversation_file(conversation):
            return []
        return [key for part in self.parts(conversation) for key in self.entries(part)]

    def entry(self, key: str) -> bytes | None:
        """The archive bytes of the source ``key``, None when it is not archived."""
        part = self._locate(key)
        return None if part is None else self.entries(part).get(key)

    def stored_path(self, key: str) -> str:
        """The part holding ``key`` (its conversation's first part when it is not archived)."""
        return self._locate(key) or conversation_file(key)

    def committed(self, git: GitStore, tree: str, key: str) -> bytes | None:
        if not key.startswith(f"{SOURCES}/"):
            return None
        conversation = conversation_file(key)
        folder, _, _ = conversation.rpartition("/")
        found = git.lookup(tree, folder)
        if found is None or found[0] != _MODE_DIR:
            return None
        for name, (_mode, sha) in git.tree_entries(found[1]).items():
            if part_number(conversation, name) is not None:
                data = self._committed_entries(git, f"{folder}/{name}", sha).get(key)
                if data is not None:
                    return data
        return None

    def _committed_entries(self, git: GitStore, part: str, sha: str) -> dict[str, bytes]:
        cached = self._blobs.get(sha)
        if cached is None:
            data = git.read_blob(sha)
            cached = self._split(part, data)
            self._blobs.put(sha, cached, len(data))
        return cached

    def keys(self, git: GitStore, tree: str) -> list[str]:
        return [
            key
            for part, sha in git.list_files(tree, SOURCES).items()
            for key in self._committed_entries(git, part, sha)
        ]

    def _placed(
        self, conversation: str, new: Mapping[str, bytes], edited: Mapping[str, bytes | None] | None = None
    ) -> dict[str, tuple[bytes, _Parsed]]:
        """Where ``new`` (key → archive bytes, none of them archived) go in ``conversation`` as the work tree
        holds it (or as ``edited`` has a part already): each appended to its last part while that stays within
        :attr:`PART_BYTES` (or is empty), else to a new part after it. Each part that grows → (its bytes now,
        its bytes with the new entries parsed)."""
        parts = self.parts(conversation)
        last = parts[-1] if parts else conversation
        number = _number(last) if parts else 1
        held = self._held_bytes(last) if parts else b""
        current = self._parse(last, (edited or {}).get(last) or held)
        grown: dict[str, tuple[bytes, _Parsed]] = {}
        size, pending = len(current.data), dict[str, bytes]()
        for key, entry in new.items():
            framed = len(_framed(entry))
            if size and size + framed > self.PART_BYTES:  # the next part
                if pending:
                    grown[last] = (held, current.appended(pending))
                number += 1
                last, held, current = conversation_part(conversation, number), b"", _Parsed(b"", {}, [])
                size, pending = 0, {}
            pending[key] = entry
            size += framed
        if pending:
            grown[last] = (held, current.appended(pending))
        return grown

    def fold(self, files: dict[str, bytes | None], archived: set[str]) -> dict[str, bytes]:
        """Each source of a plan (key → archive bytes: appended, a tombstone, a redaction, a promotion) into the
        part of its conversation file the work tree holds it in (every message archived there, this pass's and
        any another pass archived meanwhile; a source not archived goes where :meth:`prepare` would put it): the
        part takes the plan's bytes for those entries; one whose bytes the work tree holds already is marked
        ``archived`` (on disk, not installed again). Returns each part rewritten → its bytes before."""
        by_part: dict[str, dict[str, bytes]] = {}
        unplaced: dict[str, dict[str, bytes]] = {}
        indexes: dict[str, dict[str, str]] = {}
        for key in [k for k in files if k.startswith(f"{SOURCES}/") and not is_conversation_file(k)]:
            data = files.pop(key)
            archived.discard(key)
            if data is None:
                raise ValidationRejected(
                    f"a source is never removed: {key}",
                    reason=ReasonCode.SOURCES_MODIFIED,
                    guidance="sources/ is append-only; forget a source to keep only its tombstone.",
                    path=key,
                )
            conversation = conversation_file(key)
            if conversation not in indexes:
                indexes[conversation] = self._index(conversation)
            part = indexes[conversation].get(key)
            if part is None:
                unplaced.setdefault(conversation, {})[key] = data
            else:
                by_part.setdefault(part, {})[key] = data
        rewritten: dict[str, bytes] = {}
        for part, entries in by_part.items():
            held = self._held_bytes(part)
            data = edit(part, held, entries, self._split(part, held))
            files[part] = data
            if data == held:
                archived.add(part)
            else:  # a tombstone, a redaction, a promotion: installed over what the work tree holds
                archived.discard(part)
                rewritten[part] = held
        for conversation, new in unplaced.items():
            for part, (held, grown) in self._placed(conversation, new, files).items():
                files[part] = grown.data
                archived.discard(part)
                rewritten.setdefault(part, held)
        return rewritten

    def exists(self, path: str) -> bool:
        return self.entry(path) is not None

    def read(self, path: str) -> SourceMessage:
        data = self.entry(path)
        if data is None:
            raise not_archived(path)
        return parse_source(path, data)

    def prepare(self, messages: Iterable[SourceMessage]) -> PreparedSources:
        """Each part of a conversation file the batch appends to (its last, or new ones past
        :attr:`PART_BYTES`), written whole with its new entries to a temporary file beside it and fsynced;
        nothing is in place until :meth:`commit`."""
        prepared = PreparedSources()
        batch: dict[str, dict[str, bytes]] = {}
        for msg in (self._clean(m) for m in messages):
            data, key = render_source(msg), msg.path
            new = batch.setdefault(conversation_file(key), {})
            if new.get(key, data) != data:
                raise ValidationRejected(
                    f"source {msg.identity} is given twice with different content",
                    reason=ReasonCode.INVALID_SOURCE,
                    guidance="Cite only sources that exist in the archive, as provider/thread/message.",
                    path=key,
                )
            new[key] = data
            prepared.entries.append((key, data, None))
        token = uuid.uuid4().hex[:12]
        suffix = f".{token}.tmp"
        try:
            placed: dict[str, tuple[bytes, _Parsed]] = {}
            for conversation, new in batch.items():
                index = self._index(conversation)
                fresh = {key: data for key, data in new.items() if key not in index}
                if fresh:  # else archived before: commit checks the bytes are the same
                    placed.update(self._placed(conversation, fresh))
            if placed:
                self._register(prepared, token, list(placed), suffix)
            for part, (held, grown) in placed.items():
                self._remember(part, grown)
                tmp = self._write_beside(part, grown.data, suffix)
                prepared.conversations.append((part, held, grown.data, tmp))
        except BaseException:
            prepared.discard()
            raise
        return prepared

    def commit(self, prepared: PreparedSources) -> list[str]:
        """Put the prepared parts in place (under the workspace lock); return the batch's keys, in order. A
        conversation another pass appended to meanwhile is placed again here, with both passes' entries; a
        message archived before with other bytes refuses the whole batch before any file moves."""
        moves: list[tuple[str, str]] = []
        try:
            new_by_conversation: dict[str, dict[str, bytes]] = {}
            for key, data, _tmp in prepared.entries:
                new_by_conversation.setdefault(conversation_file(key), {})[key] = data
            staged: dict[str, list[tuple[str, bytes, str]]] = {}
            for part, held, _data, tmp in prepared.conversations:
                staged.setdefault(conversation_of(part), []).append((part, held, tmp))
            for conversation, new in new_by_conversation.items():
                fresh: dict[str, bytes] = {}
                index = self._index(conversation)
                for key, data in new.items():
                    located = index.get(key)
                    if located is None:
                        fresh[key] = data
                    elif self.entries(located)[key] != data:
                        identity = "/".join(source_identity_from_path(key) or (key,))
                        raise ValidationRejected(
                            f"source {identity} is already archived with different content",
                            reason=ReasonCode.INVALID_SOURCE,
                            guidance="Cite only sources that exist in the archive, as provider/thread/message.",
                            path=key,
                        )
                mine = staged.get(conversation, [])
                if not fresh:
                    continue
                if not mine:  # held every message when prepared: only tampering takes one out
                    raise ValidationRejected(
                        f"conversation file {conversation} lost entries while the batch was prepared",
                        reason=ReasonCode.INVALID_SOURCE,
                        guidance="Conversation files only grow; restore the file from git.",
                        path=conversation,
                    )
                newest = max(_number(part) for part, _held, _tmp in mine)
                if all(self._held_bytes(part) == held for part, held, _tmp in mine) and all(
                    _number(part) <= newest for part in self.parts(conversation)
                ):  # no entry added where the batch appends, nor a part after (where its messages may be now)
                    moves += [(tmp, os.path.join(self.root, part)) for part, _held, tmp in mine]
                    continue
                # Appended to since it was prepared: placed again here, with both passes' entries.
                for _part, _held, tmp in mine:
                    os.unlink(tmp)
                placed = self._placed(conversation, fresh)
                suffix = f".{prepared.token}.tmp"
                self._register(prepared, prepared.token, list(placed), suffix)
                for part, (_held, grown) in placed.items():
                    tmp = self._write_beside(part, grown.data, suffix)
                    prepared.conversations.append((part, b"", grown.data, tmp))
                    moves.append((tmp, os.path.join(self.root, part)))
        except BaseException:
            prepared.discard()
            raise
        return put_in_place(prepared, moves)

    def _write_beside(self, conversation: str, data: bytes, suffix: str) -> str:
        """``data`` in a new temporary file beside ``conversation`` (the name the batch's register gives it);
        its path."""
        folder, _, name = os.path.join(self.root, conversation).rpartition("/")
        os.makedirs(folder, exist_ok=True)
        tmp = f"{folder}/.{name}{suffix}"
        self._write(tmp, data)
        return tmp

    @staticmethod
    def _write(tmp: str, data: bytes) -> None:
        """A new read-only file ``tmp`` holding ``data``, fsynced."""
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SOURCE_FILE_MODE)
        try:
            view = memoryview(data)
            while view:  # a write may be short
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)


_READERS: OrderedDict[str, ConversationArchive] = OrderedDict()
_READERS_LOCK = threading.Lock()


def _reader(root: Path) -> ConversationArchive:
    """An archive of workspace ``root`` kept for readers outside the workspace (its files kept split)."""
    with _READERS_LOCK:
        reader = _READERS.get(str(root))
        if reader is None:
            reader = _READERS[str(root)] = ConversationArchive(root)
            while len(_READERS) > 8:
                _READERS.popitem(last=False)
        return reader


def stored_parts(root: Path, conversation: str) -> list[str]:
    """The parts of conversation file ``conversation`` under workspace ``root`` (none: layout 2, or not
    archived)."""
    return _reader(root).parts(conversation)


def stored_file(root: Path, key: str) -> Path:
    """The file under workspace ``root`` holding source ``key``: the part of its conversation's file holding it
    (layouts 3 and 4), else its own (layout 2). For readers that do not open the workspace (the recall index,
    a hook)."""
    part = _reader(root)._locate(key)
    return root / key if part is None else root / part


def read_entry(root: Path, key: str) -> bytes:
    """The archive bytes of source ``key`` under workspace ``root``, in any layout; FileNotFoundError when it
    is not archived, ValidationRejected(INVALID_SOURCE) when its conversation's file is damaged. Conversation
    files read are kept split (by their stat signature) for the next source of the same conversation."""
    data = _reader(root).entry(key)
    return (root / key).read_bytes() if data is None else data  # layout 2's own file, or FileNotFoundError
