"""Attacks on ``POST /api/hooks`` with a requester's runtime token, over real HTTP.

A requester's token reads transcripts only from the folders named when it was made, appends only to its
requester's sessions, and never reads a file through a hard or symbolic link.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scriptorium.sessions import open_store
from tests.checks import records_citing
from tests.cluster.conftest import wait_for
from tests.conftest import trusted_and_pending_world
from tests.helpers.hooks import common, history
from tests.helpers.served import ThreadServer
from tests.helpers.tokens import scoped_token
from tests.helpers.transcripts import transcript


class World:
    def __init__(self, root: Path) -> None:
        self.state = root / "state"
        trusted_and_pending_world(self.state / "memory")
        self.runtimes = root / "runtimes"  # the runtimes' folders the server itself may read
        self.alice_dir, self.bob_dir = self.runtimes / "alice", self.runtimes / "bob"
        for folder in (self.alice_dir, self.bob_dir):
            folder.mkdir(parents=True)
        self.alice = scoped_token(self.state, "runtime", "--requester", "alice", "--transcripts", str(self.alice_dir))
        self.bob = scoped_token(self.state, "runtime", "--requester", "bob", "--transcripts", str(self.bob_dir))
        self.nobody = scoped_token(self.state, "runtime", "--requester", "carol")  # no folders named
        self.server = ThreadServer(
            self.state, SCRIPTORIUM_TRIGGER_TOKENS="0", SCRIPTORIUM_HOOK_TRANSCRIPT_ROOTS=str(self.runtimes)
        )

    def stop(self, token: str, path: Path, session: str) -> httpx.Response:
        payload = common("Stop", session=session, transcript=path)
        return httpx.post(f"{self.server.url}/api/hooks", json=payload, headers={"Authorization": f"Bearer {token}"})

    def session(self, session_id: str) -> tuple[str | None, str | None, int]:
        """(head, audience, node count)."""
        store = open_store(f"sqlite:///{self.state / 'sessions' / 'sessions.db'}")
        try:
            found = store.get_session(session_id)
            if found is None:
                return None, None, 0
            return found.head, found.metadata.get("audience"), len(store.node_parents(session_id))
        finally:
            store.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    made = World(tmp_path)
    yield made
    made.server.close()


def test_a_requesters_token_imports_from_its_own_folders_only(world: World) -> None:
    own = transcript(world.alice_dir / "a1.jsonl", "cc-alice", 2)
    taken = world.stop(world.alice, own, "cc-alice")
    assert taken.status_code == 200, taken.text
    # A writing hook is answered at once and run in turn by the server.
    wait_for(lambda: world.session("cc-alice")[1:] == ("alice", 2), 30, "its session, with its audience")
    # Under the runtimes' folders, but bob's: refused before anything is read.
    bobs = transcript(world.bob_dir / "b-unimported.jsonl", "cc-unimported", 2)
    refused = world.stop(world.alice, bobs, "cc-unimported")
    assert refused.status_code == 403 and refused.json()["reason"] == "FORBIDDEN", refused.text
    assert world.session("cc-unimported") == (None, None, 0)
    # A token made without --transcripts imports nothing.
    nothing = world.stop(world.nobody, own, "cc-alice")
    assert nothing.status_code == 403 and "imports no transcripts" in nothing.json()["message"]


def test_a_requester_cannot_append_to_another_requesters_session(world: World) -> None:
    bobs = transcript(world.bob_dir / "b1.jsonl", "cc-bob", 2)
    assert world.stop(world.bob, bobs, "cc-bob").status_code == 200
    wait_for(lambda: world.session("cc-bob")[1:] == ("bob", 2), 30, "bob's session")
    before = world.session("cc-bob")
    forged = transcript(world.alice_dir / "forged.jsonl", "cc-bob", 4)  # bob's session ID, alice's file
    answer = world.stop(world.alice, forged, "cc-bob")
    assert answer.status_code == 200 and answer.json() == {}, "a memory failure never fails the agent"
    refusal = "cc-bob belongs to another requester"
    wait_for(lambda: any(refusal in str(e.get("message")) for e in history(world.state)), 30, "the refusal")
    assert world.session("cc-bob") == before, "bob's head and nodes did not move"
    cited = records_citing(world.state / "memory")
    assert sum(1 for key in cited if "/cc-bob/" in key) == 2


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_a_link_in_the_requesters_folder_reads_nothing_outside_it(world: World, tmp_path: Path, link: str) -> None:
    secret = transcript(tmp_path / "secret.jsonl", "cc-secret", 2)
    planted = world.alice_dir / "planted.jsonl"
    (os.link if link == "hard" else os.symlink)(secret, planted)
    answer = world.stop(world.alice, planted, "cc-secret")
    assert answer.status_code == 403 and answer.json()["reason"] == "FORBIDDEN", answer.text
    assert world.session("cc-secret") == (None, None, 0)


def test_the_hook_routes_context_is_its_tokens_requesters(tmp_path: Path) -> None:
    """SessionStart's core and UserPromptSubmit's recall over ``/api/hooks`` show the token's requester's
    records and the shared ones, never another requester's (nor, for a token without one, anyone's)."""
    from tests.requesters_fixtures import requesters_world

    world = requesters_world(tmp_path / "state")
    folder = tmp_path / "runtimes" / "alice"
    folder.mkdir(parents=True)
    tokens = {
        "alice": scoped_token(world.state, "runtime", "--requester", "alice", "--transcripts", str(folder)),
        "bob": scoped_token(world.state, "runtime", "--requester", "bob"),
        "nobody": scoped_token(world.state, "runtime"),
    }
    shown = {"alice": ("blue notebook", "oolong"), "bob": ("garden vault",), "nobody": ()}
    private = ("blue notebook", "oolong", "garden vault")
    server = ThreadServer(world.state, SCRIPTORIUM_HOOK_TRANSCRIPT_ROOTS=str(tmp_path / "runtimes"))
    try:
        for who, token in tokens.items():
            context = ""
            for event, fields in (
                ("SessionStart", {"source": "startup"}),
                ("UserPromptSubmit", {"prompt": "memo vault notebook"}),
            ):
                answer = httpx.post(
                    f"{server.url}/api/hooks",
                    json=common(event, session=f"new-{who}", **fields),
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=30,
                )
                assert answer.status_code == 200, answer.text
                context += answer.json()["hookSpecificOutput"]["additionalContext"]
            assert "standups are short" in context, (who, context)
            assert all(word in context for word in shown[who]), (who, context)
            assert not [w for w in private if w in context and w not in shown[who]], (who, context)
    finally:
        server.close()
