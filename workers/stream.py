"""``memory.ingest_ended`` on a Redis Stream, with a local outbox so no result is lost.

Results are published after they are durable in the writer history. If Redis
refuses, the result is appended to ``.scriptorium/outbox.jsonl`` and
republished by the next task or sweep (at-least-once: consumers dedupe by
``result_id``). Trimming never drops an entry a consumer group has not
acknowledged: it cuts below the oldest pending or undelivered entry.
"""

from __future__ import annotations

import os
from pathlib import Path

import redis
import structlog
from redis.exceptions import RedisError, ResponseError

from scriptorium.fsutil import atomic_write
from scriptorium.schemas.events import IngestEnded

log = structlog.get_logger(__name__)
OUTBOX = "outbox.jsonl"
KEEP_WITHOUT_GROUPS = 10_000
"""With no consumer group yet, keep about this many entries."""


class ResultStream:
    def __init__(self, client: redis.Redis, key: str) -> None:
        self.client = client
        self.key = key

    def publish(self, result: IngestEnded, runtime_dir: Path) -> bool:
        """XADD the result (flushing the outbox first); on failure keep it in the outbox."""
        outbox = runtime_dir / OUTBOX
        payload = result.model_dump_json()
        try:
            self.flush(outbox)
            self.client.xadd(self.key, {"payload": payload})
        except RedisError as exc:
            log.warning("stream.publish_failed", error=str(exc), result_id=result.result_id)
            outbox.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(outbox, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (payload + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            return False
        return True

    def flush(self, outbox: Path) -> int:
        """Publish what an earlier failure left in the outbox. Raises RedisError if Redis is down."""
        if not outbox.exists():
            return 0
        lines = [line for line in outbox.read_text().splitlines() if line.strip()]
        for line in lines:
            self.client.xadd(self.key, {"payload": line})
        atomic_write(outbox, b"")
        return len(lines)

    def trim(self) -> None:
        """Drop only entries every consumer group has acknowledged."""
        try:
            groups = self.client.xinfo_groups(self.key)
        except ResponseError:
            return  # no stream yet
        if not groups:
            self.client.xtrim(self.key, maxlen=KEEP_WITHOUT_GROUPS, approximate=True)
            return
        floor: str | None = None
        for group in groups:
            name = group["name"]
            pending = self.client.xpending(self.key, name)
            candidate = pending["min"] if pending and pending.get("pending") else _next_id(group["last-delivered-id"])
            candidate = candidate.decode() if isinstance(candidate, bytes) else str(candidate)
            if floor is None or _id_key(candidate) < _id_key(floor):
                floor = candidate
        if floor is not None:
            self.client.xtrim(self.key, minid=floor, approximate=False)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def _next_id(entry_id: bytes | str) -> str:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, seq = _id_key(text)
    return f"{ms}-{seq + 1}"
