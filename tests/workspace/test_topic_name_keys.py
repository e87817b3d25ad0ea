"""The key a topic name is compared by (:func:`scriptorium.workspace.paths.topic_name_key`), the refusal of
invisible characters in a new name, and what the check costs. Refusals over HTTP:
tests/security/test_topic_names.py."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest

from scriptorium.errors import InvalidPath
from scriptorium.workspace import MemoryWorkspace, TopicChange
from scriptorium.workspace import paths as paths_module
from scriptorium.workspace import snapshot as snapshot_module
from scriptorium.workspace import transaction as transaction_module
from scriptorium.workspace.paths import _prototypes, check_new_topic_name, topic_name_key
from scriptorium.workspace.sources import SourceMessage
from tests.helpers.topic_names import CORE, INVISIBLE, LOOK_ALIKES


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_a_look_alike_of_the_core_has_the_cores_key(name: str) -> None:
    assert topic_name_key(LOOK_ALIKES[name]) == topic_name_key(CORE)


@pytest.mark.parametrize("name", sorted(INVISIBLE))
def test_an_invisible_character_is_refused_in_a_new_name_and_ignored_in_the_key(name: str) -> None:
    path = f"topics/co{INVISIBLE[name]}re.md"
    assert topic_name_key(path) == topic_name_key(CORE)
    with pytest.raises(InvalidPath) as refused:
        check_new_topic_name(path)
    assert f"U+{ord(INVISIBLE[name]):04X}" in refused.value.message and refused.value.guidance


def test_names_that_look_different_keep_different_keys() -> None:
    names = [
        *(CORE, "topics/score.md", "topics/cores.md", "topics/co-re.md", "topics/café.md", "topics/cafe.md"),
        *("topics/core/notes.md", "topics/заметки.md", "topics/笔记.md", "topics/notes-2026.md", "topics/notes.md"),
        *("topics/conversations/2026-11-20-plan-1.md", "topics/conversations/2026-11-20-plan-l.md"),
    ]
    assert len({topic_name_key(n) for n in names}) == len(names)
    # Composed and decomposed accents are one name; a script l and a Cyrillic a are l and a.
    assert topic_name_key("topics/caf\u00e9.md") == topic_name_key("topics/cafe\u0301.md")
    assert topic_name_key("topics/\u2113og.md") == topic_name_key("topics/log.md")
    assert topic_name_key("topics/d\u0430ta.md") == topic_name_key("topics/data.md")


def test_an_ascii_name_is_its_own_key_once_case_folded() -> None:
    """ASCII look-alikes (``l`` and ``1``, ``0`` and ``O``) are told apart: a conversation's topic is named by
    an ASCII slug of its title, and two titles differing so must not stop a write. Only what is not ASCII
    is mapped, each to the ASCII letter (else digit) of its class when it has one."""
    for char in string.printable.strip():
        assert topic_name_key(f"topics/{char}.md") == f"topics/{char.casefold()}.md", char
    prototypes = _prototypes()
    assert not any(char.isascii() for char in prototypes)
    assert {prototypes[c] for c in "\u0435\u0430\u043e\u0441\u0440\u0445\u0443"} == set("eaocpxy")


def _workspace(root: Path, topics: int) -> MemoryWorkspace:
    ws = MemoryWorkspace.init(root)
    with ws.lock():
        paths = ws.archive_sources([SourceMessage("test", "t1", "m1", "user", "2026-11-01T00:00:00Z", "tea")])
        ws.transact(lambda stage: None, message="archive", appended_sources=paths)
    changes = [
        TopicChange(f"topics/t{n:04d}.md", "create", f"# T{n}\n\n2026-11-01: Tea {n} [tea](test/t1/m1).\n")
        for n in range(topics)
    ]
    ws.apply_changes(changes, message="seed")
    return ws


def test_the_check_costs_the_new_topics_not_the_workspace(tmp_path: Path, monkeypatch: Any) -> None:
    """Keys are computed once per topic and kept in the snapshot: a later new topic costs a few keys,
    however many topics there are."""
    _workspace(tmp_path / "memory", 300).close()
    ws = MemoryWorkspace(tmp_path / "memory")  # a fresh process's: its snapshot is read, not derived
    calls: list[str] = []
    original = paths_module.topic_name_key

    def counted(path: str) -> str:
        calls.append(path)
        return original(path)

    for module in (paths_module, snapshot_module, transaction_module):
        monkeypatch.setattr(module, "topic_name_key", counted)
    content = "2026-11-02: Coffee [tea](test/t1/m1).\n"
    ws.apply_changes([TopicChange("topics/first.md", "create", content)], message="one")
    assert len(calls) >= 300  # the first new name builds the index, once
    calls.clear()
    ws.apply_changes([TopicChange("topics/second.md", "create", content)], message="two")
    assert len(calls) <= 4, calls
    calls.clear()
    with pytest.raises(InvalidPath):  # the index knows the topics installed since
        ws.apply_changes([TopicChange("topics/SECOND.md", "create", content)], message="three")
    assert len(calls) <= 4, calls
    ws.apply_changes([TopicChange("topics/second.md", "delete")], message="four")
    ws.apply_changes([TopicChange("topics/Second.md", "create", content)], message="five")  # free again
    ws.close()
