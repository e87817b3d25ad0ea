"""Where things live inside a memory workspace, and which paths callers may name."""

from __future__ import annotations

import functools
import hashlib
import json
import posixpath
import re
import unicodedata
from pathlib import Path
from urllib.parse import quote, unquote

from scriptorium.errors import InvalidPath

TOPICS = "topics"
SOURCES = "sources"
TIMELINE = "timeline"
CORE_SOURCE = "topics/core.md"
CORE_VIEW = "core.md"
EVERYWHERE_HEADING = "All projects"
"""The heading in ``topics/core.md`` whose records hold in every project's sessions, whatever project the
message they cite was said in (a standing instruction the user said is for all their projects)."""
RECENT_VIEW = "recent.md"
RELATIONS_VIEW = "relations.json"
RUNTIME_DIR = ".scriptorium"
ARCHIVING = "archiving"
"""Under the runtime folder: one register per archive preparation in flight, naming its temporary files
(``<pid>-<token>.json``), so that recovery removes what a killed pass left beside the sources."""
RECOVERY_MARKS = ("journal.json", "purge.json")
"""Runtime files whose presence means an install or a purge was interrupted."""
"""Runtime state: lock, journal, writer history, caches. Never committed, never validated."""
STATE = "state.json"
"""The installed tree and commit, in the runtime folder (rewritten by every install)."""
STATS_FILE = "stats.json"
"""In the runtime folder: the installed tree's topics, records and sources, kept by every install."""


def is_workspace(root: Path) -> bool:
    """Whether ``root`` holds a memory workspace (its git repository and runtime folder)."""
    return (root / ".git").is_dir() and (root / RUNTIME_DIR).is_dir()


