"""The worker cluster end to end: real redis-server, real Celery worker processes, no eager mode."""

from __future__ import annotations

import json

import redis
from celery import Celery

from scriptorium.producers.publisher import Publisher
from scriptorium.schemas.events import SessionIdle
from scriptorium.workspace import TopicChange
from tests.checks import records_citing, unmarked
from tests.cluster.conftest import Cluster, check_exactly_once, wait_for


def clean(turns: int) -> dict[str, int]:
    return {"turns": turns, "lost": 0, "duplicated": 0, "unmarked": 0, "partial_installs": 0}


def task_meta(cluster: Cluster, task_id: str) -> dict | None:  # type: ignore[type-arg]
    """The task's final state as a dashboard reads it from the result backend (None until final)."""
    raw = cluster.redis.get(f"celery-task-meta-{task_id}")
    meta = json.loads(raw) if raw else None
    return meta if meta and meta["status"] in ("SUCCESS", "FAILURE", "REJECTED") else None


def client(cluster: Cluster, *accept: str) -> Celery:
    app = Celery("test-client", broker=cluster.server.url)
    app.conf.update(accept_content=["json", *accept], result_accept_content=["json"])
    return app


def test_turn_ended_writes_the_workspace_and_one_result_lands_on_the_stream(cluster: Cluster) -> None:
    turns = cluster.session("s1", 6)
    cluster.start_worker("w1")
    publisher = Publisher(cluster.server.url)
    task_id = publisher.turn_ended("default", "s1")
    publisher.close()
    (result,) = cluster.results(1)
    ws = cluster.workspace()
    assert result.ok and result.outcome == "written" and result.session_id == "s1"
    assert result.revision == ws.revision and result.nodes_written == 6 and result.pending_count == 0
    assert result.attempts == 1 and result.timings_ms["pass_ms"] > 0
    assert any(path.startswith("topics/") for path in result.changed_files)
    ws.close()
    assert check_exactly_once(cluster, {"s1": turns}) == clean(6)
    meta = wait_for(lambda: task_meta(cluster, task_id), 10, "the task result")
    assert meta["status"] == "SUCCESS" and meta["result"]["revision"] == result.revision
    handled = cluster.redis.hget("scriptorium:handled:default", "s1")
    assert handled is not None
    # The checker sees a duplicate record even when it shares its footnote with the original.
    ws = cluster.workspace()
    (path,) = [p for p in ws.snapshot().topics if p.startswith("topics/conversations/")]
    text = (ws.root / path).read_text()
    statement = next(ln for ln in text.splitlines() if "[^" in ln and not ln.startswith("[^")).split(" ^m-")[0]
    ws.apply_changes([TopicChange(path, "update", f"{text}\n{statement}\n")], message="inject a duplicate")
    ws.close()
    assert check_exactly_once(cluster, {"s1": turns}) == {**clean(6), "duplicated": 1}


