"""Where things live inside a memory workspace, and which paths callers may name."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from urllib.parse import quote, unquote

from scriptorium.errors import InvalidPath

TOPICS = "topics"
SOURCES = "sources"
TIMELINE = "timeline"
CORE_SOURCE = "topics/core.md"
CORE_VIEW = "core.md"
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


def source_path(provider: str, thread: str, message: str) -> str:
    """The archive file of one source: ``sources/<provider>/<thread>/<message>.md``."""
    return posixpath.join(SOURCES, _encode(provider), _encode(thread), _encode(message) + ".md")


def source_identity_from_path(path: str) -> tuple[str, str, str] | None:
    """Recover ``(provider, thread, message)`` from an archive path, or None."""
    parts = path.split("/")
    if len(parts) != 4 or parts[0] != SOURCES or not parts[3].endswith(".md"):
        return None
    provider, thread, message = parts[1], parts[2], parts[3][:-3]
    if "%" in path:
        provider, thread, message = unquote(provider), unquote(thread), unquote(message)
    if not provider or not thread or not message:
        return None
    return provider, thread, message


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