_FORBIDDEN_NAMES = {".git", ".gitattributes", ".gitmodules", ".gitignore"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


MAX_NAME_BYTES = 200
"""One name in a topic path: under every file system's 255-byte limit, with room for the temporary names
an install writes beside it."""
MAX_TOPIC_PATH_BYTES = 1000


def check_topic_path(path: object) -> str:
    """Return ``path`` if it names a topic file a caller may edit, else raise InvalidPath.

    A topic path is relative, POSIX, inside ``topics/``, ends in ``.md`` and has
    no empty, ``.``/``..``, hidden or git-reserved component.
    """
    if not isinstance(path, str) or not path:
        raise InvalidPath("a topic path must be a non-empty string", path=str(path))
    if "\x00" in path or _CONTROL.search(path):
        raise InvalidPath("topic path contains NUL or control characters", path=repr(path))
    if path.startswith("/") or "\\" in path or re.match(r"^[A-Za-z]:", path):
        raise InvalidPath("topic paths are relative POSIX paths under topics/", path=path)
    if len(path.encode()) > MAX_TOPIC_PATH_BYTES:
        raise InvalidPath(f"topic path is longer than {MAX_TOPIC_PATH_BYTES} bytes", path=path[:200])
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise InvalidPath("topic path has an empty, '.' or '..' component", path=path)
        if len(part.encode()) > MAX_NAME_BYTES:
            raise InvalidPath(f"a topic path's names are at most {MAX_NAME_BYTES} bytes each", path=path[:200])
        if part.lower() in _FORBIDDEN_NAMES or part.lower().startswith(".git"):
            raise InvalidPath("topic path names a git control file", path=path)
        if part.startswith("."):
            raise InvalidPath("hidden files are not topics", path=path)
    if parts[0] != TOPICS or len(parts) < 2:
        raise InvalidPath("only files under topics/ can be edited", path=path)
    if not path.endswith(".md") or parts[-1] == ".md":
        raise InvalidPath("topic files end in .md", path=path)
    return path


_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
"""Unicode's Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt): characters a page draws as
nothing (zero-width spaces and joiners, soft hyphens, bidi controls, variation selectors, fillers)."""
_UNSEEN_CATEGORIES = {"Cf", "Cs", "Co", "Cn", "Zl", "Zp"}
"""Format, surrogate, private-use and unassigned characters, and line and paragraph separators."""


def unseen(char: str) -> bool:
    """Whether ``char`` shows as nothing, or as nothing a reader can name, where a topic's name is shown."""
    code = ord(char)
    if unicodedata.category(char) in _UNSEEN_CATEGORIES:
        return True
    return any(low <= code <= high for low, high in _IGNORABLE)


@functools.cache
def _prototypes() -> dict[str, str]:
    """Each confusable character that is not ASCII → the character its class of look-alikes is written with.

    The pairs are Unicode's confusables (UTS #39 ``confusables.txt``) as the ``confusable-homoglyphs``
    package ships them, both ways; a pair that maps one character to one character joins two classes. A
    class is written with its ASCII lower-case letter, else its ASCII digit, else its smallest character:
    Cyrillic ``е`` as ``e``, script ``ℓ`` as ``l``. ASCII characters stay themselves: ``l`` and ``1`` are
    told apart (a conversation's topic is named by an ASCII slug of its title, and two titles differing so
    must not stop a write)."""
    from importlib.resources import files

    data = json.loads((files("confusable_homoglyphs") / "confusables.json").read_text(encoding="utf-8"))
    parent: dict[str, str] = {}

    def find(char: str) -> str:
        root = char
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(char, char) != root:  # path compression
            parent[char], char = root, parent[char]
        return root

    for char, glyphs in data.items():
        if len(char) != 1:
            continue
        for glyph in glyphs:
            other = glyph["c"].replace("\u200e", "")  # right-to-left glyphs come wrapped in marks
            if len(other) == 1:
                a, b = find(char), find(other)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    classes: dict[str, list[str]] = {}
    for char in {*parent, *parent.values()}:  # a class's root is no key of parent
        classes.setdefault(find(char), []).append(char)

    def written(members: list[str]) -> str:
        return min(members, key=lambda c: (not ("a" <= c <= "z"), not ("0" <= c <= "9"), not c.isascii(), c))

    return {char: written(members) for members in classes.values() for char in members if not char.isascii()}


def topic_name_key(path: str) -> str:
    """What a topic path looks like, as one string: two paths with the same key pass for each other on a
    page (and, differing only in case, are one file on a case-insensitive file system).

    Unicode NFKC (full-width and compatibility forms), characters that show as nothing removed, case
    folded, then decomposed, every character that is not ASCII written as its class of look-alikes is
    (UTS #39's skeleton, one character at a time): ``topics/Core.md``, ``topics/ＣＯＲＥ.md``,
    ``topics/core\\u200b.md`` and a ``topics/corе.md`` with a Cyrillic ``е`` all have the key of
    ``topics/core.md``."""
    text = unicodedata.normalize("NFKC", path)
    if text.isascii():
        return text.casefold()
    text = "".join(char for char in text if not unseen(char))
    text = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text.casefold()))
    prototypes = _prototypes()
    return unicodedata.normalize("NFD", "".join(prototypes.get(char, char) for char in text))


class LookAlikePath(InvalidPath):
    """A new topic whose name passes for an existing topic's (or the core's): :func:`topic_name_key`."""

    def __init__(self, path: str, existing: str, *, core: bool) -> None:
        guidance = (
            "Add to the existing topic under its exact name, or choose a name that differs from every topic's "
            "by more than case, width, invisible characters or look-alike letters."
        )
        what = f"the core, {CORE_SOURCE}" if core else f"the existing topic {existing}"
        super().__init__(f"topic path {path} looks like {what}", path=path, guidance=guidance)
        self.unnamed = InvalidPath(
            f"topic path {path} looks like {what if core else 'an existing topic'}", path=path, guidance=guidance
        )
        """The same refusal, naming no topic but the core (a requester's: it may not see the other topic)."""


