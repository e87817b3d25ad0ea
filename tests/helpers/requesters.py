"""The requesters' world behind a served API (`scriptorium serve`), with a token per kind of caller; the world
built once per module and copied per test that changes it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.served import ThreadServer
from tests.helpers.tokens import scoped_token
from tests.requesters_fixtures import (
    World,
    requesters_world,
)


class Served:
    """The world behind a server, with a token per kind of caller."""

    def __init__(self, world: World, tokens: dict[str, str] | None = None) -> None:
        self.world = world
        self.state = world.state
        self.tokens = dict(tokens) if tokens is not None else requester_tokens(self.state)
        self.server = ThreadServer(self.state)
        self.tokens["owner"] = self.server.token

    def restart(self) -> None:
        self.server.close()
        self.server = ThreadServer(self.state)

    def call(self, who: str, method: str, url: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"}
        return httpx.request(method, f"{self.server.url}{url}", headers=headers, timeout=60, **kwargs)

    def revision(self) -> str:
        revision: str = self.call("owner", "GET", "/api/memory/status").json()["revision"]
        return revision


def requester_tokens(state: Path) -> dict[str, str]:
    return {
        "alice": scoped_token(state, "propose", "--requester", "alice"),
        "bob": scoped_token(state, "write", "--requester", "bob"),
        "runtime-alice": scoped_token(state, "runtime", "--requester", "alice"),
        "runtime": scoped_token(state, "runtime"),
    }


def copy_served(template: tuple[World, dict[str, str]], folder: Path) -> Served:
    world, tokens = template
    shutil.copytree(world.state, folder / "state", symlinks=True)
    return Served(World(folder / "state", world.records), tokens)


def requesters_template(factory: pytest.TempPathFactory) -> tuple[World, dict[str, str]]:
    """The world and its tokens, to copy (:func:`copy_served`)."""
    world = requesters_world(factory.mktemp("requesters-template") / "state")
    return world, requester_tokens(world.state)
