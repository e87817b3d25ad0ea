"""The storage quota's ledger (:mod:`scriptorium.access.quota`): per requester and day, shared by processes,
bounded in size, never counting the owner. Over real HTTP: tests/security/test_quota.py."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from scriptorium.access.quota import StorageQuota
from scriptorium.audience import OWNER_PRINCIPAL, Principal
from scriptorium.errors import QuotaExceeded, ReasonCode

BOB = Principal("write", "bob", "0123456789ab")
ALICE = Principal("write", "alice", "ba9876543210")


def test_a_day_is_counted_then_refused_then_started_again(tmp_path: Path) -> None:
    day = ["2026-11-21"]
    quota = StorageQuota(tmp_path / "quota", "write", 1000, clock=lambda: day[0])
    assert quota.charge(BOB, 600) is not None and quota.used(BOB) == 600
    with pytest.raises(QuotaExceeded) as refused:
        quota.charge(BOB, 401)
    assert refused.value.reason is ReasonCode.QUOTA_EXCEEDED and "600" in refused.value.message
    assert quota.used(BOB) == 600, "a refused request counts nothing"
    quota.charge(BOB, 400)  # exactly the limit
    assert quota.charge(ALICE, 1000) is not None, "each requester has its own"
    day[0] = "2026-11-22"
    assert quota.used(BOB) == 0
    quota.charge(BOB, 1000)


def test_the_ledger_stays_one_small_file_per_requester(tmp_path: Path) -> None:
    days = iter(f"2026-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 29))
    today = ["2026-01-01"]
    quota = StorageQuota(tmp_path / "quota", "write", 10**9, clock=lambda: today[0])
    for _ in range(300):  # 300 days, several requests each
        today[0] = next(days)
        for _ in range(3):
            quota.charge(BOB, 12345)
    entries = sorted(p.name for p in (tmp_path / "quota").iterdir() if p.suffix == ".json")
    assert entries == ["write.bob.json"]
    assert (tmp_path / "quota" / "write.bob.json").stat().st_size < 64


def test_the_owner_and_other_scopes_are_never_counted(tmp_path: Path) -> None:
    quota = StorageQuota(tmp_path / "quota", "write", 10)
    for principal in (OWNER_PRINCIPAL, Principal("propose", "bob"), Principal("runtime", "bob")):
        assert quota.charge(principal, 10**9) is None
    assert not (tmp_path / "quota").exists() or not any((tmp_path / "quota").glob("*.json"))
    assert StorageQuota(tmp_path / "off", "write", 0).charge(BOB, 10**12) is None, "0: no quota"


def test_a_token_without_a_requester_is_counted_by_its_id(tmp_path: Path) -> None:
    quota = StorageQuota(tmp_path / "quota", "runtime", 100)
    quota.charge(Principal("runtime", None, "aaaaaaaaaaaa"), 100)
    quota.charge(Principal("runtime", None, "bbbbbbbbbbbb"), 100)
    assert sorted(p.name for p in (tmp_path / "quota").glob("*.json")) == [
        "runtime.token-aaaaaaaaaaaa.json",
        "runtime.token-bbbbbbbbbbbb.json",
    ]


def test_a_refund_takes_back_one_charge(tmp_path: Path) -> None:
    quota = StorageQuota(tmp_path / "quota", "write", 1000)
    kept, failed = quota.charge(BOB, 300), quota.charge(BOB, 500)
    quota.refund(failed)
    assert kept is not None and quota.used(BOB) == 300


def _spend(folder: str, tries: int, out: multiprocessing.Queue[int]) -> None:
    quota = StorageQuota(Path(folder), "write", 2000)
    granted = 0
    for _ in range(tries):
        try:
            quota.charge(BOB, 10)
            granted += 1
        except QuotaExceeded:
            pass
    out.put(granted)


def test_processes_share_one_count(tmp_path: Path) -> None:
    """Four processes charging at once grant exactly the limit between them: none is lost, none doubled."""
    context = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue[int] = context.Queue()
    workers = [context.Process(target=_spend, args=(str(tmp_path / "quota"), 100, out)) for _ in range(4)]
    for worker in workers:
        worker.start()
    granted = sum(out.get(timeout=120) for _ in workers)
    for worker in workers:
        worker.join(60)
    assert granted == 200
    assert StorageQuota(tmp_path / "quota", "write", 2000).used(BOB) == 2000
