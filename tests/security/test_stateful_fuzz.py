"""Schemathesis's stateful run, with the owner and an attacker taking turns, for every token kind.

The OpenAPI document links responses to the calls they lead to (a held change to its proposal, a search
hit to its record, the proposal list to each proposal; `scriptorium.web.app` declares them and
schemathesis infers the rest). The state machine follows those links with the owner's token and the
attacker's in turn, so an ID the owner's answer carries — another requester's proposal, a private record
found by search — is the next call the attacker makes. Whatever the attacker gets:

* never a 5xx; never a 2xx on a route its scope is not declared for (403);
* never a record, proposal or search hit it may not see, and no byte of another requester's private
  records in any answer (their words, labels and source paths).

Each kind is run with and without a requester: runtime, propose and write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings

from scriptorium.web.runtime import RuntimeRoutes
from tests.helpers.attacks import ALICE_PRIVATE, BOB_PRIVATE, create
from tests.helpers.served import ThreadServer
from tests.helpers.tokens import scoped_token
from tests.requesters_fixtures import requesters_world, source_of

NUMBERS = "Memo 0 00 1 0a: bob's numbers"
"""A private record of bob's whose words are the ones generated queries hold, so the owner's search finds
it and the attacker is handed its ID."""

ATTACKERS: dict[str, tuple[str, str | None]] = {
    "runtime": ("runtime", None),
    "runtime-alice": ("runtime", "alice"),
    "propose": ("propose", None),
    "propose-alice": ("propose", "alice"),
    "write": ("write", None),
    "write-bob": ("write", "bob"),
}

# The kinds share one world (a module fixture) whose server state every run moves on. On one xdist worker, in
# this order, each kind starts from the same state run after run, so its derandomized examples (the CI
# profile) meet the same answers: a state machine whose answers change under the same choices is what
# Hypothesis reports as FlakyStrategyDefinition. Nothing but the calls may change that state, and what they set
# off in the background is waited for before the next call (World.settle).
pytestmark = pytest.mark.xdist_group("stateful-fuzz")


class World:
    def __init__(self, root: Path) -> None:
        self.records = requesters_world(root / "state")
        self.state = root / "state"
        self.tokens: dict[str, str] = {}
        for kind, (scope, requester) in ATTACKERS.items():
            extra = ("--requester", requester) if requester else ()
            if scope == "runtime" and requester:
                (root / "transcripts").mkdir(exist_ok=True)
                extra += ("--transcripts", str(root / "transcripts"))
            self.tokens[kind] = scoped_token(self.state, scope, *extra)
        self.tokens["propose-carol"] = scoped_token(self.state, "propose", "--requester", "carol")
        # No session watcher: a SessionStart a runtime attacker sends would start a detached sweep, writing in
        # a process of its own at moments the machine's load decides (settle below waits for the same work done
        # in the server's threads); writing hooks run as soon as queued, not a second later.
        self.server = ThreadServer(self.state, SCRIPTORIUM_WATCH="false", SCRIPTORIUM_HOOK_WRITE_SETTLE_S="0")
        self.tokens["owner"] = self.server.token
        self.proposals: dict[str, str] = {}
        """Proposal ID → the token kind that sent it."""
        for kind in ("propose-carol", "propose", "propose-alice"):  # oldest first: the owner's list begins
            held = self.call(
                kind, "POST", "/api/memory/changes", json=create(f"Memo: {kind} asks.", source_of("shared-s"))
            )
            assert held.status_code == 202, held.text
            self.proposals[held.json()["id"]] = kind
            time.sleep(1.1)  # with carol's, which no attacker sent (created to the second)
        made = self.call("owner", "POST", "/api/memory/changes", json=create(NUMBERS, source_of("bob-s")))
        assert made.status_code == 200, made.text
        self.numbers = set(made.json()["created_ids"])

    def settle(self) -> None:
        """Wait for what the server queued behind its answers: writing hooks and the write passes events set
        off. Left running, they installed into the memory while later calls ran, at moments the machine's load
        decided, so the same calls met different answers (FlakyStrategyDefinition in propose-alice, in four
        full runs of the suite on a busy machine; never the module alone)."""
        routes = next(
            owner
            for endpoint in _endpoints(self.server.uvicorn.config.app.routes)
            if isinstance(owner := getattr(endpoint, "__self__", None), RuntimeRoutes)
        )
        done = threading.Event()
        routes._hook_writes().put(done.set)  # runs after every hook queued before it
        assert done.wait(120), "the server's hook writes did not finish within 120 s"
        routes._passes.submit(lambda: None).result(timeout=120)  # one worker: after every pass queued before

    def call(self, who: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, f"{self.server.url}{path}", headers=headers, timeout=30, **kwargs)

    def hidden(self, requester: str | None) -> tuple[set[str], tuple[str, ...]]:
        """The record IDs and the private words ``requester`` (None: none) may not see."""
        ids, words = set(self.records.ids("mixed")), ()
        if requester != "alice":
            ids |= self.records.ids("alice-s", "core-alice")
            words += ALICE_PRIVATE
        if requester != "bob":
            ids |= self.records.ids("bob-s") | self.numbers
            words += (*BOB_PRIVATE, "bob's numbers")
        return ids, words


def _endpoints(routes: list[Any]) -> Iterator[object]:
    """Every route's endpoint, through the routers FastAPI includes."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _endpoints(inner.routes)
        else:
            yield getattr(route, "endpoint", None)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    made = World(tmp_path_factory.mktemp("stateful"))
    yield made
    made.server.close()


