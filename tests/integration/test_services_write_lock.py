"""On SQLite a write transaction takes the file's one write lock, and every other writer
(a busy drain's claims and completions) queues behind it, even when it changes nothing.
So a leader's pass with nothing to write only reads: with another connection holding the
write lock, the stager, the expirer, the batch TTL prune and cron return at once instead
of waiting out the busy timeout (#16: a cron schedule slowed a plain queue's drain by 9%)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import rota
from rota.batches.store import BatchStore
from rota.maintenance.stager import Stager
from rota.ops.expirer import Expirer
from rota.schedules.service import CronService

BUSY_MS = 1500


@pytest.fixture
def app(tmp_path: Path) -> Iterator[rota.App]:
    app = rota.App(f"sqlite:///{tmp_path / 'lock.db'}?busy_timeout={BUSY_MS}")

    @app.task(name="report", queue="reports")
    def report() -> None:
        return None

    # Stored by migrate(); its next tick is months away, so a pass now starts nothing.
    app.schedules.add(report, "0 0 1 1 *", name="yearly")
    app.migrate()
    yield app
    app.close()


def _held_write_lock(app: rota.App) -> sqlite3.Connection:
    path = app.driver.database.path  # type: ignore[attr-defined]  # SQLite only
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # what any writer (a worker's claim) holds for a moment
    return other


def _quick(call: Callable[[], object]) -> object:
    started = time.monotonic()
    result = call()
    assert time.monotonic() - started < BUSY_MS / 1000 / 2, "it waited for the write lock"
    return result


def test_passes_with_nothing_to_write_do_not_wait_for_the_write_lock(app: rota.App) -> None:
    stager, expirer = Stager(app.driver, 1.0), Expirer(app.driver, 1.0)
    stager.rests = expirer.rests = True  # as a worker sets them on SQLite
    cron = CronService(app.driver, 1.0)
    other = _held_write_lock(app)
    try:
        assert _quick(stager.pass_once) == (None, stager.rest)
        assert _quick(expirer.pass_once) == (None, expirer.rest)
        assert _quick(lambda: BatchStore(app.driver).prune_expired(100)) == 0
        report = _quick(cron.run_once)
        assert report == type(report)()  # nothing started, pruned or noted: nothing written
    finally:
        other.rollback()
        other.close()


def test_a_pass_with_work_still_writes_it(app: rota.App) -> None:
    """The read only decides whether to write: work that is due is written as before."""
    task = app.get_task("report")
    job = task.enqueue(delay=0.01)
    time.sleep(0.05)
    stager = Stager(app.driver, 1.0)
    stager.rests = True
    report, rest = stager.pass_once()
    assert getattr(report, "staged", None) == 1 and rest is None
    got = app.get_job(job.id)
    assert got is not None and got.state is rota.JobState.AVAILABLE
