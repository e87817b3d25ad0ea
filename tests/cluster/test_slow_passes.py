"""Slow passes in a long-running cluster: orphaned staging swept while live passes keep theirs, and writes
that find the lock held handed over to the holder instead of retrying until they give up.

A scripted model that sleeps per conversation plays a slow LLM writer; counts go to
``test-artifacts/faults.jsonl`` as the other fault scenarios' do.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from scriptorium.schemas.events import SessionIdle
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.staging import STAGING_PREFIX
from tests.cluster.conftest import Cluster, check_exactly_once, record_counts, wait_for
from tests.fake_openai import FakeOpenAI, source_refs

LLM = {"SCRIPTORIUM_WRITER": "llm", "SCRIPTORIUM_WRITER_MODEL": "scripted"}


def responder(sleep_for: dict[str, float]) -> Any:
    """A model that answers any number of concurrent conversations: it writes one topic per batch (the
    batch's first message names it), slowly for the sessions in ``sleep_for``, then commits."""

    def step(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "tool":
            return {"tool_calls": [("commit_edits", {})]}
        refs = source_refs(body)
        thread = refs[0].split("/")[1]
        name = re.sub(r"[^a-z0-9-]", "-", f"{thread}-{refs[0].split('/')[2]}".lower())
        content = "# Notes\n\n" + "\n\n".join(f"2026-11-01: Turn {r} [turn note]({r})" for r in refs) + "\n"
        edit = {"tool_calls": [("write_topic", {"path": f"topics/{name}.md", "content": content})]}
        seconds = sleep_for.get(thread, 0.0)
        return ("sleep", seconds, lambda _body: edit) if seconds else edit

    return step


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    server.organizer_commits = True
    yield server
    server.close()


def send_idle(cluster: Cluster, session: str, workspace: str = "default") -> None:
    app = Celery("slow-client", broker=cluster.server.url)
    event = SessionIdle(workspace=workspace, session_id=session)
    app.send_task("scriptorium.write", args=[event.model_dump(mode="json")])
    app.close()


def swept(counts: Path) -> int:
    """Folders removed by every sweep of the workers started with tests.cluster.counting_sweeps writing to
    ``counts`` (its SCRIPTORIUM_TEST_SWEEP_COUNTS)."""
    return sum(int(line) for line in counts.read_text().split()) if counts.exists() else 0


def staging_folders(tmp: Path) -> dict[Path, int]:
    """The staging folders under the workers' temp dir, with the pid each name gives."""
    found = {}
    for entry in tmp.glob(f"{STAGING_PREFIX}*"):
        match = re.match(rf"{re.escape(STAGING_PREFIX)}[0-9a-f]{{12}}-(\d+)-", entry.name)
        if match:
            found[entry] = int(match[1])
    return found


def test_a_killed_pool_childs_staging_is_swept_while_a_live_pass_keeps_its_own(
    cluster: Cluster, fake: FakeOpenAI
) -> None:
    tmp = cluster.tmp / "worker-tmp"
    tmp.mkdir()
    MemoryWorkspace.init(cluster.memory("other")).close()
    turns = {"victim": cluster.session("victim", 4), "alive": cluster.session("alive", 4, workspace="other")}
    fake.default = responder({"victim": 4.0, "alive": 7.0})
    sweeps = cluster.tmp / "sweeps"
    env = {
        **LLM,
        "SCRIPTORIUM_WRITER_BASE_URL": fake.base_url,
        "TMPDIR": str(tmp),
        "SCRIPTORIUM_TEST_SWEEP_COUNTS": str(sweeps),
    }
    cluster.start_worker("w1", app="tests.cluster.counting_sweeps", **env)
    cluster.start_worker("w2", concurrency=2, app="tests.cluster.counting_sweeps", **env)
    send_idle(cluster, "alive", "other")
    send_idle(cluster, "victim")
    with MemoryWorkspace(cluster.memory()) as ws, MemoryWorkspace(cluster.memory("other")) as other:
        victim_id, alive_id = ws.id, other.id
    folders = wait_for(lambda: len(staging_folders(tmp)) == 2 and staging_folders(tmp), 30, "both passes staged")
    (victim_dir, victim_pid) = next((p, pid) for p, pid in folders.items() if victim_id in p.name)
    (alive_dir, _alive_pid) = next((p, pid) for p, pid in folders.items() if alive_id in p.name)
    os.kill(victim_pid, signal.SIGKILL)  # mid-call: the pool child never cleans up
    app = Celery("slow-client", broker=cluster.server.url, backend=cluster.server.url)
    app.send_task("scriptorium.sweep").get(timeout=60)
    app.close()
    # Whichever sweep found the dead child's folder first (the task's, or the one a new pool child's workspace
    # open does), it counted it: every sweep of these workers writes its count to the file.
    swept_total = swept(sweeps)
    live_kept = alive_dir.exists()
    assert not victim_dir.exists(), "the dead child's staging is gone within one sweep"
    assert live_kept, "a live pass's staging is never touched"
    assert swept_total >= 1
    written: dict[str | None, Any] = {}
    while not {"victim", "alive"} <= written.keys():  # the killed pass's event comes back, the sweep's too
        for result in cluster.results(1, timeout=90):
            assert result.ok, result
            if result.outcome == "written":
                written[result.session_id] = result
    counts = {
        **check_exactly_once(cluster, {"victim": turns["victim"]}),
        "orphans_swept": swept_total,
        "live_staging_kept": int(live_kept),
    }
    record_counts("orphaned_staging_swept", counts)
    alive = check_exactly_once(cluster, {"alive": turns["alive"]}, workspace="other")
    assert alive == {"turns": 4, "lost": 0, "duplicated": 0, "unmarked": 0, "partial_installs": 0}, alive
    assert counts["lost"] == counts["duplicated"] == counts["partial_installs"] == 0, counts


def test_writes_that_find_the_lock_held_are_handed_to_the_slow_holder(cluster: Cluster, fake: FakeOpenAI) -> None:
    """A forced write holds the lock for five times the waiters' whole retry budget; they neither retry
    to exhaustion nor wait for the sweep: the holder writes them before it lets go."""
    holder = cluster.session("holder", 30)  # five batches of 100 tokens, each with a 3 s model call
    waiters = {f"waiter{n}": cluster.session(f"waiter{n}", 4) for n in range(3)}
    fake.default = responder({"holder": 3.0})
    env = {
        **LLM,
        "SCRIPTORIUM_WRITER_BASE_URL": fake.base_url,
        "SCRIPTORIUM_BATCH_TOKENS": "100",
        "SCRIPTORIUM_MAX_RETRIES": "2",  # retry ceiling: 2 attempts at most 1 s apart, ~2.5 s in all
        "SCRIPTORIUM_TASK_SOFT_TIME_LIMIT_S": "60",
        "SCRIPTORIUM_TASK_HARD_TIME_LIMIT_S": "70",
    }
    cluster.start_worker("holder", **env)
    send_idle(cluster, "holder")
    wait_for(lambda: len(fake.requests) >= 1, 30, "the holder's first model call")
    cluster.start_worker("waiters", **env)
    for sid in waiters:
        send_idle(cluster, sid)
    results = cluster.results(4, timeout=120)
    by_session = {r.session_id: r for r in results}
    assert set(by_session) == {"holder", *waiters} and all(r.ok and r.outcome == "written" for r in results)
    with cluster.workspace() as ws:
        log = ws.git.repo.git.log("--reverse", "--format=%s", "main").splitlines()
    order = [line.rsplit(" ", 1)[-1] for line in log if line.startswith("Write ")]
    last_holder = max(i for i, sid in enumerate(order) if sid == "holder")
    assert all(order.index(sid) > last_holder for sid in waiters), "written right after the holder's own pass"
    assert by_session["holder"].timings_ms["pass_ms"] > 5 * 2500, "the holder held the lock 5x the retry ceiling"
    handed = cluster.log("waiters").count("task.handed_over")
    ran = cluster.log("holder").count("task.handover_ran")
    assert handed == ran == 3, (handed, ran)
    logs = cluster.log("holder") + cluster.log("waiters")
    assert "RetriesExhausted" not in logs and "LOCK_HELD (after" not in logs
    counts = check_exactly_once(cluster, {"holder": holder, **waiters})
    record_counts("lock_held_handed_over", {**counts, "handed_over": handed, "retries_exhausted": 0})
    assert counts["turns"] == 42 and counts["lost"] == counts["duplicated"] == counts["unmarked"] == 0, counts
