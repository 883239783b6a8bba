"""Writing while another process holds SQLite's write lock: rota waits for it (in short
steps, not SQLite's busy handler's sleeps of up to 100 ms), up to the busy timeout, and
leaves the connection's busy timeout as it was."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import rota

# A second process that takes the write lock, says so, and keeps it for `seconds`.
_HOLDER = textwrap.dedent(
    """
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("COMMIT")
    print("released", time.monotonic(), flush=True)
    """
)


@contextmanager
def held_by_another_process(path: Path, seconds: float) -> Iterator[subprocess.Popen[str]]:
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        yield holder
        holder.wait(timeout=30)


def _busy_timeout(app: rota.App) -> int:
    with app.driver.database.write() as session:
        return int(session.connection.execute("PRAGMA busy_timeout").fetchone()[0])


@pytest.fixture
def app(tmp_path: Path) -> Iterator[rota.App]:
    with rota.App(f"sqlite:///{tmp_path / 'held.db'}?busy_timeout=5000") as app:
        app.migrate()

        @app.task(name="noop")
        def noop() -> None:
            pass

        yield app


def test_a_write_waits_for_another_process_and_goes_ahead_soon_after(
    app: rota.App, tmp_path: Path
) -> None:
    # Held 0.34 s: SQLite's handler would try again at 0.328 s and next at 0.428 s.
    with held_by_another_process(tmp_path / "held.db", 0.34) as holder:
        started = time.monotonic()
        job = app.get_task("noop").enqueue()
        enqueued = time.monotonic()
        assert holder.stdout is not None
        released = float(holder.stdout.readline().split()[1])
    assert job.id > 0 and app.get_job(job.id) is not None
    assert enqueued - started >= 0.3  # it waited for the other process
    # It went ahead soon after the release (SQLite's handler could sleep up to 100 ms
    # more); generous, for a busy machine: what this asserts is "not a 100 ms step".
    assert enqueued - released < 0.05, enqueued - released
    assert _busy_timeout(app) == 5000  # the short steps left the setting as it was


def test_a_lock_held_past_the_busy_timeout_fails_the_write_after_the_timeout(
    tmp_path: Path,
) -> None:
    path = tmp_path / "short.db"
    with rota.App(f"sqlite:///{path}?busy_timeout=300") as app:
        app.migrate()

        @app.task(name="noop")
        def noop() -> None:
            pass

        with held_by_another_process(path, 2.0):
            started = time.monotonic()
            with pytest.raises(Exception, match="locked"):
                noop.enqueue()
            waited = time.monotonic() - started
        assert 0.25 <= waited < 1.5, waited
        assert _busy_timeout(app) == 300
        assert noop.enqueue().id > 0  # once released, writes go ahead