def check_new_topic_name(path: str) -> str:
    """Refuse (INVALID_PATH) a name for a new topic that holds characters that show as nothing; return its
    key (:func:`topic_name_key`)."""
    hidden = [char for char in path if unseen(char)]
    if hidden:
        codes = ", ".join(f"U+{ord(char):04X}" for char in dict.fromkeys(hidden))
        raise InvalidPath(
            f"topic path {path!r} holds characters that show as nothing ({codes})",
            path=repr(path),
            guidance="Name topics with visible characters only (no zero-width, format or bidi characters).",
        )
    return topic_name_key(path)


_UNRESERVED = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9_.~-]*")
"""What ``quote(..., safe="")`` leaves as it is, not starting with a dot: most names, checked in one match."""


def _encode(component: str) -> str:
    if _UNRESERVED.fullmatch(component):
        return component
    encoded = quote(component, safe="")
    # A leading dot would make a hidden file (or '.'/'..'): encode it too.
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    return encoded


LAYOUT = "layout.json"
"""In the runtime folder: the version of the workspace's file layout (:data:`LAYOUT_VERSION`); none is
layout 1, a workspace an earlier release made (:mod:`scriptorium.workspace.layout` migrates it)."""
LAYOUT_VERSION = 4
"""1: ``sources/<provider>/<thread>/<message>.md`` and ``topics/conversations/<date>-<title>.md``, two flat
folders every commit rewrites; 2: sources sharded by a hash of the thread, conversation topics by month; 3: a
conversation's sources in one file, ``sources/<provider>/<shard>/<thread>.md`` (:mod:`~scriptorium.workspace.
threads`), each source still named by its layout-2 path (its key); 4: a long conversation's file in parts,
``<thread>.md``, ``<thread>+2.md``, … (a layout-3 workspace is one of layout 4 whose conversations each fit one
part: nothing moves; the version tells an earlier release, which would read a part as a source of layout 1,
not to open it)."""
SHARD_HEX = 2
"""Hex digits of a source's shard folder: 256 shards under each provider."""
CONVERSATIONS = "topics/conversations"


@functools.lru_cache(maxsize=65536)
def source_shard(encoded_thread: str) -> str:
    """The shard folder of a thread, a pure function of its name as the archive path writes it: the first
    :data:`SHARD_HEX` hex digits of its SHA-1. A commit then rewrites the provider's tree of 256 shards and
    one shard's tree, however many sessions the archive holds."""
    return hashlib.sha1(encoded_thread.encode("utf-8")).hexdigest()[:SHARD_HEX]


def source_path(provider: str, thread: str, message: str) -> str:
    """The archive file of one source: ``sources/<provider>/<shard>/<thread>/<message>.md``
    (:func:`source_shard`)."""
    encoded = _encode(thread)
    return f"{SOURCES}/{_encode(provider)}/{source_shard(encoded)}/{encoded}/{_encode(message)}.md"


def legacy_source_path(provider: str, thread: str, message: str) -> str:
    """Where layout 1 kept the same source: ``sources/<provider>/<thread>/<message>.md`` (old commits, and a
    workspace not migrated yet)."""
    return posixpath.join(SOURCES, _encode(provider), _encode(thread), _encode(message) + ".md")


def source_identity_from_path(path: str) -> tuple[str, str, str] | None:
    """Recover ``(provider, thread, message)`` from an archive path of layout 1 or 2, or None (a sharded path
    whose shard is not its thread's is none, and so is a conversation file of layout 3: :func:`key_of_link`)."""
    parts = path.split("/")
    if parts[0] != SOURCES or not parts[-1].endswith(".md"):
        return None
    if len(parts) == 5:
        # The shard is of the thread as the path writes it (encoded); a resolved link is unquoted already.
        name = parts[3] if _UNRESERVED.fullmatch(parts[3]) else _encode(unquote(parts[3]))
        if parts[2] != source_shard(name):
            return None
        provider, thread, message = parts[1], parts[3], parts[4][:-3]
    elif len(parts) == 4:
        if is_conversation_file(path):
            return None  # a conversation's file (layout 3): its messages are named by key_of_link's fragment
        provider, thread, message = parts[1], parts[2], parts[3][:-3]
    else:
        return None
    if "%" in path:
        provider, thread, message = unquote(provider), unquote(thread), unquote(message)
    if not provider or not thread or not message:
        return None
    return provider, thread, message


