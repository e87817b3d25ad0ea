"""Scoped tokens beside the owner token: ``scriptorium token create | list | revoke``.

A token is ``sct_<id>_<secret>``. Only a keyed hash of the secret is kept
(HMAC-SHA256 under ``<state>/token-key``; the secret is 32 random bytes, so a
keyed hash is as strong as a slow one and costs a request nothing), in
``<state>/tokens.json``; both files are 0600. Checking compares in constant
time. A token has one scope:

* ``runtime`` — what an agent runtime needs and nothing else: post events and
  session nodes, read the effective core and search trusted records, answer
  hooks over HTTP. The owner token is not a runtime token: routes that take a
  runtime token refuse it.
* ``propose`` — search and read what its requester may see, and send changes,
  which are held for the owner to approve or reject.
* ``write`` — search and read what its requester may see, and change records
  within its audience directly.

A token made with ``--requester NAME`` speaks for that requester: its reads show
the shared records and the requester's own (:mod:`scriptorium.audience`); a
token without one sees the shared records only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scriptorium.audience import OWNER_PRINCIPAL, Principal
from scriptorium.audience import SCOPES as SCOPES
from scriptorium.audience import TokenScope as TokenScope
from scriptorium.errors import InvalidArgument, NotFound
from scriptorium.formats import read_versioned, versioned
from scriptorium.fsutil import atomic_write
from scriptorium.workspace.lock import FileLock
from scriptorium.workspace.sources import AUDIENCE_NAME

PREFIX = "sct"
TOKENS_VERSION = 1
"""``tokens.json``'s layout (:mod:`scriptorium.formats`): a file a newer release wrote is refused."""
_TOKEN = re.compile(rf"^{PREFIX}_([0-9a-f]{{12}})_([A-Za-z0-9_-]{{20,}})$")
_DURATION = re.compile(r"^(\d+)([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
LAST_USED_EVERY = timedelta(minutes=1)
"""``last_used`` is written at most this often per token (a request must not cost a file write)."""


def parse_duration(text: str) -> timedelta:
    """``90m``, ``12h``, ``30d`` or ``2w``."""
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise InvalidArgument(f"bad duration {text!r}: use a number and m, h, d or w (e.g. 30d)")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """What is kept of a token: never the secret."""

    id: str
    scope: TokenScope
    requester: str | None
    created: str
    expires: str | None
    last_used: str | None
    digest: str
    transcripts: tuple[str, ...] = ()
    """The folders a requester's runtime token imports transcripts from over the hook route (absolute
    paths; none: the hook route imports nothing for it)."""

    def public(self) -> dict[str, str | list[str] | None]:
        out: dict[str, str | list[str] | None] = {k: v for k, v in asdict(self).items() if k != "digest"}
        out["transcripts"] = list(self.transcripts)
        return out

    def expired(self, now: datetime) -> bool:
        return self.expires is not None and datetime.fromisoformat(self.expires) <= now


class TokenStore:
    """The scoped tokens of one state folder."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.path = state / "tokens.json"
        self._key_path = state / "token-key"
        self._lock = threading.Lock()
        self._file_lock = FileLock(state / "tokens.lock")

    @contextmanager
    def _changing(self) -> Iterator[dict[str, TokenRecord]]:
        """Read-modify-write under a file lock: the CLI and a running server share the file."""
        self.state.mkdir(parents=True, exist_ok=True)
        with self._lock, self._file_lock.hold(timeout=10):
            records = self._load()
            yield records
            self._save(records)

    def _key(self) -> bytes:
        if not self._key_path.exists():
            self.state.mkdir(parents=True, exist_ok=True)
            atomic_write(self._key_path, secrets.token_bytes(32), mode=0o600)
        return self._key_path.read_bytes()

    def _digest(self, secret: str) -> str:
        return hmac.new(self._key(), secret.encode(), hashlib.sha256).hexdigest()

    def _load(self) -> dict[str, TokenRecord]:
        try:
            raw = read_versioned(json.loads(self.path.read_text(encoding="utf-8")), TOKENS_VERSION, str(self.path))
        except FileNotFoundError:
            return {}
        return {
            entry["id"]: TokenRecord(**{**entry, "transcripts": tuple(entry.get("transcripts", ()))})
            for entry in raw.get("tokens", [])
        }

    def _save(self, records: dict[str, TokenRecord]) -> None:
        body = versioned(
            {"tokens": [{**asdict(r), "transcripts": list(r.transcripts)} for r in records.values()]}, TOKENS_VERSION
        )
        atomic_write(self.path, (json.dumps(body, indent=2) + "\n").encode(), mode=0o600)

    def create(
        self,
        scope: str,
        requester: str | None = None,
        expires: str | None = None,
        transcripts: Sequence[Path] = (),
    ) -> tuple[TokenRecord, str]:
        """A new token: its record and the token itself (shown once, never stored).

        ``transcripts``: for a requester's runtime token, the folders its hooks' transcripts live in."""
        if scope not in SCOPES:
            raise InvalidArgument(f"unknown scope {scope!r}; scopes: {', '.join(SCOPES)}")
        if requester is not None and not AUDIENCE_NAME.match(requester):
            raise InvalidArgument("a requester name is 1-64 letters, digits, '.', '_', '@' or '-'")
        if transcripts and (scope != "runtime" or requester is None):
            raise InvalidArgument("--transcripts is for a runtime token with a --requester")
        folders = tuple(str(Path(t).expanduser().resolve()) for t in transcripts)
        missing = [f for f in folders if not Path(f).is_dir()]
        if missing:
            raise InvalidArgument(f"not a folder: {', '.join(missing)}")
        now = datetime.now(UTC)
        until = (now + parse_duration(expires)).isoformat() if expires else None
        token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        record = TokenRecord(token_id, scope, requester, now.isoformat(), until, None, self._digest(secret), folders)
        with self._changing() as records:
            records[token_id] = record
        return record, f"{PREFIX}_{token_id}_{secret}"

    def list(self) -> list[TokenRecord]:
        return sorted(self._load().values(), key=lambda r: r.created)

    def revoke(self, token_id: str) -> TokenRecord:
        with self._changing() as records:
            record = records.pop(token_id, None)
            if record is None:
                raise NotFound(f"no token {token_id!r}")
        return record

    def verify(self, token: str) -> TokenRecord | None:
        """The token's record if it is a live token of this store, else None (constant-time comparison)."""
        match = _TOKEN.match(token.strip())
        if not match:
            return None
        records = self._load()
        record = records.get(match.group(1))
        expected = record.digest if record else self._digest("no such token")
        if not hmac.compare_digest(self._digest(match.group(2)), expected) or record is None:
            return None
        now = datetime.now(UTC)
        if record.expired(now):
            return None
        last = datetime.fromisoformat(record.last_used) if record.last_used else None
        if last is None or now - last >= LAST_USED_EVERY:
            with self._changing() as fresh:
                if record.id in fresh:
                    fresh[record.id] = TokenRecord(**{**asdict(fresh[record.id]), "last_used": now.isoformat()})
        return record


def identify(owner_token: str, tokens: TokenStore, authorization: str | None) -> Principal | None:
    """The principal behind an ``Authorization: Bearer`` value, or None when it names nobody we know."""
    scheme, _, given = (authorization or "").partition(" ")
    given = given.strip()
    if scheme.lower() != "bearer" or not given:
        return None
    if hmac.compare_digest(given.encode(), owner_token.encode()):
        return OWNER_PRINCIPAL
    record = tokens.verify(given)
    if record is None:
        return None
    return Principal(record.scope, record.requester, record.id, record.transcripts)
