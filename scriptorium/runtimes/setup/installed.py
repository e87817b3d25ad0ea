"""Setup asks the runtime before it writes: is its command on ``PATH``, and is it at least the release the
settings setup writes need (:class:`~scriptorium.runtimes.base.Requirement`)?

A runtime older than what it is given may reject more than the new entries: Claude Code before 2.1.118
rejects a whole ``settings.json`` holding an ``mcp_tool`` hook ("Found 0 total hooks"), the user's own hooks
and ``env`` with it, and says so only in its own debug output. So a missing runtime (RUNTIME_MISSING) or an
older one (RUNTIME_TOO_OLD) is refused before anything is made, with the command that installs or upgrades
it; ``setup --skip-runtime-check`` writes anyway.

The question is ``<command> --version`` (its first x.y.z), asked once, bounded by :data:`VERSION_TIMEOUT_S`:
the released CLIs answer it in well under two seconds.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

from scriptorium.errors import ReasonCode, RuntimeUnready
from scriptorium.runtimes.base import Requirement

VERSION_TIMEOUT_S = 15.0
"""How long ``<command> --version`` may take (a hung CLI is killed, with its children, and refused)."""
_VERSION = re.compile(r"(?<![\d.])(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class Found:
    """The runtime setup found: its executable and the version it answered."""

    executable: str
    version: tuple[int, int, int]

    @property
    def text(self) -> str:
        return dotted(self.version)


def dotted(version: tuple[int, int, int]) -> str:
    return ".".join(str(part) for part in version)


def parse_version(answer: str) -> tuple[int, int, int] | None:
    """The first x.y.z in a ``--version`` answer (``2.1.332 (Claude Code)``, ``codex-cli 0.171.0``)."""
    match = _VERSION.search(answer)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def check(requirement: Requirement, command: str | None = None, timeout: float | None = None) -> Found:
    """The runtime's executable (``command``, a name on ``PATH`` or a path; default the requirement's) and
    its version, when it is at least the minimum; :class:`~scriptorium.errors.RuntimeUnready` otherwise."""
    name = command or requirement.command
    install = f"install it: `{requirement.install}` ({requirement.product} {dotted(requirement.minimum)} or later)"
    executable = shutil.which(name)
    if executable is None:
        raise RuntimeUnready(
            f"{requirement.product} is not installed: no `{name}` on PATH; nothing was changed",
            reason=ReasonCode.RUNTIME_MISSING,
            guidance=f"{install}, then run setup again (or --skip-runtime-check to write the settings anyway)",
        )
    answer = _ask_version(executable, VERSION_TIMEOUT_S if timeout is None else timeout, install)
    version = parse_version(answer)
    if version is None:
        raise RuntimeUnready(
            f"`{executable} --version` answered no version ({_first_line(answer)!r}); nothing was changed",
            reason=ReasonCode.RUNTIME_MISSING,
            guidance=f"check that `{name}` is {requirement.product}; {install}",
        )
    if version < requirement.minimum:
        raise RuntimeUnready(
            f"{requirement.product} {dotted(version)} ({executable}) is older than {dotted(requirement.minimum)}, "
            f"{requirement.needs}; nothing was changed",
            reason=ReasonCode.RUNTIME_TOO_OLD,
            guidance=f"upgrade it: `{requirement.install}`, then run setup again "
            "(or --skip-runtime-check to write the settings anyway)",
        )
    return Found(executable, version)


def _ask_version(executable: str, timeout: float, install: str) -> str:
    """What ``<executable> --version`` printed (stdout, else stderr), killed with everything it started once
    ``timeout`` passes (a Node CLI's launcher may keep the pipes open in a child)."""
    import contextlib
    import os
    import signal
    import subprocess

    try:
        proc = subprocess.Popen(
            [executable, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise RuntimeUnready(
            f"cannot run `{executable} --version`: {exc}; nothing was changed",
            reason=ReasonCode.RUNTIME_MISSING,
            guidance=install,
        ) from exc
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=5)
        raise RuntimeUnready(
            f"`{executable} --version` did not answer within {timeout:g} s; nothing was changed",
            reason=ReasonCode.RUNTIME_MISSING,
            guidance=f"check that `{executable} --version` runs in a terminal; {install}",
        ) from None
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeUnready(
            f"`{executable} --version` failed (exit {proc.returncode}): {_first_line(stderr or stdout)!r}; "
            "nothing was changed",
            reason=ReasonCode.RUNTIME_MISSING,
            guidance=f"run `{executable} --version` in a terminal to see why; {install}",
        )
    return stdout if stdout.strip() else stderr


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]
