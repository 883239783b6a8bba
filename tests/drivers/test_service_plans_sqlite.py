"""#23 on SQLite: a pass of every periodic service of a worker (the leader's and every
worker's own) does a bounded amount of work beside 100k finished jobs, in a file without
statistics, as a user's is. On SQLite a pass that writes holds the one write lock: a pass
that walks the finished jobs stops every claim and completion while it runs (at 1M
finished jobs, the lease rescue took 300-470 ms and the schedules' history prune 340 ms,
every few seconds)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import rota
from rota.drivers.sqlite.database import SQLiteDatabase
from rota.maintenance.counts import CountFolder
from tests.drivers.history_sqlite import fill_history, step_counter
from tests.helpers import fast_settings

FINISHED = 100_000
# A walk over 100k rows takes hundreds of thousands of steps (the rescue's scan took
# 301,600); a pass over the live jobs, at most a few thousand (1,400 at the time of writing).
MAX_STEPS = 20_000


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[rota.Worker, list[int]]]:
    path = tmp_path_factory.mktemp("services") / "rota.db"
    steps = [0]
    connect = SQLiteDatabase.connect

    def counting(self: SQLiteDatabase) -> sqlite3.Connection:
        # Every connection the app opens counts its steps into `steps`.
        conn = connect(self)
        step_counter(conn, lambda n: steps.__setitem__(0, steps[0] + n))
        return conn

    patch = pytest.MonkeyPatch()
    patch.setattr(SQLiteDatabase, "connect", counting)
    try:
        yield from _worker(path, steps)
    finally:
        patch.undo()


def _worker(path: Path, steps: list[int]) -> Iterator[tuple[rota.Worker, list[int]]]:
    app = rota.App(f"sqlite:///{path}")

    @app.cron("* * * * *", name="every-minute", successful_history_limit=2)
    @app.task(name="shop.tick", queue="cron")
    def tick() -> None:
        return None

    app.migrate()
    fill_history(path, FINISHED)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        # The schedule's finished runs point at old finished jobs: its history prune and
        # lastSuccessfulTime have something to read.
        conn.execute(
            """
            INSERT INTO rota_schedule_runs (schedule_id, name, kind, scheduled_minute,
                                            scheduled_at, scheduled_local, scheduler,
                                            created_at, job_id)
            SELECT s.id, 'run-' || j.id, 'scheduled', j.id, j.created_at, '', 'old',
                   j.created_at, j.id
            FROM rota_schedules s, rota_jobs j
            WHERE s.name = 'every-minute' AND j.id <= 5
            """
        )
    worker = rota.Worker(app, fast_settings(queues={"live": 4}))
    # The counts' first pass folds every job written since the last one: the 100k above.
    next(s for s in worker.services if isinstance(s, CountFolder)).run_once()
    yield worker, steps
    app.close()


def test_every_service_pass_is_bounded_beside_100k_finished_jobs(
    worker: tuple[rota.Worker, list[int]],
) -> None:
    w, steps = worker
    took: dict[str, int] = {}
    for service in w.services:
        steps[0] = 0
        service.run_once()
        took[service.name] = steps[0]
    # The presence pass runs its rescue only when a worker is gone: run that rescue too,
    # for a worker whose running jobs are among the live ones.
    steps[0] = 0
    w.driver.presence.rescue(["w-1"], 100)
    took["presence rescue"] = steps[0]
    assert len(took) >= 10, took  # the engine's services and the features'
    over = {name: n for name, n in took.items() if n > MAX_STEPS}
    assert not over, f"passes beside {FINISHED:,} finished jobs, in steps: {over}"