def _ids_in(body: Any) -> set[str]:
    """Every ``memory_id`` and proposal ``id`` anywhere in a JSON answer."""
    found: set[str] = set()
    if isinstance(body, dict):
        for key, value in body.items():
            if key in ("memory_id", "id") and isinstance(value, str):
                found.add(value)
            found |= _ids_in(value)
    elif isinstance(body, list):
        for value in body:
            found |= _ids_in(value)
    return found


@pytest.mark.parametrize("kind", list(ATTACKERS))
def test_following_the_owners_links_an_attacker_reaches_nothing_it_may_not_see(world: World, kind: str) -> None:
    schema = schemathesis.openapi.from_url(f"{world.server.url}/openapi.json")
    document = httpx.get(f"{world.server.url}/openapi.json", timeout=10).json()
    declared = {(m.upper(), p): set(op["x-scopes"]) for p, ops in document["paths"].items() for m, op in ops.items()}
    scope, requester = ATTACKERS[kind]
    hidden_ids, private = world.hidden(requester)
    hidden_ids |= {pid for pid, sender in world.proposals.items() if sender != kind}
    seen: dict[str, set[int]] = {"hidden asked": set(), "steps": set()}

    class Turns(schema.as_state_machine()):  # type: ignore[misc]
        def setup(self) -> None:
            self.turn = 0

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            self.turn += 1
            who = "owner" if self.turn % 2 else kind  # the owner finds, the attacker follows
            # Schemathesis's 10 s read timeout was reached on a loaded machine (parallel workers beside other
            # work), and Hypothesis reports it as a failure: a server that hangs still fails here, at 60 s.
            headers = {"Authorization": f"Bearer {world.tokens[who]}"}
            return {"base_url": world.server.url, "headers": headers, "timeout": 60}

        def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
            world.settle()  # what the call set off is in the memory before the next call: answers follow calls
            where = f"{case.method} {case.formatted_path} -> {response.status_code}"
            assert response.status_code < 500, f"{where}: {response.text[:2000]}"
            if kwargs["headers"]["Authorization"] != f"Bearer {world.tokens[kind]}":
                return
            seen["steps"].add(response.status_code)
            asked = {str(v) for v in (case.path_parameters or {}).values()}
            if asked & hidden_ids:
                seen["hidden asked"].add(response.status_code)
            if scope not in declared[(case.method.upper(), case.path)]:
                assert response.status_code == 403, f"{kind}: {where} where its scope is not declared"
            if 200 <= response.status_code < 300:
                body = response.json()
                leaked = _ids_in(body) & hidden_ids
                assert not leaked, f"{kind}: {where} answered {leaked} it may not see"
            text = response.text
            assert not [w for w in private if w in text], f"{kind}: {where} leaked: {text[:2000]}"

    Turns.run(
        settings=settings(
            max_examples=20,
            stateful_step_count=8,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            phases=[Phase.generate],  # no replay to shrink: the server's state moves on between runs
        )
    )
    assert any(200 <= code < 300 for code in seen["steps"]) or scope == "runtime", seen
    if scope != "runtime":  # a runtime token's routes take no record or proposal: no link leads there
        # The links were followed: the attacker did ask for what the owner's answers held, and was refused.
        assert seen["hidden asked"] and seen["hidden asked"] <= {403, 404}, seen
