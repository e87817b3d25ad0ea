"""``setup codex`` at a terminal asks whether to trust the new hooks now (Codex skips hooks it has not
trusted), so a person is not left with memory that never comes; scripts are never asked."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from scriptorium.cli import runtime as cli_runtime


def _args(**given: object) -> argparse.Namespace:
    return argparse.Namespace(**{"runtime": "codex", "trust_hooks": None, "server": None, "json": False, **given})


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A person at the terminal; what input() is asked is kept, and it answers Enter, y, n, no in turn."""
    asked: list[str] = []
    answers = iter(["", "y", "n", "no"])
    monkeypatch.setattr(cli_runtime, "_at_terminal", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or next(answers))
    return asked


def test_at_a_terminal_codex_setup_asks_and_the_default_is_yes(terminal: list[str]) -> None:
    assert cli_runtime._wants_trust(_args()) is True  # Enter
    assert cli_runtime._wants_trust(_args()) is True  # y
    assert cli_runtime._wants_trust(_args()) is False  # n
    assert cli_runtime._wants_trust(_args()) is False  # no
    assert len(terminal) == 4 and "Trust the new hooks now" in terminal[0]


def test_nothing_is_asked_of_a_script_nor_when_the_answer_is_given(
    terminal: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for given in ({"json": True}, {"server": "http://127.0.0.1:1"}, {"trust_hooks": "codex"}, {"runtime": "pi"}):
        assert cli_runtime._wants_trust(_args(**given)) is False
    monkeypatch.setattr(cli_runtime, "_at_terminal", lambda: False)  # a script
    assert cli_runtime._wants_trust(_args()) is False
    assert terminal == []


def test_the_answer_yes_sets_up_codex_with_its_hooks_trusted(
    terminal: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Yes at the prompt is ``--trust-hooks``: setup installs with the trust step (and no next step to do)."""
    from scriptorium.runtimes.setup import command
    from scriptorium.settings import Settings

    installed: dict[str, object] = {}

    def install(runtime: str, state: Path, scope: str, **options: object) -> list[object]:
        installed.update(options)
        return []

    monkeypatch.setattr(command, "install", install)
    monkeypatch.setattr(cli_runtime, "_follow", lambda *a, **k: None)
    monkeypatch.setattr("scriptorium.locations.record_state", lambda state: None)
    monkeypatch.setattr(cli_runtime, "_wants_writer", lambda args: False)
    args = argparse.Namespace(
        runtime="codex", trust_hooks=None, server=None, json=True, uninstall=False, scope="user", project=None,
        state=tmp_path / "state", skip_runtime_check=True, allow_updates=False, writer=False, token=None,
    )  # fmt: skip
    args.json = False  # the person at the terminal, but the output kept as JSON below for reading
    monkeypatch.setattr(cli_runtime, "emit", lambda a, payload, human: installed.update(payload=payload))
    assert cli_runtime.cmd_setup(args, Settings(state=tmp_path / "state")) == 0
    assert installed["trust_hooks"] == "codex"
    payload = installed["payload"]
    assert isinstance(payload, dict) and "trust the new hooks" not in str(payload["next"])