def test_terminal_and_retryable_outcomes_are_told_apart(cluster: Cluster) -> None:
    from tests.cluster.conftest import free_port
    from tests.fake_openai import FakeOpenAI, tools

    fake = FakeOpenAI()
    bad = tools(("write_topic", {"path": "topics/x.md", "content": "uncited"}))
    fake.script = [bad, tools(("commit_edits", {})), bad, tools(("commit_edits", {}))]
    cluster.session("rejected", 2)
    cluster.session("unreachable", 2)
    llm = {"SCRIPTORIUM_WRITER": "llm", "SCRIPTORIUM_WRITER_MODEL": "m", "SCRIPTORIUM_MAX_RETRIES": "2"}
    cluster.start_worker("good", **llm, SCRIPTORIUM_WRITER_BASE_URL=fake.base_url)
    app = client(cluster)
    terminal = app.send_task(
        "scriptorium.write", args=[SessionIdle(workspace="default", session_id="rejected").model_dump(mode="json")]
    )
    (failed,) = cluster.results(1)
    # What a dashboard reads from the result backend: the state and the exception type.
    term = wait_for(lambda: task_meta(cluster, terminal.id), 20, "the terminal task's result")
    cluster.stop_workers()
    cluster.start_worker("down", **llm, SCRIPTORIUM_WRITER_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    exhausted = app.send_task(
        "scriptorium.write", args=[SessionIdle(workspace="default", session_id="unreachable").model_dump(mode="json")]
    )
    (pending,) = cluster.results(1)
    fake.close()
    assert (failed.ok, failed.reason, failed.retryable) == (False, "COMMIT_REJECTED", False)
    assert (pending.ok, pending.reason, pending.retryable, pending.attempts) == (False, "MODEL_UNREACHABLE", True, 3)
    exh = wait_for(lambda: task_meta(cluster, exhausted.id), 20, "the exhausted task's result")
    assert term["status"] == "FAILURE" and term["result"]["exc_type"] == "TerminalWriteFailure"
    assert "COMMIT_REJECTED" in str(term["result"]["exc_message"])
    assert exh["status"] == "FAILURE" and exh["result"]["exc_type"] == "RetriesExhausted"
    assert "MODEL_UNREACHABLE" in str(exh["result"]["exc_message"])
    handled = cluster.redis.hgetall("scriptorium:handled:default")
    assert b"rejected" in handled and b"unreachable" not in handled, "only a terminal outcome marks the session handled"


def test_bad_input_is_rejected_and_the_worker_keeps_serving(cluster: Cluster) -> None:
    turns = cluster.session("s1", 2)
    cluster.start_worker("w1")
    app = client(cluster, "pickle")
    malformed = app.send_task("scriptorium.write", args=["{not json"])
    app.send_task("scriptorium.write", args=[{"type": "turn.ended", "workspace": "default"}])
    app.send_task("scriptorium.write", args=["x" * 100_000])
    app.send_task("scriptorium.write", args=[{"type": "turn.ended", "workspace": "../../etc", "session_id": "s1"}])
    app.send_task(
        "scriptorium.write",
        args=[SessionIdle(workspace="default", session_id="s1").model_dump(mode="json")],
        serializer="pickle",
    )
    wait_for(lambda: cluster.log("w1").count("event.rejected") >= 4, 30, "four rejected payloads")
    # What ops/README.md says a dashboard sees: the result backend records FAILURE with Reject.
    meta = wait_for(lambda: task_meta(cluster, malformed.id), 10, "the rejected task's state")
    assert (meta["status"], meta["result"]["exc_type"]) == ("FAILURE", "Reject"), meta
    wait_for(
        lambda: "ContentDisallowed" in cluster.log("w1") or "Refusing to deserialize" in cluster.log("w1"),
        30,
        "the pickle message to be refused",
    )
    app.send_task("scriptorium.write", args=[SessionIdle(workspace="default", session_id="s1").model_dump(mode="json")])
    (result,) = cluster.results(1)
    assert result.ok and result.nodes_written == 2
    assert check_exactly_once(cluster, {"s1": turns})["lost"] == 0
    assert cluster.workers["w1"].poll() is None


def test_duplicate_deliveries_change_nothing(cluster: Cluster) -> None:
    turns = cluster.session("s1", 8)
    cluster.start_worker("w1", concurrency=2)
    cluster.start_worker("w2", concurrency=2)
    event = SessionIdle(workspace="default", session_id="s1").model_dump(mode="json")
    app = client(cluster)
    for _ in range(10):
        app.send_task("scriptorium.write", args=[event])
    results = cluster.results(10, timeout=120)
    assert sum(r.outcome == "written" for r in results) == 1
    assert all(r.ok for r in results)
    assert check_exactly_once(cluster, {"s1": turns}) == clean(8)


def test_the_stream_is_trimmed_without_dropping_unacknowledged_entries(cluster: Cluster) -> None:
    from scriptorium.workers.stream import ResultStream

    key = "scriptorium:ingest_ended"
    stream = ResultStream(cluster.redis, key)
    ids = [cluster.redis.xadd(key, {"payload": json.dumps({"n": n})}) for n in range(10)]
    cluster.redis.xgroup_create(key, "dashboards", id="0")
    delivered = cluster.redis.xreadgroup("dashboards", "c1", {key: ">"}, count=6)
    acked = [entry_id for entry_id, _ in delivered[0][1][:4]]
    cluster.redis.xack(key, "dashboards", *acked)
    stream.trim()
    remaining = [entry_id for entry_id, _ in cluster.redis.xrange(key)]
    assert remaining == ids[4:], "acknowledged entries go, the pending and undelivered ones stay"


def test_a_result_that_cannot_be_published_waits_in_the_outbox(cluster: Cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from scriptorium.schemas.events import IngestEnded
    from scriptorium.workers.stream import ResultStream

    runtime_dir = tmp_path / "rt"
    runtime_dir.mkdir()
    result = IngestEnded(workspace="default", ok=True, outcome="written")
    dead = ResultStream(redis.Redis(port=1, socket_connect_timeout=0.2), "scriptorium:ingest_ended")
    assert dead.publish(result, runtime_dir) is False
    assert result.result_id in (runtime_dir / "outbox.jsonl").read_text()
    live = ResultStream(cluster.redis, "scriptorium:ingest_ended")
    assert live.flush(runtime_dir / "outbox.jsonl") == 1
    (published,) = cluster.results(1)
    assert published.result_id == result.result_id
    assert (runtime_dir / "outbox.jsonl").read_text() == ""


def test_an_event_for_an_unknown_workspace_is_terminal_and_creates_nothing(cluster: Cluster) -> None:
    cluster.start_worker("w1")
    app = client(cluster)
    task = app.send_task(
        "scriptorium.write", args=[SessionIdle(workspace="typo", session_id="s1").model_dump(mode="json")]
    )
    (result,) = cluster.results(1)
    assert (result.ok, result.reason, result.retryable, result.workspace) == (
        False,
        "WORKSPACE_NOT_INITIALIZED",
        False,
        "typo",
    )
    assert not (cluster.state / "workspaces" / "typo").exists()
    meta = wait_for(lambda: task_meta(cluster, task.id), 20, "the task result")
    assert meta["status"] == "FAILURE" and meta["result"]["exc_type"] == "TerminalWriteFailure"


def test_a_head_move_writes_the_branch_it_left_once_however_often_it_is_delivered(cluster: Cluster) -> None:
    """session.head_moved, published ×10 from two workers' view: the left branch is written by one pass."""
    from scriptorium.schemas.events import HeadMoved
    from tests.sessions_fixtures import chain

    main = cluster.session("s1", 6)  # s1-t0 … s1-t5, head at s1-t5
    fork = [f"s1-b{i}" for i in range(3)]
    cluster.store.add_nodes(chain("s1", fork, parent="s1-t2", start=3), head=fork[-1])  # the user went back
    cluster.start_worker("w1", concurrency=2)
    cluster.start_worker("w2", concurrency=2)
    publisher = Publisher(cluster.server.url)
    for _ in range(10):
        publisher.publish(HeadMoved(workspace="default", session_id="s1", left=main[-1], head=fork[-1]))
    publisher.close()
    results = cluster.results(10, timeout=120)
    assert all(r.ok and r.event_type == "session.head_moved" for r in results)
    assert sum(r.outcome == "written" for r in results) == 1
    assert check_exactly_once(cluster, {"s1": main}) == clean(6), "the left branch, whole, once"
    # The head's own branch was not written by the head-moved pass: not marked (markers are keyed by the
    # workspace's ID, not its name), not cited.
    assert unmarked(cluster.store, cluster.memory(), [("s1", n) for n in main]) == []  # the key finds marks
    assert unmarked(cluster.store, cluster.memory(), [("s1", n) for n in fork]) == [("s1", n) for n in fork]
    assert not [key for key in records_citing(cluster.memory()) if "/s1/s1-b" in key]