def conversation_file(key: str) -> str:
    """The conversation file of the source whose key is ``key`` (``sources/<p>/<shard>/<thread>/<m>.md``
    → ``sources/<p>/<shard>/<thread>.md``): its first part, which names the conversation (layout 4: a long
    conversation's later parts are :func:`conversation_part`)."""
    return key.rpartition("/")[0] + ".md"


PART_MARK = "+"
"""Between a conversation file's name and its part's number: ``<thread>+2.md``. A thread's name as a path
writes it never holds one (:func:`_encode` quotes ``+``), so no thread's file is another's part."""


def conversation_part(conversation: str, number: int) -> str:
    """Part ``number`` (from 1) of conversation file ``conversation`` (its first part)."""
    return conversation if number == 1 else f"{conversation[:-3]}{PART_MARK}{number}.md"


def _part_name(name: str) -> tuple[str, int] | None:
    """``<thread>.md`` → (thread, 1), ``<thread>+<n>.md`` → (thread, n) for n ≥ 2, else None."""
    if not name.endswith(".md") or len(name) <= 3:
        return None
    stem = name[:-3]
    thread, mark, number = stem.rpartition(PART_MARK)
    if not mark:
        return stem, 1
    if not thread or not number.isdigit() or not number.isascii() or number[0] == "0" or int(number) < 2:
        return None
    return thread, int(number)


def part_of(path: str) -> tuple[str, int] | None:
    """(the conversation's first part, the part's number) for a conversation file or part ``path``
    (``sources/<provider>/<shard>/<thread>[+<n>].md``, its shard its thread's), else None."""
    parts = path.split("/")
    if len(parts) != 4 or parts[0] != SOURCES:
        return None
    named = _part_name(parts[3])
    if named is None or parts[2] != source_shard(named[0]):
        return None
    return f"{parts[0]}/{parts[1]}/{parts[2]}/{named[0]}.md", named[1]


def conversation_of(path: str) -> str:
    """The conversation file (its first part) whose part ``path`` is; ``path`` itself when it is no part."""
    part = part_of(path)
    return path if part is None else part[0]


def part_number(conversation: str, name: str) -> int | None:
    """The number of the part of ``conversation`` a file of its folder named ``name`` is, else None."""
    named = _part_name(name)
    return named[1] if named is not None and f"{named[0]}.md" == conversation.rpartition("/")[2] else None


def is_conversation_file(path: str) -> bool:
    """Whether ``path`` names a conversation file or one of its parts: ``sources/<provider>/<shard>/<thread>.md``
    or ``…/<thread>+<n>.md``, its shard its thread's."""
    return part_of(path) is not None


def key_of_link(path: str, fragment: str) -> str | None:
    """The source key a citation names by ``path`` (resolved, relative to the workspace) and ``fragment``:
    ``<conversation file>#source-<message>``, or the per-message path of layouts 1 and 2 (whatever its
    fragment); None when it names no source.

    A conversation file has the shape of a layout-1 source path (``sources/<provider>/<thread>/<message>.md``);
    with a shard that is its name's, it is read as the conversation file (a layout-1 path is that only for a
    thread named by two hex digits, the first two of its message's hash)."""
    part = part_of(path)
    if part is not None:
        message = fragment.removeprefix("source-") if fragment.startswith("source-") else ""
        conversation = source_identity_from_path(f"{part[0][:-3]}/x.md")
        if not message or conversation is None:
            return None  # the whole conversation, not one of its messages
        return source_path(conversation[0], conversation[1], message)
    identity = source_identity_from_path(path)
    return None if identity is None else source_path(*identity)


