"""Conversation files: every archived message of one conversation in one file (the archive's layout 3).

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
  (:func:`~scriptorium.workspace.paths.source_path`);
  :func:`~scriptorium.workspace.paths.conversation_file` is where that key's bytes are, and a citation links
  ``<conversation file>#source-<message>``.

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
    is_conversation_file,
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
    conversation = source_identity_from_path(f"{path[:-3]}/x.md")
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
        if conversation_file(key) != path:
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


class ConversationArchive(SourceArchive):
    """The ``sources/`` folder in layout 3: one file a conversation (see the module). It reads, tests and
    archives sources by key as :class:`~scriptorium.workspace.sources.SourceArchive` does in layout 2, with
    the same guarantees: archiving the same batch twice is byte-identical, a message archived once is never
    given other bytes, and :meth:`prepare` writes and fsyncs outside the workspace lock what :meth:`commit`
    puts in place under it."""

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
        return found

    def take_back(self, keys: Sequence[str]) -> None:
        by_file: dict[str, set[str]] = {}
        for key in keys:
            by_file.setdefault(conversation_file(key), set()).add(key)
        for conversation, gone in by_file.items():
            target = os.path.join(self.root, conversation)
            held = self._split(conversation, self._held_bytes(conversation))
            kept = [data for key, data in held.items() if key not in gone]
            if not kept:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target)
                continue
            folder, _, name = target.rpartition("/")
            tmp = f"{folder}/.{name}.{uuid.uuid4().hex[:12]}.tmp"
            self._write(tmp, join(kept))
            os.replace(tmp, target)
        self.prune({(self.root / conversation).parent for conversation in by_file})

    def entries_of(self, conversation: str) -> list[str]:
        return list(self.entries(conversation)) if is_conversation_file(conversation) else []

    def entry(self, key: str) -> bytes | None:
        """The archive bytes of the source ``key``, None when it is not archived."""
        return self.entries(conversation_file(key)).get(key) if key.startswith(f"{SOURCES}/") else None

    def stored_path(self, key: str) -> str:
        return conversation_file(key)

    def committed(self, git: GitStore, tree: str, key: str) -> bytes | None:
        if not key.startswith(f"{SOURCES}/"):
            return None
        conversation = conversation_file(key)
        found = git.lookup(tree, conversation)
        return None if found is None else self._committed_entries(git, conversation, found[1]).get(key)

    def _committed_entries(self, git: GitStore, conversation: str, sha: str) -> dict[str, bytes]:
        cached = self._blobs.get(sha)
        if cached is None:
            data = git.read_blob(sha)
            cached = self._split(conversation, data)
            self._blobs.put(sha, cached, len(data))
        return cached

    def keys(self, git: GitStore, tree: str) -> list[str]:
        return [
            key
            for conversation, sha in git.list_files(tree, SOURCES).items()
            for key in self._committed_entries(git, conversation, sha)
        ]

    def fold(self, files: dict[str, bytes | None], archived: set[str]) -> dict[str, bytes]:
        """Each source of a plan (key → archive bytes: appended, a tombstone, a redaction, a promotion) into its
        conversation file as the work tree holds it (every message archived there, this pass's and any another
        pass archived meanwhile): the file takes the plan's bytes for those entries; one whose bytes the work
        tree holds already is marked ``archived`` (on disk, not installed again)."""
        by_file: dict[str, dict[str, bytes]] = {}
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
            by_file.setdefault(conversation_file(key), {})[key] = data
        rewritten: dict[str, bytes] = {}
        for conversation, entries in by_file.items():
            held = self._held_bytes(conversation)
            data = edit(conversation, held, entries, self._split(conversation, held))
            files[conversation] = data
            if data == held:
                archived.add(conversation)
            else:  # a tombstone, a redaction, a promotion: installed over what the work tree holds
                archived.discard(conversation)
                rewritten[conversation] = held
        return rewritten

    def exists(self, path: str) -> bool:
        return self.entry(path) is not None

    def read(self, path: str) -> SourceMessage:
        data = self.entry(path)
        if data is None:
            raise not_archived(path)
        return parse_source(path, data)

    def prepare(self, messages: Iterable[SourceMessage]) -> PreparedSources:
        """Each conversation file the batch appends to, written whole with its new entries to a temporary file
        beside it and fsynced; nothing is in place until :meth:`commit`."""
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
            for conversation, new in batch.items():
                held = self._parse(conversation, self._held_bytes(conversation))
                if all(key in held.entries for key in new):
                    continue  # archived before: commit checks the bytes are the same
                if prepared.register is None:
                    self._register(prepared, token, list(batch), suffix)
                grown = held.appended({key: entry for key, entry in new.items() if key not in held.entries})
                self._remember(conversation, grown)
                data = grown.data
                tmp = self._write_beside(conversation, data, suffix)
                prepared.conversations.append((conversation, held.data, data, tmp))
        except BaseException:
            prepared.discard()
            raise
        return prepared

    def commit(self, prepared: PreparedSources) -> list[str]:
        """Put the prepared conversation files in place (under the workspace lock); return the batch's keys, in
        order. A file another pass appended to meanwhile is written again with both passes' entries; a message
        archived before with other bytes refuses the whole batch before any file moves."""
        moves: list[tuple[str, str]] = []
        try:
            new_by_file: dict[str, dict[str, bytes]] = {}
            for key, data, _tmp in prepared.entries:
                new_by_file.setdefault(conversation_file(key), {})[key] = data
            staged = {conversation: (held, data, tmp) for conversation, held, data, tmp in prepared.conversations}
            for conversation, new in new_by_file.items():
                held = self._held_bytes(conversation)
                entries = self._split(conversation, held)
                for key, data in new.items():
                    if key in entries and entries[key] != data:
                        identity = "/".join(source_identity_from_path(key) or (key,))
                        raise ValidationRejected(
                            f"source {identity} is already archived with different content",
                            reason=ReasonCode.INVALID_SOURCE,
                            guidance="Cite only sources that exist in the archive, as provider/thread/message.",
                            path=key,
                        )
                if all(key in entries for key in new):
                    continue
                if conversation not in staged:  # held every message when prepared: only tampering takes one out
                    raise ValidationRejected(
                        f"conversation file {conversation} lost entries while the batch was prepared",
                        reason=ReasonCode.INVALID_SOURCE,
                        guidance="Conversation files only grow; restore the file from git.",
                        path=conversation,
                    )
                before, _data, tmp = staged[conversation]
                if before != held:  # appended to since it was prepared: both passes' entries, written here
                    os.unlink(tmp)
                    merged = held + join(entry for key, entry in new.items() if key not in entries)
                    self._write(tmp, merged)
                moves.append((tmp, os.path.join(self.root, conversation)))
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


def stored_file(root: Path, key: str) -> Path:
    """The file under workspace ``root`` holding source ``key``: its conversation's (layout 3) when there is
    one, else its own (layout 2). For readers that do not open the workspace (the recall index, a hook)."""
    conversation = root / conversation_file(key)
    return conversation if conversation.exists() else root / key


def read_entry(root: Path, key: str) -> bytes:
    """The archive bytes of source ``key`` under workspace ``root``, in either layout; FileNotFoundError when it
    is not archived, ValidationRejected(INVALID_SOURCE) when its conversation file is damaged. Conversation
    files read are kept split (by their stat signature) for the next source of the same conversation."""
    if not (root / conversation_file(key)).exists():
        return (root / key).read_bytes()
    with _READERS_LOCK:
        reader = _READERS.get(str(root))
        if reader is None:
            reader = _READERS[str(root)] = ConversationArchive(root)
            while len(_READERS) > 8:
                _READERS.popitem(last=False)
    data = reader.entry(key)
    if data is None:
        raise FileNotFoundError(f"no archived source {key}")
    return data
