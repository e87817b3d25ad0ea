"""Hooks against a real cluster: real redis-server and Celery worker; the hook only imports and publishes."""

from __future__ import annotations

from pathlib import Path

from tests.checks import records_citing
from tests.cluster.conftest import Cluster
from tests.helpers.hooks import common, hook
from tests.helpers.transcripts import claude_transcript


def test_hooks_against_a_real_cluster(cluster: Cluster, tmp_path: Path) -> None:
    """Stop publishes turn.ended, SessionEnd session.idle; the worker writes each turn once."""
    cluster.start_worker("w1")
    env = {"SCRIPTORIUM_BROKER_URL": cluster.server.url, "SCRIPTORIUM_SESSIONS_URL": cluster.sessions_url}
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
    hook_state = tmp_path / "hook-state"  # the runtime's machine: no workspace of its own
    out = hook(hook_state, common("Stop", transcript=transcript), **env)
    assert (out.returncode, out.stdout) == (0, ""), out.stderr
    (first,) = cluster.results(1, session="cc-hooks")
    assert first.ok and first.outcome == "written" and first.nodes_written == 4
    claude_transcript(transcript, 6, start=4)
    out = hook(hook_state, common("SessionEnd", transcript=transcript, reason="logout"), **env)
    assert (out.returncode, out.stdout) == (0, ""), out.stderr
    (second,) = cluster.results(1, session="cc-hooks")
    assert second.ok and second.nodes_written == 2
    cited = records_citing(cluster.memory())
    assert all(cited[f"claude-code/cc-hooks/e{n}"] == 1 for n in range(6))


def test_http_events_are_enqueued_once_by_event_id(cluster: Cluster) -> None:
    import uuid

    import httpx

    from tests.helpers.served import ThreadServer
    from tests.helpers.tokens import nodes, runtime_token

    cluster.start_worker("w1")
    server_state = cluster.tmp / "api-state"
    token = runtime_token(server_state)
    env = {"SCRIPTORIUM_BROKER_URL": cluster.server.url, "SCRIPTORIUM_SESSIONS_URL": cluster.sessions_url}
    server = ThreadServer(server_state, **env)
    try:
        auth = {"Authorization": f"Bearer {token}"}
        assert httpx.post(f"{server.url}/api/sessions/h1/nodes", json=nodes("h1", 4), headers=auth).json()["added"] == 4
        body = {"type": "session.idle", "workspace": "default", "session_id": "h1", "event_id": uuid.uuid4().hex}
        first = httpx.post(f"{server.url}/api/events", json=body, headers=auth).json()
        second = httpx.post(f"{server.url}/api/events", json=body, headers=auth).json()
        assert first["mode"] == "cluster" and first["task_id"] == body["event_id"] and not first["duplicate"]
        assert second["duplicate"] is True
        (result,) = cluster.results(1, session="h1")
        assert result.ok and result.nodes_written == 4 and result.event_id == body["event_id"]
        assert cluster.redis.xlen("scriptorium:ingest_ended") == 1, "the duplicate was never enqueued"
    finally:
        server.close()


def test_the_idle_sweep_writes_a_hooks_session_into_the_workspace_its_hooks_publish_for(
    cluster: Cluster, tmp_path: Path
) -> None:
    """SCRIPTORIUM_HOOK_WORKSPACE=team: Stop's turn.ended (below the trigger) writes nothing; the session never
    ends; the beat's sweep writes it — into team's memory, not the default one."""
    from celery import Celery

    from scriptorium.workspace import MemoryWorkspace

    MemoryWorkspace.init(cluster.memory("team")).close()
    cluster.start_worker("w1", SCRIPTORIUM_TRIGGER_TOKENS="99999")
    env = {
        "SCRIPTORIUM_BROKER_URL": cluster.server.url,
        "SCRIPTORIUM_SESSIONS_URL": cluster.sessions_url,
        "SCRIPTORIUM_HOOK_WORKSPACE": "team",
    }
    transcript = claude_transcript(tmp_path / "cc-hooks.jsonl", 4)
    assert hook(tmp_path / "hook-state", common("Stop", transcript=transcript), **env).returncode == 0
    (below,) = cluster.results(1, session="cc-hooks")
    assert below.workspace == "team" and below.nodes_written == 0
    session = cluster.store.get_session("cc-hooks")
    assert session is not None and session.metadata["workspace"] == "team"
    app = Celery("sweep-client", broker=cluster.server.url)
    try:
        app.send_task("scriptorium.sweep")
        (swept,) = cluster.results(1, session="cc-hooks")
    finally:
        app.close()
    assert swept.ok and swept.workspace == "team" and swept.nodes_written == 4
    team = records_citing(cluster.memory("team"))
    assert all(team[f"claude-code/cc-hooks/e{n}"] == 1 for n in range(4))
    assert not [k for k in records_citing(cluster.memory()) if k.startswith("claude-code/cc-hooks/")]
