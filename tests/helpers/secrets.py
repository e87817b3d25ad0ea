"""Secrets of every kind the redactor knows (made up, from a fixed seed), ingesting a transcript that holds them,
and where they are found under a state folder afterwards."""

from __future__ import annotations

import json
import random
import string
import subprocess
from pathlib import Path

from tests.helpers.cli import run

RNG = random.Random(20261203)
ALNUM = string.ascii_letters + string.digits


def fake(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


B64 = ALNUM + "+/"


UPPER = string.ascii_uppercase + string.digits


SECRETS: dict[str, str] = {
    "aws-access-key": "AKIA" + fake(UPPER, 16),
    "aws-secret": fake(B64, 40),
    "gcp-api-key": "AIza" + fake(ALNUM + "_-", 35),
    "azure-storage": fake(B64, 86) + "==",
    "openai-project": "sk-proj-" + fake(ALNUM + "_-", 64),
    "openai-legacy": "sk-" + fake(ALNUM, 20) + "T3BlbkFJ" + fake(ALNUM, 20),
    "anthropic": "sk-ant-api03-" + fake(ALNUM + "_-", 93) + "AA",
    "github": "ghp_" + fake(ALNUM, 36),
    "gitlab": "glpat-" + fake(ALNUM + "_-", 20),
    "slack": "xoxb-" + fake(string.digits, 12) + "-" + fake(string.digits, 13) + "-" + fake(ALNUM, 24),
    "stripe": "sk_live_" + fake(ALNUM, 24),
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkZha2UifQ."
    + fake(ALNUM + "_-", 43),
    "db-password": fake(ALNUM, 18),
    "env-password": fake(ALNUM + "#$%", 20),
    "key-body": fake(B64, 64),
}


def ingest(state: Path, path: Path, **env: str) -> dict[str, object]:
    """``scriptorium ingest PATH --json`` (in this process, with ``env``): its report."""
    done = run("ingest", str(path), "--state", str(state), "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def holding(state: Path, secrets: dict[str, str]) -> dict[str, list[str]]:
    """Which secrets are in which file under ``state``, or in any git object (packed or loose, reachable
    or not), by name."""
    found: dict[str, list[str]] = {}
    for path in state.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for name, secret in secrets.items():
                if secret.encode() in data:
                    found.setdefault(name, []).append(str(path.relative_to(state)))
    objects = subprocess.run(
        ["git", "-C", str(state / "memory"), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    for name, secret in secrets.items():
        if secret.encode() in objects:
            found.setdefault(name, []).append("git objects")
    return found
