"""The forget epoch: a long-running process drops every in-memory copy of the memory's text when a forget
lands in another process, at its next read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scriptorium.recall.index import RecallIndex
from scriptorium.tokencount import count_tokens
from scriptorium.workspace import MemoryWorkspace, topics, views
from scriptorium.workspace.views import entry
from tests.conftest import trusted_and_pending_world


def _held(ws: MemoryWorkspace, index: RecallIndex) -> dict[str, int]:
    return {
        "parsed": len(ws._caches.parsed),
        "memo": len(topics._memo),
        "entries": entry.cache_info().currsize,
        "tokens": count_tokens.cache_info().currsize,
        "index": int(index._state is not None),
    }


def test_a_forget_in_another_process_empties_this_ones_caches_at_its_next_read(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    trusted_and_pending_world(root)
    ws = MemoryWorkspace(root)
    index = RecallIndex.open(root)
    snap = ws.snapshot()
    record = next(r for t in snap.topics.values() for r in t.records)
    views.entry(record)
    count_tokens(record.text)
    assert index.search("releases ship")
    assert all(_held(ws, index).values()), _held(ws, index)
    assert ws.drop_caches_after_forget() is False, "no forget yet: nothing is dropped"

    bump = f"from scriptorium.workspace import epoch; epoch.bump({str(root)!r})"
    subprocess.run([sys.executable, "-c", bump], check=True, timeout=60)
    assert ws.drop_caches_after_forget() is True
    assert not any(_held(ws, index).values()), _held(ws, index)
    assert ws.snapshot().topics.keys() == snap.topics.keys(), "it reads the memory again as it is"
    ws.close()
