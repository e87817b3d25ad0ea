"""A process that opens the session store twice keeps SQLite's locks: no other process takes itself for the
last connection and deletes the WAL under the first one (the hook daemon, `serve` and workers all open
several stores at once)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scriptorium.sessions.sqlite import SQLiteSessionStore


def test_a_second_store_in_the_same_process_keeps_the_first_ones_locks(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    first = SQLiteSessionStore(path)
    try:
        first.list_sessions()
        SQLiteSessionStore(path).close()  # another store opened and closed beside it, as a thread would
        other = (
            "import sqlite3, sys\n"
            "db = sqlite3.connect(sys.argv[1])\n"
            "db.execute('select count(*) from sqlite_master').fetchall()\n"
            "db.close()\n"
        )
        subprocess.run([sys.executable, "-c", other, str(path)], check=True, timeout=60)
        assert {p.name for p in tmp_path.iterdir()} == {"sessions.db", "sessions.db-wal", "sessions.db-shm"}, (
            "another process deleted the WAL of a database this one still has open"
        )
        first.list_sessions()
    finally:
        first.close()
