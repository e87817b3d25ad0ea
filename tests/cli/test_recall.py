"""``scriptorium memory search | promote | backfill``, run as real processes."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import tree_bytes
from tests.helpers.cli import run


def ok(*args: str) -> dict[str, object]:
    out = run(*args, "--json")
    assert out.returncode == 0, out.stderr
    payload: dict[str, object] = json.loads(out.stdout)
    return payload


def test_backfill_writes_uncited_trusted_sources_once_and_search_finds_them(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    ok("memory", "init", "--state", state)
    pending = [
        {
            "provider": "web",
            "thread": "forum",
            "message": "p1",
            "role": "user",
            "time": "2026-11-30T10:00:00Z",
            "text": "Rumour: the session store moves to CockroachDB.",
            "trust": "pending",
        }
    ]
    (tmp_path / "pending.json").write_text(json.dumps(pending))
    ok("memory", "archive", "examples/conversation.json", "--state", state)
    ok("memory", "archive", str(tmp_path / "pending.json"), "--state", state)
    assert ok("memory", "search", "postgresql session store", "--state", state)["results"] == []

    first = ok("memory", "backfill", "--state", state)
    assert first["outcome"] == "Written" and first["sources"] == 3 and first["records"] == 3
    results = ok("memory", "search", "postgresql session store", "--state", state)["results"]
    assert isinstance(results, list) and "PostgreSQL" in results[0]["snippet"]
    assert results[0]["trust"] == "trusted"
    assert ok("memory", "search", "cockroachdb", "--state", state, "--include-pending")["results"] == []

    memory = Path(state) / "memory"
    before = tree_bytes(memory)
    second = ok("memory", "backfill", "--state", state)
    assert second["outcome"] == "NothingDue" and second["revision"] == first["revision"]
    assert tree_bytes(memory) == before

    promoted = ok("memory", "promote", "web/forum/p1", "--state", state)
    assert promoted["changed_files"] == ["sources/web/73/forum.md"]
    third = ok("memory", "backfill", "--state", state)
    assert third["sources"] == 1
    hits = ok("memory", "search", "cockroachdb", "--state", state)["results"]
    assert isinstance(hits, list) and len(hits) == 1 and hits[0]["trust"] == "trusted"


def test_recall_verbs_refuse_bad_input_with_reason_codes(tmp_path: Path) -> None:
    state = str(tmp_path / "state")
    ok("memory", "init", "--state", state)
    before = tree_bytes(Path(state) / "memory")
    missing = run("memory", "promote", "web/forum/nope", "--state", state)
    assert missing.returncode == 3 and "NOT_FOUND" in missing.stderr
    malformed = run("memory", "promote", "nope", "--state", state)
    assert malformed.returncode == 3 and "INVALID_ARGUMENT" in malformed.stderr
    limit = run("memory", "search", "x", "--limit", "0", "--state", state)
    assert limit.returncode == 3 and "INVALID_ARGUMENT" in limit.stderr
    assert tree_bytes(Path(state) / "memory") == before
    off = run("memory", "search", "x", "--state", state, env={"SCRIPTORIUM_BACKEND": "none"})
    assert off.returncode == 3 and "memory is disabled" in off.stderr
