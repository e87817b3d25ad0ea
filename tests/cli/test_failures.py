"""Failures that say what to do (issue 59): a reason code and the next step on one line or a few, never a
traceback unless ``--debug`` asks for it, and never a silent success on nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli import REPO, run


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("failures") / "state"
    assert run("ingest", "examples/transcript.jsonl", "--state", str(state)).returncode == 0
    return state


def test_ingest_of_a_file_it_does_not_recognize_fails_naming_it(tmp_path: Path) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"hello": "world"}\n')
    out = run("ingest", str(junk), "--state", str(tmp_path / "state"))
    assert out.returncode == 3, out
    assert "error INVALID_ARGUMENT" in out.stderr and str(junk) in out.stderr
    assert "how to fix:" in out.stderr and "Traceback" not in out.stderr


def test_ingest_of_a_folder_with_nothing_it_recognizes_fails_naming_the_files(tmp_path: Path) -> None:
    folder = tmp_path / "wrong"
    folder.mkdir()
    (folder / "notes.jsonl").write_text('{"not": "a transcript"}\n')
    out = run("ingest", str(folder), "--state", str(tmp_path / "state"), "--json")
    assert out.returncode == 3, out
    error = json.loads(out.stderr)
    assert error["reason"] == "INVALID_ARGUMENT" and str(folder / "notes.jsonl") in error["message"]


def test_ingest_of_a_recognized_file_beside_junk_names_the_junk(tmp_path: Path) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n")
    out = run("ingest", "examples/transcript.jsonl", str(junk), "--state", str(tmp_path / "state"))
    assert out.returncode == 0, out
    assert f"not a transcript: {junk}" in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SCRIPTORIUM_IDLE_MINUTES", "abc"), ("scriptorium_redact_patterns", "not-json")],
    ids=["not-a-number", "a-list-that-is-not-json"],
)
def test_a_bad_setting_is_one_line_with_its_reason(tmp_path: Path, variable: str, value: str) -> None:
    out = run("memory", "status", "--state", str(tmp_path / "state"), env={variable: value})
    assert out.returncode == 3, out
    assert "Traceback" not in out.stderr and "pydantic" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error INVALID_ARGUMENT:") and variable.upper() in line and value in line


def test_memory_not_initialized_names_all_four_runtimes(tmp_path: Path) -> None:
    out = run("memory", "status", "--state", str(tmp_path / "none"))
    assert out.returncode == 3 and "WORKSPACE_NOT_INITIALIZED" in out.stderr
    for runtime in ("claude-code", "codex", "pi", "openclaw"):
        assert runtime in out.stderr


def test_an_unexpected_error_is_one_line_and_its_traceback_only_with_debug(tmp_path: Path, ingested: Path) -> None:
    missing = str(tmp_path / "no-such.json")
    out = run("memory", "archive", missing, "--state", str(ingested))
    assert out.returncode != 0 and "Traceback" not in out.stderr, out
    assert missing in out.stderr and "--debug" in out.stderr
    debug = run("memory", "archive", missing, "--state", str(ingested), "--debug")
    assert debug.returncode == out.returncode and "Traceback" in debug.stderr


def test_output_into_a_closed_pipe_ends_quietly(ingested: Path) -> None:
    """``scriptorium memory search … | head -1``: the reader gone, the command stops without a
    BrokenPipeError traceback and exits 141 (128 + SIGPIPE), as a command killed by the signal would."""
    read, write = os.pipe()
    os.close(read)  # the reader has gone, as head has after its line
    try:
        done = subprocess.run(
            [sys.executable, "-m", "scriptorium", "memory", "search", "hello", "--state", str(ingested)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode == 141, done.stderr


def test_a_failure_no_command_caught_is_one_line_and_its_traceback_only_with_debug(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Past the command's own handling (the settings, the logging, the state folder's mode, the MCP front)."""
    import scriptorium.cli.entry

    def broken(argv: object = None) -> int:
        raise RuntimeError("the disk caught fire")

    monkeypatch.setattr(scriptorium.cli.entry, "_cli_main", broken)
    out = run("memory", "status", "--state", str(tmp_path / "state"))
    assert out.returncode == 1 and "Traceback" not in out.stderr, out
    assert "error UNCLASSIFIED_ERROR: RuntimeError: the disk caught fire" in out.stderr and "--debug" in out.stderr
    debug = run("memory", "status", "--state", str(tmp_path / "state"), "--debug")
    assert "Traceback" in debug.stderr and "the disk caught fire" in debug.stderr
