"""An agent writer on a real cluster: Celery worker processes whose writer is the Claude Code stand-in."""

from __future__ import annotations

from scriptorium.producers.publisher import Publisher
from tests.agent_fixtures import StandIns, standins
from tests.cluster.conftest import Cluster, check_exactly_once

__all__ = ["standins"]


def test_a_worker_writes_with_the_claude_code_writer_and_its_topics_are_installed(
    cluster: Cluster, standins: StandIns
) -> None:
    standins.scenario("claude", "valid")
    turns = cluster.session("s1", 6)
    cluster.start_worker("w1", PATH=standins.path_env(), SCRIPTORIUM_WRITER="claude-code")
    publisher = Publisher(cluster.server.url)
    publisher.session_idle("default", "s1")
    publisher.close()
    (result,) = cluster.results(1)
    assert result.ok and result.outcome == "written" and result.nodes_written == 6, result
    with cluster.workspace() as ws:
        topics = ws.snapshot().topics
        assert list(topics) == ["topics/agent/s1.md"]
        assert len(topics["topics/agent/s1.md"].records) == 6
    (call,) = standins.calls("claude")
    assert call["env"]["SCRIPTORIUM_WRITER_RUN"] == "1" and "SCRIPTORIUM_BROKER_URL" not in call["env"]
    assert check_exactly_once(cluster, {"s1": turns}) == {
        "turns": 6,
        "lost": 0,
        "duplicated": 0,
        "unmarked": 0,
        "partial_installs": 0,
    }
