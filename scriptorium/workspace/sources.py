"""The append-only source archive: conversation text that records cite.

One file per source, at a path derived from its identity
(``sources/<provider>/<shard>/<thread>/<message>.md``, the shard two hex digits of a hash
of the thread: :func:`~scriptorium.workspace.paths.source_path`). A file's bytes are a pure
function of the message, so archiving the same batch twice is byte-identical;
an existing file is never overwritten with different bytes. Files are made
read-only (0444) once written.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from scriptorium.errors import ReasonCode, ValidationRejected
from scriptorium.fsutil import fsync_dir, owner_alive
from scriptorium.titles import title_words
from scriptorium.workspace.paths import ARCHIVING, RUNTIME_DIR, SOURCES, source_identity_from_path, source_path

if TYPE_CHECKING:
    from scriptorium.workspace.gitstore import GitStore
    from scriptorium.workspace.results import TextRedactor

Trust = Literal["trusted", "pending"]
TRUST_STATES: tuple[Trust, ...] = ("trusted", "pending")
_HEADER_KEYS = ("source", "role", "time", "trust")
_ORIGINS = ("continued_from", "spawned_by")
_OPTIONAL_KEYS = ("origin", "audience", "forgotten")
"""Front-matter lines written only when set, after the four fixed ones, in this order."""
AUDIENCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
"""A requester's name (as ``scriptorium token create --requester`` takes it)."""
SOURCE_FILE_MODE = 0o400


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One archived conversation message."""

    provider: str
    thread: str
    message: str
    role: str
    time: str
    text: str
    trust: Trust = "trusted"
    origin: tuple[str, str] | None = None
    """Where the message's session came from: (``continued_from`` | ``spawned_by``, parent session);
    written as a front-matter line only when set, so every other source keeps its bytes."""
    audience: str | None = None
    """The requester whose session the message came from; None: shared (every requester may see it).
    Written as a front-matter line only when set."""
    forgotten: dict[str, str] | None = None
    """The tombstone of a forgotten source (``at``, ``by``, ``why``): its file keeps its identity and loses
    its text (the one change besides promotion a source file may see). Never quotes the text."""

    @property
    def identity(self) -> str:
        return f"{self.provider}/{self.thread}/{self.message}"

    @property
    def path(self) -> str:
        return source_path(self.provider, self.thread, self.message)


@dataclass(slots=True)
class PreparedSources:
    """Messages rendered and written, fsynced, to temporary files beside their targets; not yet archived."""

    entries: list[tuple[str, bytes, str | None]] = field(default_factory=list)
    """(archive path, bytes, temporary file or None when the path was already archived), in message order."""
    register: str | None = None
    """The register naming the temporary files, removed once they are gone (:func:`remove_abandoned`)."""
    token: str = ""
    """The batch's: its temporary files' names end with ``.<token>.tmp``."""
    conversations: list[tuple[str, bytes, bytes, str]] = field(default_factory=list)
    """Layout 3 (:class:`~scriptorium.workspace.threads.ConversationArchive`): each conversation file the batch
    appends to, as (file, the bytes it held when prepared, its bytes with the batch, the temporary file holding
    those)."""

    def discard(self) -> None:
        """Remove the temporary files still lying beside their targets, then their register."""
        temporary = [tmp for _rel, _data, tmp in self.entries] + [tmp for *_held, tmp in self.conversations]
        for tmp in temporary:
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        if self.register is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.register)
            self.register = None


def remove_abandoned(root: Path) -> int:
    """Remove the temporary source files of archive preparations whose process is gone (killed between
    preparing and installing), and their registers; the files of a live preparation stay. Returns how many
    files went. Called by recovery, under the workspace lock."""
    folder = root / RUNTIME_DIR / ARCHIVING
    try:
        registers = list(folder.iterdir())
    except OSError:
        return 0
    removed = 0
    for register in registers:
        if owner_alive(register.name):
            continue  # a preparation in flight (this process's own included): its pass removes them
        try:
            names = json.loads(register.read_text())
        except (OSError, ValueError):
            names = []
        for name in names if isinstance(names, list) else []:
            is_ours = isinstance(name, str) and name.startswith(f"{SOURCES}/") and name.endswith(".tmp")
            if is_ours and os.path.basename(name).startswith(".") and ".." not in name.split("/"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(root / name)
                    removed += 1
        with contextlib.suppress(FileNotFoundError):
            os.unlink(register)
    return removed


def _invalid(message: str, path: str = "") -> ValidationRejected:
    return ValidationRejected(
        message,
        reason=ReasonCode.INVALID_SOURCE,
        guidance="Cite only sources that exist in the archive, as provider/thread/message.",
        path=path,
    )


def render_source(msg: SourceMessage) -> bytes:
    """The archive bytes of a message: JSON-valued front matter, an anchor, the text."""
    for name in ("provider", "thread", "message"):
        if not getattr(msg, name):
            raise _invalid(f"source {name} must be non-empty")
    if msg.trust not in TRUST_STATES:
        raise _invalid(f"unknown trust state {msg.trust!r}")
    header: dict[str, object] = {"source": msg.identity, "role": msg.role, "time": msg.time, "trust": msg.trust}
    if msg.origin is not None:
        if msg.origin[0] not in _ORIGINS or not msg.origin[1]:
            raise _invalid(f"unknown source origin {msg.origin!r}")
        header["origin"] = {msg.origin[0]: msg.origin[1]}
    if msg.audience is not None:
        if not AUDIENCE_NAME.match(msg.audience):
            raise _invalid(f"bad source audience {msg.audience!r}")
        header["audience"] = msg.audience
    if msg.forgotten is not None:
        if msg.text or not _is_tombstone(msg.forgotten):
            raise _invalid("a forgotten source has no text and a tombstone of at, by and why")
        header["forgotten"] = {key: msg.forgotten[key] for key in TOMBSTONE_KEYS}
    lines = ["---", *(f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in header.items())]
    lines += ["---", "", f'<a id="source-{msg.message}"></a>', "", msg.text.rstrip("\n"), ""]
    return "\n".join(lines).encode("utf-8")


def parse_source(path: str, data: bytes) -> SourceMessage:
    """Read an archive file back; raises ValidationRejected(INVALID_SOURCE) if malformed."""
    identity = source_identity_from_path(path)
    if identity is None:
        raise _invalid("not an archive path", path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid("source file is not UTF-8", path) from exc
    lines = text.split("\n")
    end = 5
    for key in _OPTIONAL_KEYS:  # the optional lines, each at most once, in order
        if len(lines) > end and lines[end].startswith(f"{key}: "):
            end += 1
    if len(lines) < end + 5 or lines[0] != "---" or lines[end] != "---":
        raise _invalid("source file has no front matter", path)
    header: dict[str, object] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(": ")
        try:
            header[key] = json.loads(value) if sep else ""
        except json.JSONDecodeError as exc:
            raise _invalid(f"bad front matter line {line!r}", path) from exc
    if header.get("source") != "/".join(identity) or header.get("trust") not in TRUST_STATES:
        raise _invalid("front matter does not match the archive path", path)
    origin = _origin(header["origin"], path) if "origin" in header else None
    audience = header.get("audience")
    if audience is not None and not (isinstance(audience, str) and AUDIENCE_NAME.match(audience)):
        raise _invalid(f"bad source audience {audience!r}", path)
    forgotten = header.get("forgotten")
    if forgotten is not None and not _is_tombstone(forgotten):
        raise _invalid(f"bad tombstone {forgotten!r}", path)
    body = "\n".join(lines[end + 4 :]).rstrip("\n")
    trust: Trust = "trusted" if header["trust"] == "trusted" else "pending"
    role, time = str(header.get("role", "")), str(header.get("time", ""))
    return SourceMessage(
        *identity,
        role=role,
        time=time,
        text=body,
        trust=trust,
        origin=origin,
        audience=audience,
        forgotten=forgotten,  # type: ignore[arg-type]  # checked by _is_tombstone
    )


TOMBSTONE_KEYS = ("at", "by", "why")
MIN_EXCERPT = 16
"""Lines of a forgotten text at least this long are looked for on their own (a record may quote one line)."""


def forgotten_excerpts(texts: Iterable[str]) -> list[str]:
    """What to look for once texts are forgotten: each whole text, and each of its lines long enough to stand
    alone; longest first, so a replacement never leaves part of a longer match behind."""
    found: set[str] = set()
    for text in texts:
        text = text.strip()
        if text:
            found.add(text)
            found.update(line.strip() for line in text.splitlines() if len(line.strip()) >= MIN_EXCERPT)
    return sorted(found, key=len, reverse=True)


def plain_markdown(text: str) -> str:
    """A statement as a writer puts it into a record: whitespace folded into one paragraph, backslashes and
    brackets escaped (no link, footnote or wikilink can come of the words said)."""
    return " ".join(text.split()).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def forgotten_forms(texts: Iterable[str]) -> list[str]:
    """What to look for: each text, and each of its lines long enough to stand alone, as said and in the
    forms a writer gives it (whitespace folded, then backslashes and brackets escaped), and the words a
    session's title takes of it (:func:`scriptorium.titles.title_words`)."""
    forms: list[str] = []
    for text in texts:
        forms += [text, " ".join(text.split()), plain_markdown(text), title_words(text)]
    return forgotten_excerpts(forms)


