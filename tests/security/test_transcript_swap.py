"""A transcript swapped between the hook route's check and the import's open reads nothing it should not.

The HTTP hook route checks a transcript's path (under the caller's folders, no symbolic link, a regular
file with one link) and the import opens it afterwards. An attacker who can write in their own folder
swaps the file in that gap — for a symbolic or hard link to a file of another, another file, or a folder
for a link to another folder. Each swap is made at the very moment between the check and the import, and
each is refused (FORBIDDEN) with no node of the other file stored.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from scriptorium.errors import Forbidden
from scriptorium.producers import opening
from scriptorium.runtimes.hooks import command as hooks
from scriptorium.runtimes.hooks.command import Hooks
from scriptorium.sessions import open_store
from scriptorium.settings import Settings
from tests.helpers.transcripts import transcript


def _symlink(secret: Path, planted: Path) -> None:
    planted.unlink()
    planted.symlink_to(secret)


def _hardlink(secret: Path, planted: Path) -> None:
    planted.unlink()
    os.link(secret, planted)


def _other_file(secret: Path, planted: Path) -> None:
    shutil.copyfile(secret, planted.with_suffix(".new"))
    os.replace(planted.with_suffix(".new"), planted)


def _folder_link(secret: Path, planted: Path) -> None:
    folder = planted.parent
    shutil.copyfile(secret, secret.parent / planted.name)
    shutil.rmtree(folder)
    folder.symlink_to(secret.parent, target_is_directory=True)


SWAPS: dict[str, Callable[[Path, Path], None]] = {
    "symbolic link": _symlink,
    "hard link": _hardlink,
    "another file": _other_file,
    "folder link": _folder_link,
}


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(the caller's folder, its honest transcript, another's secret transcript outside it)."""
    mine = tmp_path / "runtimes" / "alice" / "project"
    mine.mkdir(parents=True)
    outside = tmp_path / "private"
    outside.mkdir()
    honest = transcript(mine / "cc-mine.jsonl", "cc-mine", 2)
    secret = transcript(outside / "cc-secret.jsonl", "cc-secret", 2)
    return mine.parent, honest, secret


@pytest.mark.parametrize("swap", list(SWAPS))
def test_a_transcript_swapped_after_the_check_is_refused_by_the_import(
    folders: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: str
) -> None:
    root, honest, secret = folders
    checked = opening.confined

    def check_then_swap(paths: list[Path], roots: list[Path]) -> opening.Pins:
        pins = checked(paths, roots)
        SWAPS[swap](secret, honest)  # the attacker wins the race: the file changes right after its check
        return pins

    monkeypatch.setattr(hooks, "confined", check_then_swap)
    settings = Settings(state=tmp_path / "state")
    runtime_hooks = Hooks(settings, [root], "alice", False, True)
    with pytest.raises(Forbidden, match=r"changed since it was checked|not a regular file with one link"):
        runtime_hooks.import_transcripts({"session_id": "cc-mine", "transcript_path": str(honest)})
    store = open_store(settings.session_store_url)
    try:
        assert store.get_session("cc-secret") is None and store.get_session("cc-mine") is None
    finally:
        store.close()


def test_the_file_checked_opens_and_nothing_else_does(folders: tuple[Path, Path, Path]) -> None:
    root, honest, secret = folders
    with opening.pinned(opening.confined([honest], [root]), [root]):
        with opening.open_transcript(honest) as handle:
            assert b"cc-mine" in handle.read()
        with pytest.raises(Forbidden, match="outside the runtimes' folders"):
            opening.open_transcript(secret)  # a file a transcript names (a pi fork's parent) is checked too
        sibling = transcript(honest.with_name("cc-sibling.jsonl"), "cc-sibling", 2)
        with opening.open_transcript(sibling) as handle:  # checked when opened: under the folder, one link
            assert b"cc-sibling" in handle.read()
    with opening.open_transcript(secret) as handle:  # a local import reads what it is given
        assert b"cc-secret" in handle.read()


def test_a_folder_swapped_while_a_named_file_is_checked_is_refused(
    folders: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file checked when it is opened (a pi fork's parent): its folder becomes a link to another folder
    after the check for links and before the file is looked at, so the file looked at and opened is the
    other's — the path the kernel opened tells it apart."""
    root, honest, secret = folders
    named = transcript(honest.with_name("cc-parent.jsonl"), "cc-decoy", 2)
    real = os.path.realpath

    def resolve_then_swap(path: str | os.PathLike[str]) -> str:
        resolved = real(path)
        if str(path) == str(named):
            _folder_link(secret, named)
        return resolved

    with opening.pinned(opening.confined([honest], [root]), [root]):
        monkeypatch.setattr(opening.os.path, "realpath", resolve_then_swap)
        with pytest.raises(Forbidden, match="changed since it was checked"):
            opening.open_transcript(named)
