"""Git objects packed as they accumulate (:mod:`scriptorium.workspace.packing`), against real git: an install
past the threshold starts a detached ``git repack`` and returns; one repack of a repository runs at a time,
whichever processes set it off; readers opened before a repack read every object after it, and so does git."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from pathlib import Path

import pytest

from scriptorium.workspace import MemoryWorkspace, SourceMessage, TopicChange, WorkspaceConfig, gitstore, packing
from scriptorium.workspace.gitstore import GitStore

REAL_GIT = shutil.which("git")


def exact_loose(objects: Path, folders: int = 1) -> int:
    """Every loose object, counted: the tests' stand-in for :func:`packing.loose_estimate` (whose arguments
    it takes), which is exact only on average (test_the_estimate_is_git_s_one_folder_sample). A detached
    repack may prune a folder while it is counted (as the estimate does, a folder gone counts nothing)."""
    found = 0
    for folder in objects.iterdir():
        if len(folder.name) != 2:
            continue
        try:
            found += sum(1 for name in os.listdir(folder) if len(name) == 38)
        except (FileNotFoundError, NotADirectoryError):
            continue
    return found


def write_loose(git_dir: Path, count: int, prefix: bytes = b"unreferenced") -> None:
    """``count`` loose blobs written as git writes them (as another tool, or an earlier release, left them):
    the workspace itself writes packs."""
    for n in range(count):
        data = b"%s %d" % (prefix, n)
        raw = b"blob %d\0" % len(data) + data
        sha = hashlib.sha1(raw).hexdigest()
        folder = git_dir / "objects" / sha[:2]
        folder.mkdir(exist_ok=True)
        (folder / sha[2:]).write_bytes(zlib.compress(raw))


def install_passes(ws: MemoryWorkspace, first: int, count: int) -> None:
    """``count`` write passes like the embedded writer's: a few sources archived, a topic citing them."""
    for n in range(first, first + count):
        thread = f"t{n // 5}"
        messages = [
            SourceMessage("test", thread, f"m{n}-{k}", "user", "2026-11-01T00:00:00Z", f"pass {n} said {k} " * 20)
            for k in range(4)
        ]
        with ws.lock():
            paths = ws.archive_sources(messages)
        topic = f"topics/threads/{thread}.md"
        text = ws.read_topic(topic) if topic in ws.snapshot().topic_shas else f"# Thread {thread}\n"
        text += f"\n2026-11-01: Fact {n} [k](test/{thread}/m{n}-0).\n"
        ws.transact(lambda stage, t=topic, x=text: stage.write(t, x), message=f"pass {n}", appended_sources=paths)


