"""Reversible edits of a runtime's settings file: the first change keeps the file's bytes (and mode) beside
it with a note of what was written, and of the folders writing it made (``~/.claude`` on a machine Claude
Code has not run on yet); undoing puts the bytes back when the file is still what setup wrote, and otherwise
takes out only our entries, and the folders setup made go once they are empty again (:func:`remove_made`:
never one that was there before, nor one holding anything else)."""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from scriptorium.errors import InvalidArgument
from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write

BACKUP_SUFFIX = ".scriptorium-backup"
NOTE_SUFFIX = ".scriptorium-setup.json"
NOTE_VERSION = 1
"""The note's layout (:mod:`scriptorium.formats`): undoing by a note a newer release wrote is refused."""


@dataclass(frozen=True, slots=True)
class Change:
    """What setup did to one file."""

    path: Path
    action: Literal["created", "updated", "unchanged", "restored", "removed", "cleaned"]
    made: tuple[Path, ...] = ()
    """Undoing: the folders the first change made for the file (outermost first), for :func:`remove_made`
    once every file is undone."""


def missing_folders(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, outermost first: what writing into it makes."""
    missing = []
    folder = folder.absolute()
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


def remove_made(folders: Iterable[Path]) -> list[Change]:
    """Remove the ``folders`` setup made that are empty now, innermost first (a folder that holds anything
    else stays, and so do the folders above it)."""
    removed = []
    for folder in sorted(set(folders), key=lambda f: len(f.parts), reverse=True):
        try:
            folder.rmdir()  # only an empty folder
        except OSError:
            continue
        removed.append(Change(folder, "removed"))
    return removed


def load_json(path: Path, data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"{path} is not valid JSON ({exc}); fix it by hand first") from exc
    if not isinstance(value, dict):
        raise InvalidArgument(f"{path} does not hold a JSON object")
    return value


def dump_json(value: dict[str, Any]) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


# -- one file, with its backup ------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def edit(path: Path, change: Callable[[bytes], bytes], private: bool = False) -> Change:
    """Install: apply ``change`` to the file's bytes, keeping its original bytes beside it the first time.
    ``private``: the result holds a token, so the file loses any group or other access (the only time setup
    changes a file's mode; the backup keeps the original one)."""
    before = path.read_bytes() if path.exists() else None
    after = change(before or b"")
    made = missing_folders(path.parent)
    if before == after and not (private and _mode(path) & 0o077):
        return Change(path, "unchanged")
    original = _mode(path)
    mode = original & (0o700 if private else 0o7777)
    backup, note = path.with_name(path.name + BACKUP_SUFFIX), path.with_name(path.name + NOTE_SUFFIX)
    if not note.exists():  # the first change: keep what the user had, as they had it
        if before is not None:
            atomic_write(backup, before, mode=original)
        first = {"existed": before is not None, "made": [str(folder) for folder in made]}
        atomic_write(note, json.dumps(versioned(first, NOTE_VERSION)).encode())
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, after, mode=mode)
    recorded = read_versioned(json.loads(note.read_text()), NOTE_VERSION, str(note))
    atomic_write(note, json.dumps({**recorded, "written_sha256": _sha(after)}).encode())
    return Change(path, "created" if before is None else "updated")


def _mode(path: Path) -> int:
    """The permission bits to write ``path`` with: its own (setup never widens a runtime's file, and narrows
    one only when it will hold a token), or the user's alone for a file setup creates."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return 0o600


def undo(path: Path, remove: Callable[[bytes], bytes]) -> Change:
    """Uninstall: the original bytes when the file is still what setup wrote, else only our entries removed."""
    backup, note = path.with_name(path.name + BACKUP_SUFFIX), path.with_name(path.name + NOTE_SUFFIX)
    recorded = read_versioned(json.loads(note.read_text()), NOTE_VERSION, str(note)) if note.exists() else None
    current = path.read_bytes() if path.exists() else None
    change: Change
    if recorded is not None and current is not None and _sha(current) == recorded.get("written_sha256"):
        if recorded.get("existed"):
            atomic_write(path, backup.read_bytes(), mode=_mode(backup))
            change = Change(path, "restored")
        else:
            path.unlink()
            change = Change(path, "removed")
    elif current is not None:
        cleaned = remove(current)
        if cleaned != current:
            atomic_write(path, cleaned, mode=_mode(path))
            change = Change(path, "cleaned")
        else:
            change = Change(path, "unchanged")
    else:
        change = Change(path, "unchanged")
    backup.unlink(missing_ok=True)
    note.unlink(missing_ok=True)
    made = recorded.get("made") if recorded is not None else None
    return Change(change.path, change.action, tuple(Path(f) for f in made) if isinstance(made, list) else ())


def json_change(edit: Callable[[dict[str, Any]], dict[str, Any]], path: Path) -> Callable[[bytes], bytes]:
    def change(data: bytes) -> bytes:
        original = load_json(path, data) if data.strip() else {}
        updated = edit(json.loads(json.dumps(original)))
        return data if updated == original and data else dump_json(updated)

    return change
