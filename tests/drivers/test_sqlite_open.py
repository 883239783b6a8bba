"""Opening a SQLite file while another process holds it: rota waits its busy timeout."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path

import rota


def _file_held_by_a_writer(path: Path, seconds: float) -> threading.Thread:
    """A file in the old rollback-journal mode, with a write transaction open for a while:
    what a second process sees while the first one creates the file."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE unrelated (x INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO unrelated VALUES (1)")

    def release() -> None:
        time.sleep(seconds)
        holder.execute("COMMIT")
        holder.close()

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def test_switching_a_held_file_to_wal_waits_for_the_lock(tmp_path: Path) -> None:
    # SQLite answers "database is locked" at once for the switch to WAL, without calling
    # the busy handler: rota must wait for the writer, not fail.
    path = tmp_path / "held.db"
    started = time.monotonic()  # before the holder's 0.3 s begin
    release = _file_held_by_a_writer(path, 0.3)
    with rota.App(f"sqlite:///{path}") as app:
        applied = app.migrate()
    release.join()
    assert applied == list(range(1, app.driver.latest_schema_version + 1))
    assert time.monotonic() - started >= 0.3  # it waited for the writer
    with contextlib.closing(sqlite3.connect(path)) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_lock_held_past_the_busy_timeout_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    release = _file_held_by_a_writer(path, 1.0)
    try:
        with rota.App(f"sqlite:///{path}?busy_timeout=200") as app:
            started = time.monotonic()
            try:
                app.migrate()
            except sqlite3.OperationalError as exc:
                assert "locked" in str(exc)
            else:
                raise AssertionError("migrate() returned while another writer held the file")
            # It waited about busy_timeout (the holder keeps the file for 1 s), not 0 s.
            assert time.monotonic() - started >= 0.15
    finally:
        release.join()
