"""``scriptorium memory update | get | log | revert | core`` as real processes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.cli import run


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example transcript ingested once per module; each test changes a copy."""
    root = tmp_path_factory.mktemp("cli-changes") / "state"
    assert run("ingest", "examples/transcript.jsonl", "--state", str(root)).returncode == 0
    return root


@pytest.fixture
def state(tmp_path: Path, ingested: Path) -> Path:
    root = tmp_path / "state"
    shutil.copytree(ingested, root, symlinks=True)
    return root


def update(state: Path, body: dict[str, object]) -> dict[str, object]:
    out = run("memory", "update", "-", "--state", str(state), "--json", stdin=json.dumps(body))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_update_takes_each_format_and_get_reads_it_back(state: Path) -> None:
    created = update(
        state,
        {
            "memory_changes": [
                {
                    "op": "create_record",
                    "content": "Dana leads the infrastructure team.",
                    "time": None,
                    "sources": [{"source": "claude-code/demo-session-0001/u-01", "label": "team lead"}],
                    "destination": {"topic_path": "topics/people/dana.md", "headings": ["Dana"]},
                }
            ],
            "message": "Dana",
        },
    )
    (rid,) = created["created_ids"]  # type: ignore[misc]
    record = json.loads(run("memory", "get", rid, "--state", str(state), "--json").stdout)
    assert record["topic_path"] == "topics/people/dana.md" and record["headings"] == ["Dana"]
    assert record["sources"] == [{"source": "claude-code/demo-session-0001/u-01", "label": "team lead"}]
    legacy = update(
        state,
        {
            "memory_changes": [
                {
                    "op": "update_record",
                    "memory_id": rid,
                    "content": "Dana leads infra.",
                    "time": "2026-11",
                    "source_refs": ["claude-code/demo-session-0001/u-01"],
                }
            ]
        },
    )
    assert legacy["changed_files"]
    topic = run("memory", "get", "topics/people/dana.md", "--state", str(state)).stdout
    assert "[claude-code/demo-session-0001/u-01](" in topic, "a legacy source_ref is its own label"
    whole = update(
        state,
        {
            "changes": [
                {"path": "topics/x.md", "action": "create", "content": "X [x](claude-code/demo-session-0001/u-03).\n"}
            ]
        },
    )
    assert "topics/x.md" in whole["changed_files"]  # type: ignore[operator]


@pytest.mark.parametrize(
    "body",
    [
        '{"patch": "x", "changes": []}',
        "{}",
        "not json",
        '{"memory_changes": [{"op": "merge_records"}]}',
        '{"memory_changes": [], "provenance": "forged"}',
    ],
)
def test_bad_update_bodies_exit_3_and_change_nothing(state: Path, body: str) -> None:
    before = json.loads(run("memory", "status", "--state", str(state), "--json").stdout)["revision"]
    out = run("memory", "update", "-", "--state", str(state), "--json", stdin=body)
    assert out.returncode == 3 and json.loads(out.stderr)["reason"] == "INVALID_ARGUMENT"
    assert json.loads(run("memory", "status", "--state", str(state), "--json").stdout)["revision"] == before


def test_log_and_revert_undo_one_write_as_a_new_transaction(state: Path) -> None:
    created = update(
        state,
        {
            "changes": [
                {"path": "topics/y.md", "action": "create", "content": "Y [y](claude-code/demo-session-0001/u-03).\n"}
            ],
            "message": "add y",
        },
    )
    log = json.loads(run("memory", "log", "--state", str(state), "--json").stdout)["commits"]
    assert log[0]["message"] == "add y" and log[0]["commit"] == created["commit"]
    out = run("memory", "revert", str(created["commit"]), "--state", str(state), "--json")
    assert out.returncode == 0, out.stderr
    reverted = json.loads(out.stdout)
    assert "topics/y.md" in reverted["changed_files"] and not (state / "memory/topics/y.md").exists()
    log = json.loads(run("memory", "log", "--state", str(state), "--json").stdout)["commits"]
    assert log[0]["message"].startswith("Revert ") and log[1]["message"] == "add y", "history is kept"
    missing = run("memory", "revert", "0" * 40, "--state", str(state))
    assert missing.returncode == 3 and "NOT_FOUND" in missing.stderr


def test_a_revert_that_no_longer_applies_is_refused(state: Path) -> None:
    first = update(
        state,
        {
            "changes": [
                {
                    "path": "topics/z.md",
                    "action": "create",
                    "content": "Z one [z](claude-code/demo-session-0001/u-03).\n",
                }
            ]
        },
    )
    text = (state / "memory/topics/z.md").read_text()
    update(state, {"changes": [{"path": "topics/z.md", "action": "update", "content": text.replace("one", "two")}]})
    out = run("memory", "revert", str(first["commit"]), "--state", str(state))
    assert out.returncode == 3 and "INVALID_PATCH" in out.stderr


def test_core_shows_the_injected_block_and_budget(state: Path) -> None:
    out = json.loads(run("memory", "core", "--state", str(state), "--json").stdout)
    assert out["budget"] == 2000 and out["tokens"] > 0 and out["omitted_ids"] == []