def is_legacy_source_path(path: str) -> bool:
    """Whether ``path`` is an archive path of layout 1."""
    return path.count("/") == 3 and source_identity_from_path(path) is not None


def conversation_topic_base(day: str, name: str) -> str:
    """A conversation's topic without ``.md``: ``topics/conversations/<yyyy-mm>/<day>-<name>``, one folder a
    month, so a commit rewrites one month's tree, not a tree of every conversation."""
    return f"{CONVERSATIONS}/{day[:7]}/{day}-{name}"


_LEGACY_CONVERSATION = re.compile(r"^topics/conversations/((\d{4}-\d{2})-\d{2}-[^/]+\.md)$")


def conversation_topic_moved(path: str) -> str | None:
    """Where layout 2 keeps a conversation topic layout 1 kept at ``path`` (None: it stays where it is)."""
    match = _LEGACY_CONVERSATION.match(path)
    return f"{CONVERSATIONS}/{match.group(2)}/{match.group(1)}" if match else None


def relative_link(from_file: str, to_file: str) -> str:
    """A relative Markdown link target from one workspace file to another (URL-quoted).

    Both are workspace paths (relative, normalized), so the link is the climb out of
    ``from_file``'s folder past the shared prefix, then down: ``posixpath.relpath``'s answer
    without its two ``abspath`` calls (a write pass links every record it cites).
    """
    here = from_file.split("/")[:-1]
    there = to_file.split("/")
    shared = 0
    for a, b in zip(here, there, strict=False):
        if a != b:
            break
        shared += 1
    return quote("/".join([".."] * (len(here) - shared) + there[shared:]) or ".", safe="/")


def _climb(target: str) -> tuple[int, str] | None:
    """(number of leading "../", the plain rest) when the rest needs no normalizing, else None."""
    ups = 0
    while target.startswith("../", ups * 3):
        ups += 1
    rest = target[ups * 3 :]
    if not rest or rest[0] in "./" or "/." in rest or "//" in rest or rest.endswith("/"):
        return None
    return ups, rest


def resolve_link(from_file: str, target: str) -> str | None:
    """Resolve a relative link target (no fragment) against ``from_file``; None if it escapes.

    ``posixpath.normpath(posixpath.join(dirname(from_file), target))`` for a relative target, written
    out (every citation of every topic goes through here; a property test checks it against normpath).
    """
    if target.startswith("/") or "://" in target:
        return None
    plain = unquote(target) if "%" in target else target
    if plain.startswith("/"):  # "%2F…": an absolute path after all
        joined = posixpath.normpath(plain)
    elif (climb := _climb(plain)) is not None and "/." not in from_file and not from_file.startswith("."):
        # The usual citation: some "../", then a plain path down (no ".", "..", empty or hidden parts).
        ups, rest = climb
        here = from_file.split("/")[:-1]
        if ups > len(here):
            return None
        joined = "/".join([*here[: len(here) - ups], rest])
    else:
        parts: list[str] = []
        for part in [*from_file.split("/")[:-1], *plain.split("/")]:
            if part in ("", "."):
                continue
            if part != ".." or not parts or parts[-1] == "..":
                parts.append(part)
            else:
                parts.pop()
        joined = "/".join(parts) or "."
    if joined.startswith("../") or joined == "..":
        return None
    return joined


def needs_recovery(root: Path) -> bool:
    """Whether an open of ``root`` would find something to finish or remove (an interrupted install or purge,
    the register of an archive preparation whose process is gone): a reader that never opens the workspace
    asks this first."""
    runtime = root / RUNTIME_DIR
    if any((runtime / name).exists() for name in RECOVERY_MARKS):
        return True
    from scriptorium.fsutil import owner_alive

    try:
        return any(not owner_alive(register.name) for register in (runtime / ARCHIVING).iterdir())
    except OSError:
        return False
