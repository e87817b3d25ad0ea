"""Staging folders: whose they are, which are orphans, and what an editor may leave in one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from scriptorium.errors import InvalidPath, ReasonCode
from scriptorium.workspace import MemoryWorkspace
from scriptorium.workspace.staging import STAGING_PREFIX, Staging, StagingSweep, pid_alive, sweep_orphans
from tests.conftest import tree_bytes


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def folder(tmp: Path, owner: str, pid: int) -> Path:
    made = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{owner}-{pid}-", dir=tmp))
    (made / "topics").mkdir()
    (made / "topics" / "a.md").write_text("copy\n")
    os.chmod(made / "topics", 0o555)  # read-only folders, as staged sources are, must go too
    return made


def test_a_sweep_removes_the_folders_of_dead_processes_and_counts_the_live_ones(tmp_path: Path) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exits; not reaped until wait()
    try:
        deadline = time.monotonic() + 30
        while _state(zombie.pid) != "Z":  # never poll(): that would reap it
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        assert not pid_alive(zombie.pid), "a zombie counts as gone"
        gone = [
            folder(tmp_path, "0123456789ab", dead_pid()),
            folder(tmp_path, "organizer", dead_pid()),
            folder(tmp_path, "0123456789ab", zombie.pid),
        ]
        kept = [folder(tmp_path, "0123456789ab", os.getpid()), folder(tmp_path, "organizer", live.pid)]
        unrelated = [tmp_path / f"{STAGING_PREFIX}notours-1-x", tmp_path / "scriptorium-other-1-"]
        for path in unrelated:
            path.mkdir()
        assert sweep_orphans(tmp_path) == StagingSweep(removed=3, live=2)
        assert not any(p.exists() for p in gone) and all(p.exists() for p in kept + unrelated)
        assert sweep_orphans(tmp_path) == StagingSweep(removed=0, live=2), "a second sweep finds nothing"
    finally:
        live.kill()
        live.wait()
        zombie.wait()


def test_memory_status_reports_what_the_open_swept(tmp_path: Path) -> None:
    state = tmp_path / "state"
    MemoryWorkspace.init(state / "memory").close()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    folder(tmp, "0123456789ab", dead_pid())
    script = Path(sys.executable).with_name("scriptorium")
    out = subprocess.run(
        [str(script), "memory", "status", "--state", str(state), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["staging_orphans_swept"] == 1 and status["staging_in_use"] == 0
    assert list(tmp.glob(f"{STAGING_PREFIX}*")) == []


def test_anything_an_editor_leaves_beside_topics_is_a_rejected_edit(tmp_path: Path) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory")
    before, revision = tree_bytes(ws.root), ws.revision

    def edit(stage: Staging) -> None:
        stage.write("topics/notes.md", "# Notes\n")
        (stage.root / "scratch").mkdir()

    with pytest.raises(InvalidPath) as caught:
        ws.transact(edit, message="an editor that kept a scratch folder")
    assert caught.value.reason == ReasonCode.INVALID_PATH and caught.value.path == "scratch"
    assert "topics/ only" in caught.value.guidance
    assert ws.revision == revision and tree_bytes(ws.root) == before
    ws.close()


SWEEP = (
    "import json, sys, time; from pathlib import Path; from scriptorium.workspace.staging import sweep_orphans; "
    "time.sleep(max(0.0, float(sys.argv[2]) - time.time())); "
    "print(json.dumps(sweep_orphans(Path(sys.argv[1])).removed))"
)


def test_sweeps_racing_for_the_same_orphans_each_remove_some_and_none_fails(tmp_path: Path) -> None:
    """Every workspace open and every worker's pool child sweeps the host's temporary folder, so two processes
    often find one orphan: each orphan is removed once, counted once, and no sweep fails for the folder the
    other took (a pass used to fail, unclassified, with FileNotFoundError from the other's removal)."""
    pid = dead_pid()
    orphans = [folder(tmp_path, "0123456789ab", pid) for _ in range(150)]
    start = str(time.time() + 3)  # the four sweep together, once each has started and imported
    sweepers = [
        subprocess.Popen(
            [sys.executable, "-c", SWEEP, str(tmp_path), start],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [proc.communicate(timeout=120) for proc in sweepers]
    assert all(proc.returncode == 0 for proc in sweepers), [err[-800:] for _out, err in results]
    assert sum(json.loads(out) for out, _err in results) == len(orphans), results
    assert not any(p.exists() for p in orphans)
    assert not list(tmp_path.glob(f"{STAGING_PREFIX}*")), "no claimed folder left behind"
