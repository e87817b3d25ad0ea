"""The deployment files describe what the code runs."""

from __future__ import annotations

from pathlib import Path

import yaml

from scriptorium.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]


def test_compose_runs_every_role_on_one_memory_volume() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {"redis", "postgres", "worker", "beat", "api", "flower"}
    redis_command = " ".join(services["redis"]["command"])
    assert "--appendonly yes" in redis_command and "--maxmemory-policy noeviction" in redis_command
    for role in ("worker", "beat", "api", "flower"):
        assert "memory:/data" in services[role]["volumes"]
        assert services[role]["environment"]["SCRIPTORIUM_BROKER_URL"].startswith("redis://redis:")
    for role in ("worker", "beat", "api"):
        command = services[role]["command"]
        assert command[0] == "scriptorium"
        build_parser().parse_args(command[1:])  # the CLI accepts exactly these arguments


def test_compose_publishes_on_loopback_only_with_no_default_credentials() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    for role in ("api", "flower"):
        assert all(str(port).startswith("127.0.0.1:") for port in services[role]["ports"]), role
    flower = " ".join(services["flower"]["command"])
    assert "${FLOWER_AUTH:?" in flower and "change-me" not in text
    postgres = services["postgres"]["environment"]
    assert "POSTGRES_HOST_AUTH_METHOD" not in postgres
    assert postgres["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert "${POSTGRES_PASSWORD:?" in yaml.safe_load(text)["x-scriptorium"]["environment"]["SCRIPTORIUM_SESSIONS_URL"]
