"""The token store: hashed at rest, constant-time checks, expiry, and no token lost to concurrent writers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scriptorium.access.tokens import TokenStore, parse_duration
from scriptorium.errors import InvalidArgument, NotFound


def test_a_token_verifies_until_revoked_and_only_its_hash_is_kept(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    record, token = store.create("runtime", "codex", "30d")
    assert store.verify(token) == record and record.expires is not None
    secret = token.split("_", 2)[2]  # the secret is URL-safe base64 and may itself hold "_"
    assert len(secret) >= 40 and secret not in (tmp_path / "tokens.json").read_text()
    assert store.verify(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert store.verify("sct_" + record.id + "_" + "x" * 43) is None and store.verify("garbage") is None
    store.revoke(record.id)
    assert store.verify(token) is None
    with pytest.raises(NotFound):
        store.revoke(record.id)


@pytest.mark.parametrize("bad", ["0d", "5", "d", "-1h", "1y", ""])
def test_bad_durations_scopes_and_names_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_duration(bad)
    store = TokenStore(tmp_path)
    with pytest.raises(InvalidArgument):
        store.create("owner-ish")
    with pytest.raises(InvalidArgument):
        store.create("runtime", "../etc")
    assert not (tmp_path / "tokens.json").exists(), "a refused create stores nothing"


def test_concurrent_writers_lose_no_token(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from scriptorium.access.tokens import TokenStore\n"
        "store = TokenStore(Path(sys.argv[1]))\n"
        "for _ in range(15):\n"
        "    _record, token = store.create('runtime')\n"
        "    store.verify(token)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)]) for _ in range(3)]
    assert [p.wait(60) for p in procs] == [0, 0, 0]
    assert len(TokenStore(tmp_path).list()) == 45


def test_an_owner_token_never_begins_with_a_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A token a command line takes after ``--token`` must not read as an option: one urlsafe draw in 64
    begins with "-", and that one is drawn again."""
    import secrets

    from scriptorium.access.owner import owner_token

    draws = iter(["-looks-like-an-option", "_fine-token"])
    monkeypatch.setattr(secrets, "token_urlsafe", lambda _n: next(draws))
    assert owner_token(tmp_path) == ("_fine-token", True)
    assert (tmp_path / "owner-token").read_text() == "_fine-token"
