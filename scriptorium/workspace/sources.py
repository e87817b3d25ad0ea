"""The append-only source archive: conversation text that records cite.

One file per source, at a path derived from its identity
(``sources/<provider>/<thread>/<message>.md``). A file's bytes are a pure
function of the message, so archiving the same batch twice is byte-identical;
an existing file is never overwritten with different bytes. Files are made
read-only (0444) once written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from scriptorium.errors import ReasonCode, ValidationRejected
from scriptorium.fsutil import fsync_dir
from scriptorium.workspace.paths import source_identity_from_path, source_path

Trust = Literal["trusted", "pending"]
TRUST_STATES: tuple[Trust, ...] = ("trusted", "pending")
_HEADER_KEYS = ("source", "role", "time", "trust")
SOURCE_FILE_MODE = 0o444


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One archived conversation message."""

    provider: str
    thread: str
    message: str
    role: str
    time: str
    text: str
    trust: Trust = "trusted"

    @property
    def identity(self) -> str:
        return f"{self.provider}/{self.thread}/{self.message}"

    @property
    def path(self) -> str:
        return source_path(self.provider, self.thread, self.message)


def _invalid(message: str, path: str = "") -> ValidationRejected:
    return ValidationRejected(
        message,
        reason=ReasonCode.INVALID_SOURCE,
        guidance="Cite only sources that exist in the archive, as provider/thread/message.",
        path=path,
    )


def render_source(msg: SourceMessage) -> bytes:
    """The archive bytes of a message: JSON-valued front matter, an anchor, the text."""
    for name in ("provider", "thread", "message"):
        if not getattr(msg, name):
            raise _invalid(f"source {name} must be non-empty")
    if msg.trust not in TRUST_STATES:
        raise _invalid(f"unknown trust state {msg.trust!r}")
    header = {"source": msg.identity, "role": msg.role, "time": msg.time, "trust": msg.trust}
    lines = ["---", *(f"{key}: {json.dumps(header[key], ensure_ascii=False)}" for key in _HEADER_KEYS)]
    lines += ["---", "", f'<a id="source-{msg.message}"></a>', "", msg.text.rstrip("\n"), ""]
    return "\n".join(lines).encode("utf-8")


def parse_source(path: str, data: bytes) -> SourceMessage:
    """Read an archive file back; raises ValidationRejected(INVALID_SOURCE) if malformed."""
    identity = source_identity_from_path(path)
    if identity is None:
        raise _invalid("not an archive path", path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid("source file is not UTF-8", path) from exc
    lines = text.split("\n")
    if len(lines) < 10 or lines[0] != "---" or lines[5] != "---":
        raise _invalid("source file has no front matter", path)
    header: dict[str, str] = {}
    for line in lines[1:5]:
        key, sep, value = line.partition(": ")
        try:
            header[key] = json.loads(value) if sep else ""
        except json.JSONDecodeError as exc:
            raise _invalid(f"bad front matter line {line!r}", path) from exc
    if header.get("source") != "/".join(identity) or header.get("trust") not in TRUST_STATES:
        raise _invalid("front matter does not match the archive path", path)
    body = "\n".join(lines[9:]).rstrip("\n")
    trust: Trust = "trusted" if header["trust"] == "trusted" else "pending"
    return SourceMessage(*identity, role=header.get("role", ""), time=header.get("time", ""), text=body, trust=trust)


class SourceArchive:
    """The ``sources/`` folder of one workspace."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def file(self, path: str) -> Path:
        return self.root / path

    def exists(self, path: str) -> bool:
        return os.path.isfile(os.path.join(self.root, path))  # no Path objects: a pass asks once per citation

    def read(self, path: str) -> SourceMessage:
        try:
            data = (self.root / path).read_bytes()
        except FileNotFoundError as exc:
            raise _invalid(f"no archived source at {path}", path) from exc
        return parse_source(path, data)

    def archive(self, messages: Iterable[SourceMessage]) -> list[str]:
        """Write each message's file unless identical bytes are there; return their paths.

        Raises ValidationRejected(INVALID_SOURCE) if a path already holds
        different bytes: the archive is append-only.
        """
        paths: list[str] = []
        pending: list[tuple[int, Path, Path]] = []
        try:
            for msg in messages:
                rel = msg.path
                data = render_source(msg)
                target = self.root / rel
                if target.exists():
                    if target.read_bytes() != data:
                        raise _invalid(f"source {msg.identity} is already archived with different content", rel)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, SOURCE_FILE_MODE)
                    pending.append((fd, tmp, target))
                    os.write(fd, data)
                paths.append(rel)
            # fsync after all writes: one journal commit covers the batch instead of one per file.
            for fd, _tmp, _target in pending:
                os.fsync(fd)
            for _fd, tmp, target in pending:
                os.replace(tmp, target)
        finally:
            for fd, tmp, _target in pending:
                os.close(fd)
                tmp.unlink(missing_ok=True)
        for directory in {target.parent for _fd, _tmp, target in pending}:
            fsync_dir(directory)
        return paths