def _is_tombstone(value: object) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == set(TOMBSTONE_KEYS)
        and all(isinstance(value[key], str) for key in TOMBSTONE_KEYS)
    )


def tombstone(message: SourceMessage, at: str, by: str, why: str) -> SourceMessage:
    """``message`` forgotten: same identity, role, time, trust, origin and audience; no text."""
    return replace(message, text="", forgotten={"at": at, "by": by, "why": why})


def _origin(value: object, path: str) -> tuple[str, str]:
    if isinstance(value, dict) and len(value) == 1:
        ((relation, parent),) = value.items()
        if relation in _ORIGINS and isinstance(parent, str) and parent:
            return relation, parent
    raise _invalid(f"bad source origin {value!r}", path)


class SourceArchive:
    """The ``sources/`` folder of one workspace; with ``redactor``, every message archived loses its secrets
    first (its text, and as names its provider, thread and message IDs)."""

    def __init__(self, root: Path, redactor: TextRedactor | None = None) -> None:
        self.root = root
        self.redactor = redactor

    def _clean(self, msg: SourceMessage) -> SourceMessage:
        redactor = self.redactor
        if redactor is None or msg.forgotten is not None:
            return msg
        name = redactor.name
        return replace(
            msg,
            provider=name(msg.provider),
            thread=name(msg.thread),
            message=name(msg.message),
            text=redactor.text(msg.text),
        )

    def stored_path(self, key: str) -> str:
        """The file of the workspace (and of its tree) holding source ``key``: in layout 2, its own."""
        return key

    def entry(self, key: str) -> bytes | None:
        """The archive bytes of source ``key`` as the work tree holds them, None when it is not archived."""
        try:
            with open(os.path.join(self.root, key), "rb") as handle:
                return handle.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def take_back(self, keys: Sequence[str]) -> None:
        """Remove sources archived and never committed (a request's fresh ones, whose change was refused), and
        the folders that leaves empty up to ``sources/``. Under the workspace lock."""
        for key in keys:
            (self.root / key).unlink(missing_ok=True)
        self.prune({(self.root / key).parent for key in keys})

    def prune(self, folders: Iterable[Path]) -> None:
        """Remove each of ``folders`` under ``sources/`` that is empty, and its parents that are left empty."""
        top = self.root / SOURCES
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            while folder != top and top in folder.parents:
                try:
                    folder.rmdir()  # only an empty one
                except OSError:
                    break
                folder = folder.parent

    def entries_of(self, conversation: str) -> list[str]:
        """The keys of the sources conversation file ``conversation`` holds (layout 3; none in layout 2)."""
        return []

    def committed(self, git: GitStore, tree: str, key: str) -> bytes | None:
        """The archive bytes of source ``key`` in ``tree``, None when the tree holds none."""
        found = git.lookup(tree, key) if key.startswith(f"{SOURCES}/") else None
        return git.read_blob(found[1]) if found is not None else None

    def keys(self, git: GitStore, tree: str) -> list[str]:
        """Every source ``tree`` holds, by key."""
        return list(git.list_files(tree, SOURCES))

    def fold(self, files: dict[str, bytes | None], archived: set[str]) -> dict[str, bytes]:
        """Turn a plan's sources (key → archive bytes) into the files that hold them: in layout 2, themselves.
        Returns the files the install rewrites whose work-tree bytes must not have moved meanwhile (none here:
        a message's file is its own)."""
        return {}

    def unchanged(self, rewritten: Mapping[str, bytes]) -> bool:
        """Whether each file :meth:`fold` named still holds the bytes it was folded from (under the lock)."""
        return all(self._held_bytes(path) == held for path, held in rewritten.items())

    def _held_bytes(self, path: str) -> bytes:
        try:
            with open(os.path.join(self.root, path), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return b""

    def exists(self, path: str) -> bool:
        return os.path.isfile(os.path.join(self.root, path))  # no Path objects: a pass asks once per citation

    def read(self, path: str) -> SourceMessage:
        try:
            data = (self.root / path).read_bytes()
        except FileNotFoundError as exc:
            raise not_archived(path) from exc
        return parse_source(path, data)

    def archive(self, messages: Iterable[SourceMessage]) -> list[str]:
        """Write each message's file unless identical bytes are there; return their paths.

        Raises ValidationRejected(INVALID_SOURCE) if a path already holds
        different bytes: the archive is append-only.
        """
        return self.commit(self.prepare(messages))

    def prepare(self, messages: Iterable[SourceMessage]) -> PreparedSources:
        """The slow half of :meth:`archive`, safe without the workspace lock: each message not yet archived
        is written to a temporary file of its own beside its target and fsynced (one barrier wait per file
        is what archiving costs). Nothing is in place until :meth:`commit`; :meth:`PreparedSources.discard`
        removes what a pass that never ran left. Paths are plain strings: this runs once per message."""
        prepared = PreparedSources()
        token = uuid.uuid4().hex[:12]
        suffix = f".{token}.tmp"
        root = str(self.root)
        folders: set[str] = set()
        seen: dict[str, bytes] = {}
        opened: list[int] = []
        messages = [self._clean(msg) for msg in messages]
        try:
            for msg in messages:
                data = render_source(msg)
                rel = msg.path
                target = f"{root}/{rel}"
                if rel in seen:  # the same message twice in one batch: one file, and the same bytes
                    if seen[rel] != data:
                        raise _invalid(f"source {msg.identity} is given twice with different content", rel)
                    prepared.entries.append((rel, data, None))
                    continue
                seen[rel] = data
                if os.path.exists(target):
                    prepared.entries.append((rel, data, None))
                    continue
                folder, _, name = target.rpartition("/")
                if folder not in folders:
                    os.makedirs(folder, exist_ok=True)
                    folders.add(folder)
                tmp = f"{folder}/.{name}{suffix}"
                if (
                    prepared.register is None
                ):  # before the first temporary file: a pass archiving nothing new writes none
                    self._register(prepared, token, [m.path for m in messages], suffix)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SOURCE_FILE_MODE)
                opened.append(fd)
                prepared.entries.append((rel, data, tmp))
                view = memoryview(data)
                while view:  # a write may be short: a long message is written whole
                    view = view[os.write(fd, view) :]
            # fsync after all writes: the barrier waits of a batch overlap instead of queueing.
            for fd in opened:
                os.fsync(fd)
        except BaseException:
            prepared.discard()
            raise
        finally:
            for fd in opened:
                os.close(fd)
        return prepared

    def _register(self, prepared: PreparedSources, token: str, paths: list[str], suffix: str) -> None:
        """Name the temporary files about to be written, before any is, for recovery to find them if this
        process is killed first. Not fsynced: a kill keeps the page cache; only a power loss between here and
        the install could leave one unnamed (the next preparation of the same source ignores it)."""
        folder = self.root / RUNTIME_DIR / ARCHIVING
        folder.mkdir(parents=True, exist_ok=True)
        names = {f"{rel.rpartition('/')[0]}/.{rel.rpartition('/')[2]}{suffix}" for rel in paths}
        register = folder / f"{os.getpid()}-{token}.json"
        if prepared.register == str(register):  # naming more of them (a batch placed again under the lock)
            names |= set(json.loads(register.read_text()))
        register.write_text(json.dumps(sorted(names)))
        prepared.register, prepared.token = str(register), token

    def commit(self, prepared: PreparedSources) -> list[str]:
        """Put prepared files in place (under the workspace lock); return their paths, in order.

        Every path already holding bytes is checked first, so a rejected batch leaves the archive as it was.
        """
        root = str(self.root)
        moves: list[tuple[str, str]] = []
        try:
            for rel, data, tmp in prepared.entries:
                target = f"{root}/{rel}"
                if os.path.exists(target):  # archived before, or meanwhile: it must hold the same bytes
                    with open(target, "rb") as handle:
                        if handle.read() != data:
                            identity = "/".join(source_identity_from_path(rel) or (rel,))
                            raise _invalid(f"source {identity} is already archived with different content", rel)
                elif tmp is not None:
                    moves.append((tmp, target))
        except BaseException:
            prepared.discard()
            raise
        return put_in_place(prepared, moves)


def put_in_place(prepared: PreparedSources, moves: list[tuple[str, str]]) -> list[str]:
    """Rename each prepared temporary file onto its target (the batch's checks passed), let go of what is left,
    make the renames durable; return the batch's paths, in order."""
    try:
        for tmp, target in moves:
            os.replace(tmp, target)
    finally:
        prepared.discard()
    for directory in {target.rpartition("/")[0] for _tmp, target in moves}:
        fsync_dir(Path(directory))
    return [rel for rel, _data, _tmp in prepared.entries]


def not_archived(path: str) -> ValidationRejected:
    """The refusal of a read of a source the archive does not hold."""
    return _invalid(f"no archived source at {path}", path)