def every_object(git_dir: Path) -> list[tuple[str, str]]:
    out = subprocess.run(
        ["git", f"--git-dir={git_dir}", "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return [(sha, kind) for sha, kind in (line.split() for line in out.splitlines())]


def read_everything(store: GitStore) -> int:
    """Read every object of the repository through ``store`` (bytes checked against git's), and every
    commit's whole tree; the number of objects read."""
    objects = every_object(store.git_dir)
    for sha, kind in objects:
        data = store._read(sha, kind.encode())
        assert hashlib.sha1(b"%s %d\0" % (kind.encode(), len(data)) + data).hexdigest() == sha
    commits = [sha for sha, kind in objects if kind == "commit"]
    for commit in commits:
        store.list_files(store.commit_tree(commit))
    return len(objects)


def fsck(git_dir: Path) -> None:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "fsck", "--full", "--strict", "--no-dangling"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "error" not in done.stderr, done.stderr


def wait_for_repack(git_dir: Path) -> None:
    with packing.holding_lock(git_dir):
        pass


@pytest.fixture
def slow_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``git`` on the PATH is a wrapper: a ``repack`` appends its process ID to the returned file and sleeps
    ``REPACK_DELAY`` seconds first (then fails, saying ``REPACK_FAIL``, when that is set, or warns, saying
    ``REPACK_WARN``, and goes on), and ``REPACK_DELAY_AFTER`` seconds after git's repack; every other command
    is git's at once."""
    assert REAL_GIT is not None
    folder = tmp_path / "bin"
    folder.mkdir()
    marker = tmp_path / "repacks"
    wrapper = folder / "git"
    wrapper.write_text(
        textwrap.dedent(
            f"""\
            #!/bin/sh
            for arg in "$@"; do
                if [ "$arg" = repack ]; then
                    echo $$ >> "{marker}"
                    sleep "${{REPACK_DELAY:-0}}"
                    if [ -n "$REPACK_FAIL" ]; then
                        echo "fatal: $REPACK_FAIL" >&2
                        exit 128
                    fi
                    if [ -n "$REPACK_WARN" ]; then
                        echo "warning: $REPACK_WARN" >&2
                    fi
                    if [ -n "$REPACK_DELAY_AFTER" ]; then
                        "{REAL_GIT}" "$@"
                        status=$?
                        sleep "$REPACK_DELAY_AFTER"
                        exit $status
                    fi
                    break
                fi
            done
            exec "{REAL_GIT}" "$@"
            """
        )
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return marker


def test_a_workspace_that_installs_many_transactions_ends_with_its_objects_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each install writes its objects as one pack, never a loose file each; the install that passes the pack
    limit sets off the repack, which rolls the small packs up. Each install here waits for a repack it set off
    (installs made while one runs add packs it does not see, as many as the machine's load lets through, and
    start no second one: test_the_install_returns_before_the_repack_it_started_finishes; the first install
    past the limit after it ends rolls them up, as here)."""
    monkeypatch.setattr(packing, "PACK_LIMIT", 8)
    ws = MemoryWorkspace.init(tmp_path / "memory", WorkspaceConfig(repack_loose_objects=120))
    git_dir = ws.root / ".git"
    created: list[int] = []
    try:
        for n in range(40):
            install_passes(ws, n, 1)
            wait_for_repack(git_dir)
            created.append(packing.pack_count(git_dir / "objects"))
        total = len(every_object(git_dir))
        state = packing.pack_state(git_dir)
        assert total > 40 * 5
        assert exact_loose(git_dir / "objects") == 0  # nothing written loose
        assert state.packed_objects >= total
        assert max(created) <= packing.PACK_LIMIT, created  # rolled up by the install that passed the limit
        assert any(later < earlier for earlier, later in itertools.pairwise(created)), created
        assert state.packs == created[-1] <= packing.PACK_LIMIT, state
        assert read_everything(ws.git) == total  # the workspace's own reader, open throughout
        fresh = GitStore(git_dir)
        try:
            assert read_everything(fresh) == total
        finally:
            fresh.close()
        fsck(git_dir)
        assert "Fact 39" in ws.read_topic("topics/threads/t7.md")
    finally:
        ws.close()


def test_objects_are_held_until_synced_then_written_as_one_durable_pack(tmp_path: Path) -> None:
    """What a thread writes is read back from memory before :meth:`GitStore.sync_objects`, and no file
    appears; the sync writes one pack with its index that git reads; what another thread holds is its own."""
    git = GitStore.create(tmp_path / "repo.git")
    packs = tmp_path / "repo.git" / "objects" / "pack"
    before = sorted(packs.iterdir())
    blob = git.write_blob(b"held")
    tree = git.write_tree({"a.md": (gitstore.MODE_FILE, blob)})
    assert git.read_blob(blob) == b"held" and git.tree_entries(tree) == {"a.md": (gitstore.MODE_FILE, blob)}
    seen: list[object] = []

    def read_elsewhere() -> None:
        try:
            seen.append(git.read_blob(blob))
        except Exception as exc:
            seen.append(exc)

    other = threading.Thread(target=read_elsewhere)
    other.start()
    other.join()
    assert isinstance(seen[0], Exception), "another thread does not see this thread's held objects"
    assert sorted(packs.iterdir()) == before and exact_loose(tmp_path / "repo.git" / "objects") == 0
    git.sync_objects()
    new = sorted(set(packs.iterdir()) - set(before))
    assert [p.suffix for p in new] == [".idx", ".pack"]
    shown = subprocess.run(
        ["git", f"--git-dir={tmp_path / 'repo.git'}", "cat-file", "-p", blob], check=True, capture_output=True
    )
    assert shown.stdout == b"held"
    fsck(tmp_path / "repo.git")
    git.close()


def test_a_long_write_goes_into_packs_as_it_goes_its_memory_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer of many objects (a history purge) holds at most the pending limit: past it, a pack."""
    monkeypatch.setattr(gitstore, "PENDING_LIMIT", 10_000)
    git = GitStore.create(tmp_path / "repo.git")
    packs = tmp_path / "repo.git" / "objects" / "pack"
    count = len(list(packs.glob("*.pack")))
    shas = [git.write_blob(b"%05d" % n * 100) for n in range(100)]  # 500 bytes each: 50 kB in all
    assert len(list(packs.glob("*.pack"))) - count >= 4
    assert sum(len(data) for _kind, data in git._pending().values()) <= 10_000
    git.sync_objects()
    assert all(git.read_blob(sha) == b"%05d" % n * 100 for n, sha in enumerate(shas))
    fsck(tmp_path / "repo.git")
    git.close()


def _mapped_deleted_packs(git_dir: Path) -> list[str]:
    """This process's mappings of ``git_dir``'s removed packs (another test's repository, removed with its
    folder while gitdb's shared map cache held a window of it, is not this test's)."""
    with open("/proc/self/maps") as maps:
        return [
            line
            for line in maps
            if f"{git_dir}/" in line and re.search(r"pack-[0-9a-f]+\.(pack|idx) \(deleted\)", line)
        ]


def test_a_reader_opened_before_a_repack_reads_every_object_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory", WorkspaceConfig(repack_loose_objects=0))
    git_dir = ws.root / ".git"
    try:
        install_passes(ws, 0, 6)
        reader = GitStore(git_dir)
        before = read_everything(reader)  # every object found loose, and remembered so
        packing.repack_now(git_dir)
        assert exact_loose(git_dir / "objects") == 0
        assert read_everything(reader) == before
        install_passes(ws, 6, 6)  # a pack each
        packs = sorted((git_dir / "objects" / "pack").glob("*.pack"))
        assert len(packs) >= 6
        install_passes(ws, 12, 6)
        read_everything(reader)  # every pack mapped
        errors: list[BaseException] = []
        stop = threading.Event()

        def keep_reading() -> None:  # a reader reading while git packs and removes under it
            while not stop.is_set():
                try:
                    read_everything(reader)
                except BaseException as exc:
                    errors.append(exc)
                    return

        concurrent = GitStore(git_dir)
        concurrent.odb.update_cache(force=True)
        thread = threading.Thread(target=keep_reading)
        thread.start()
        try:
            packing.repack_now(git_dir)
        finally:
            stop.set()
            thread.join()
        assert [pack for pack in packs if not pack.exists()], "the small packs rolled into a new one, removed"
        assert exact_loose(git_dir / "objects") == 0
        total = len(every_object(git_dir))
        assert read_everything(reader) == total
        assert not errors, errors
        # Each reader notices the packs changed (at its first read a second later) and lets go of the
        # removed ones: their disk space is freed though the process lives on (a removed pack's small
        # index once Python's cycle collector has run, at the next look).
        assert _mapped_deleted_packs(git_dir) != []
        monkeypatch.setattr(gitstore, "PACKS_CHECK_S", 0.0)
        for store in (reader, concurrent, ws.git):
            store.read_blob(ws.git.lookup(ws.revision, "topics/threads/t0.md")[1])
        assert [line for line in _mapped_deleted_packs(git_dir) if ".pack " in line] == []
        fsck(git_dir)
        reader.close()
        concurrent.close()
    finally:
        ws.close()


def test_the_install_returns_before_the_repack_it_started_finishes(
    tmp_path: Path, slow_git: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call a REST change makes (``apply_changes``) sets the repack off and answers: the repack runs in
    a process of its own, here made to take five seconds."""
    monkeypatch.setenv("REPACK_DELAY", "5")
    # The pass's few objects land in the sampled fan-out folder now and then (their commit's time varies), so
    # the threshold sits above what two of them estimate; the 2,000 blobs below put seven there, every run.
    ws = MemoryWorkspace.init(tmp_path / "memory", WorkspaceConfig(repack_loose_objects=600))
    git_dir = ws.root / ".git"
    try:
        install_passes(ws, 0, 1)
        assert not slow_git.exists()
        write_loose(git_dir, 2000)
        assert packing.loose_estimate(git_dir / "objects") > 600
        started = time.monotonic()
        change = TopicChange("topics/a.md", "create", "# A\n\nSaid [k](test/t0/m0-0).\n")
        result = ws.apply_changes([change], message="rest")
        answered = time.monotonic() - started
        assert result.git_committed
        assert answered < 3.0, answered
        assert packing.is_repacking(git_dir)
        while not slow_git.exists() and time.monotonic() - started < 4.0:  # the wrapper's first line
            time.sleep(0.01)
        [pid] = slow_git.read_text().split()
        assert int(pid) != os.getpid() and os.getsid(int(pid)) != os.getsid(0)  # detached: its own session
        assert not ws.packer.after_install()  # running: no second one
        wait_for_repack(git_dir)
        assert time.monotonic() - started >= 5.0
        assert exact_loose(git_dir / "objects") < 20
        assert ws.read_topic("topics/a.md").startswith("# A")
        fsck(git_dir)
    finally:
        ws.close()


CHILD = """
import sys, time
from pathlib import Path
from scriptorium.workspace import packing
git_dir, at = Path(sys.argv[1]), float(sys.argv[2])
time.sleep(max(0.0, at - time.time()))
print(packing.Packer(git_dir, 1).after_install(), flush=True)
"""


def test_two_processes_setting_off_a_repack_at_once_run_one(
    tmp_path: Path, slow_git: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPACK_DELAY", "2")
    ws = MemoryWorkspace.init(tmp_path / "memory", WorkspaceConfig(repack_loose_objects=0))
    git_dir = ws.root / ".git"
    try:
        write_loose(git_dir, 2000)
        at = time.time() + 1.5
        children = [
            subprocess.Popen([sys.executable, "-c", CHILD, str(git_dir), str(at)], stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        said = sorted(child.communicate(timeout=60)[0].split()[-1] for child in children)  # the last word
        assert said == ["False", "True"]
        wait_for_repack(git_dir)
        assert len(slow_git.read_text().split()) == 1
        assert exact_loose(git_dir / "objects") == 0
        fsck(git_dir)
    finally:
        ws.close()


def test_a_repack_that_failed_is_not_started_again_at_every_install(
    tmp_path: Path, slow_git: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPACK_FAIL", "the disk is full")
    ws = MemoryWorkspace.init(tmp_path / "memory", WorkspaceConfig(repack_loose_objects=1))
    git_dir = ws.root / ".git"
    try:
        write_loose(git_dir, 2000)
        assert ws.packer.after_install()
        wait_for_repack(git_dir)
        assert "the disk is full" in (git_dir / packing.LOG_FILE).read_text()
        for _ in range(3):
            assert not ws.packer.after_install()
        assert len(slow_git.read_text().split()) == 1
        monkeypatch.setattr(packing, "RETRY_AFTER_S", 0.0)  # its time is up: the next install tries again
        monkeypatch.delenv("REPACK_FAIL")
        assert ws.packer.after_install()
        wait_for_repack(git_dir)
        assert (git_dir / packing.LOG_FILE).read_text() == ""
        assert exact_loose(git_dir / "objects") == 0
    finally:
        ws.close()


def test_the_estimate_is_git_s_one_folder_sample(tmp_path: Path) -> None:
    ws = MemoryWorkspace.init(tmp_path / "memory", WorkspaceConfig(repack_loose_objects=0))
    git_dir = ws.root / ".git"
    try:
        initial = packing.pack_state(git_dir)  # the init's packs
        write_loose(git_dir, 4000, b"object")  # fixed contents, fixed object IDs: the same sample every run
        exact = exact_loose(git_dir / "objects")
        # git's gc.auto estimate exactly (one folder: off by tens of percent, as git's is), and the status
        # figure from sixteen folders (off by a few).
        assert packing.loose_estimate(git_dir / "objects") == 256 * len(os.listdir(git_dir / "objects" / "17"))
        state = packing.pack_state(git_dir)
        assert 0.85 * exact <= state.loose_estimate <= 1.15 * exact, (state.loose_estimate, exact)
        assert (state.packs, state.packed_objects, state.repacking) == (initial.packs, initial.packed_objects, False)
        packing.repack_now(git_dir)
        state = packing.pack_state(git_dir)
        assert state.loose_estimate == 0
        on_disk = list((git_dir / "objects" / "pack").glob("*.pack"))
        assert state.packs == len(on_disk) and state.packed_objects == len(every_object(git_dir))
        assert state.packed_bytes == sum(p.stat().st_size for p in (git_dir / "objects" / "pack").glob("*.pack"))
    finally:
        ws.close()


def test_memory_status_reports_the_packed_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    script = Path(sys.executable).with_name("scriptorium")
    subprocess.run([script, "memory", "init", "--state", state], check=True, capture_output=True)
    packing.repack_now(state / "memory" / ".git")
    out = subprocess.run(
        [script, "memory", "status", "--state", state, "--json"], check=True, capture_output=True
    ).stdout
    git = json.loads(out)["git"]
    on_disk = list((state / "memory" / ".git" / "objects" / "pack").glob("*.pack"))
    assert git["packs"] == len(on_disk) >= 1 and git["packed_objects"] > 0 and git["repacking"] is False
    assert set(git) == {"loose_objects_estimate", "packs", "packed_objects", "packed_kib", "repacking"}


def test_recovery_removes_what_a_writer_killed_mid_pack_left(tmp_path: Path) -> None:
    """Killed between writing and renaming, a writer leaves temporary files; killed between the index's rename
    and the pack's, an index without its pack. The next open removes both, nothing of a live writer's."""
    ws = MemoryWorkspace.init(tmp_path / "memory")
    install_passes(ws, 0, 2)
    ws.close()
    folder = tmp_path / "memory" / ".git" / "objects" / "pack"
    kept = sorted(folder.iterdir())
    index = next(path for path in kept if path.suffix == ".idx")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    leftovers = [
        *(Path(name) for name in gitstore.temporary_pack(f"{folder}/{gitstore.PACK_TEMP}{dead}-1")),
        folder / f"pack-{'0' * 40}.idx",
    ]
    for path in leftovers:
        shutil.copyfile(index, path)
    live = Path(gitstore.temporary_pack(f"{folder}/{gitstore.PACK_TEMP}{os.getpid()}-1")[0])
    shutil.copyfile(index, live)
    ws = MemoryWorkspace(tmp_path / "memory")
    try:
        assert not any(path.exists() for path in leftovers)
        assert sorted(folder.iterdir()) == sorted([*kept, live])
        live.unlink()
        fsck(ws.root / ".git")
        assert "Fact 1" in ws.read_topic("topics/threads/t0.md")
    finally:
        ws.close()


def test_a_repack_goes_again_for_the_packs_installs_wrote_while_it_ran_and_a_warning_is_no_failure(
    tmp_path: Path, slow_git: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installs go on while the background repack runs, each writing a pack it does not see: it repacks again
    until the packs are within the limit (at most REPACK_ROUNDS runs), so a burst of installs does not leave
    them past it until the next install. What git says on a run that went well is no failure."""
    monkeypatch.setattr(packing, "PACK_LIMIT", 8)
    monkeypatch.setenv("REPACK_DELAY_AFTER", "4")  # git's repack is done; the process has not ended yet
    monkeypatch.setenv("REPACK_WARN", "this pack has no bitmap")
    ws = MemoryWorkspace.init(tmp_path / "memory", WorkspaceConfig(repack_loose_objects=10_000))
    git_dir = ws.root / ".git"
    try:
        install_passes(ws, 0, 12)  # past the limit: the repack starts
        assert packing.is_repacking(git_dir)
        time.sleep(0.5)
        install_passes(ws, 12, 10)  # after git's repack, while it runs: packs it did not see
        wait_for_repack(git_dir)
        assert len(slow_git.read_text().split()) >= 2, "the repack ran again for the packs written meanwhile"
        assert packing.pack_count(git_dir / "objects") <= packing.PACK_LIMIT
        assert (git_dir / packing.LOG_FILE).read_text() == "", "a warning on a run that went well is no failure"
        assert not packing._failed_recently(git_dir)
        fsck(git_dir)
    finally:
        ws.close()


def test_a_repack_meets_a_pack_being_written_and_goes_well(tmp_path: Path) -> None:
    """An install writes its pack and index under temporary names, then renames them into place; a ``git repack``
    running meanwhile lists the packs. It must not take the half-written files for a pack (named ``*.pack`` and
    ``*.idx`` they made it fail: "index file … is too small", and the background repack then waited a minute)."""
    ws = MemoryWorkspace.init(tmp_path / "memory", WorkspaceConfig(repack_loose_objects=0))
    git_dir = ws.root / ".git"
    try:
        install_passes(ws, 0, 3)
        folder = git_dir / "objects" / "pack"
        pack_tmp, idx_tmp = gitstore.temporary_pack(f"{folder}/{gitstore.PACK_TEMP}{os.getpid()}-7")
        Path(pack_tmp).write_bytes(b"PACK\0\0\0\2")  # as a writer holds them mid-write
        Path(idx_tmp).write_bytes(b"\377tOc")
        done = subprocess.run(["git", f"--git-dir={git_dir}", *packing.REPACK_ARGS], capture_output=True, text=True)
        assert done.returncode == 0 and done.stderr == "", done.stderr
        assert packing.pack_count(git_dir / "objects") == 1
        assert Path(pack_tmp).exists() and Path(idx_tmp).exists(), "the writer's files are left to it"
        fsck(git_dir)
    finally:
        ws.close()
