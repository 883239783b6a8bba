"""#23 on PostgreSQL: a pass of every periodic service of a worker (the engine's and the
features') reads a bounded number of rota_jobs rows beside 200k finished jobs, and never
scans the table, up to the plan PostgreSQL caches: psycopg prepares a statement on its
sixth run, and PostgreSQL may switch a prepared statement to its generic plan from its
sixth execution on, the eleventh call. The features have work in flight (a schedule's
runs, workflows, sagas and a batch whose jobs ended), and the statistics are either
fresh or were taken while the 200k jobs still waited (as right after a drain). The SQLite
side is tests/drivers/test_service_plans_sqlite.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import rota
from rota.maintenance.counts import CountFolder
from rota.sagas import SagaStatus
from tests.drivers.plans import (
    Table,
    assert_bounded,
    finish_after_statistics,
    freeze_statistics,
    log_plans,
    watched,
)
from tests.helpers import fast_settings

FINISHED = 200_000
RUNNING = 300
# A pass over the live jobs reads hundreds of rows; one over the finished ones, 200k.
MAX_ROWS_READ = 5_000


FEATURE_QUEUES = ("flows", "sagas", "items")
IN_FLIGHT = 5  # workflows, sagas, and the batch's parallelism


def _app(url: str, pool_size: int = 4) -> rota.App:
    return _build(url, pool_size)[0]


def _build(url: str, pool_size: int = 4) -> tuple[rota.App, rota.Workflow]:
    app = rota.App(url, pool_size=pool_size)

    @app.cron("* * * * *", name="every-minute", successful_history_limit=2)
    @app.task(name="shop.tick", queue="cron")
    def tick() -> None:
        return None

    @app.task(name="shop.extract", queue="flows")
    def extract(day: str) -> int:
        return 1

    @app.task(name="shop.load", queue="flows")
    def load(extract: int | None = None) -> None:
        return None

    flow = rota.Workflow("nightly")
    flow.step(load, after=flow.step(extract))
    app.workflows.register(flow)

    saga = rota.Saga("order", queue="sagas")

    @saga.step
    def reserve(data: dict[str, Any]) -> dict[str, Any]:
        return {"reserved": True}

    @reserve.compensate
    def release(data: dict[str, Any]) -> None:
        return None

    @saga.step
    def charge(data: dict[str, Any]) -> dict[str, Any]:
        return {"charged": True}

    app.sagas.register(saga)

    @app.task(name="shop.item", queue="items")
    def item(n: int) -> None:
        return None

    return app, flow


def _put_features_in_flight(url: str) -> None:
    """Workflows, sagas and a batch whose current jobs have ended (as a worker on their
    queues would have left them) without their services having moved them on yet: each
    service's next pass has work to do."""
    app, flow = _build(url)
    with app:
        for i in range(IN_FLIGHT):
            app.workflows.start(flow, args={"day": f"d{i}"}, key=f"w{i}")
            app.sagas.start("order", key=f"order-{i}", data={"order": i})
        app.batches.create("shop.item", items=[{"n": i} for i in range(50)], parallelism=IN_FLIGHT)


@pytest.fixture(params=["analyzed", "stale", "never"])
def table(pg_url: str, request: pytest.FixtureRequest) -> Iterator[Table]:
    """200k finished jobs beside a schedule with a few finished runs. "analyzed": the
    statistics know the jobs are finished. "stale": they were taken while the jobs still
    waited, as right after a drain (autovacuum has not caught up), which is when the planner
    believes there is next to no finished job and may walk them all. "never": none were
    taken, as on a new installation's first burst."""
    stale, never = request.param == "stale", request.param == "never"
    with _app(pg_url) as app:
        app.migrate()  # stores the schedule too
    with psycopg.connect(pg_url, autocommit=True) as conn:
        if never:
            freeze_statistics(conn)
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, state, max_attempts, run_at, created_at,
                                   finished_at, attempted_at, history)
            SELECT 'shop.tick', 'cron',
                   CASE WHEN %s THEN 'available'
                        WHEN i %% 10 = 0 THEN 'discarded' ELSE 'completed' END, 3,
                   now() - interval '1 hour', now() - interval '1 hour',
                   now() - interval '1 minute', now() - interval '2 minutes',
                   '[{"outcome": "completed"}]'
            FROM generate_series(1, %s) AS i
            """,
            (stale, FINISHED),
        )
        if stale:
            finish_after_statistics(conn)
        # The schedule's finished runs point at finished jobs: its history prune and
        # lastSuccessfulTime have something to read.
        conn.execute(
            """
            INSERT INTO rota_schedule_runs (schedule_id, name, kind, scheduled_minute,
                                            scheduled_at, scheduled_local, scheduler,
                                            created_at, job_id)
            SELECT s.id, 'run-' || j.id, 'scheduled', j.id,
                   j.created_at, '', 'old', j.created_at, j.id
            FROM rota_schedules s, rota_jobs j
            WHERE s.name = 'every-minute' AND j.id <= 5
            """
        )
        _put_features_in_flight(pg_url)
        conn.execute(
            "UPDATE rota_jobs SET state = 'completed', attempt = 1, attempted_at = now(), "
            "finished_at = now() WHERE queue = ANY(%s) AND state = 'available'",
            (list(FEATURE_QUEUES),),
        )
        if not stale and not never:
            conn.execute("VACUUM (ANALYZE) rota_jobs")
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, state, attempt, max_attempts, run_at, worker,
                                   attempted_at, lease_token, lease_expires_at)
            SELECT 'shop.tick', 'cron', 'running', 1, 3, now(), 'w0', now(),
                   gen_random_uuid(), now() + interval '1 hour'
            FROM generate_series(1, %s)
            """,
            (RUNNING,),
        )
    with watched(pg_url, app=_app(pg_url, pool_size=1)) as watching:
        yield watching


def test_every_service_pass_is_bounded_beside_200k_finished_jobs(table: Table) -> None:
    worker = rota.Worker(table.app, fast_settings(queues={"cron": 4}))
    # The worker set its deadlines, which replaces the pool's connection: watch the new one.
    with table.app.driver.database.connection() as conn:
        log_plans(conn, table.plans)
    # The counts' first pass folds every job written since the last one: the 200k above.
    next(s for s in worker.services if isinstance(s, CountFolder)).run_once()
    names, watched_passes = [], 0
    for service in worker.services:
        names.append(service.name)
        for _ in range(11):  # the eleventh pass may run the generic plan PostgreSQL cached
            del table.plans[:]
            service.run_once()
        plans = [p for p in table.plans if "rota_jobs" in p]
        watched_passes += bool(plans)
        assert_bounded(f"a {service.name} pass", plans, MAX_ROWS_READ)
    assert len(names) >= 10, names  # the engine's services and the features'
    assert watched_passes >= 5  # the plans were seen: rescues, staging, pruning, cron...
    # The features' passes had work and did it: each workflow's second step and the
    # batch's next items were enqueued, and the supervisor failed each saga's step (its job
    # completed without moving the saga on).
    waiting = {
        (job.queue, job.task)
        for job in table.app.list_jobs(state="available", limit=1_000)
        if job.queue in FEATURE_QUEUES
    }
    assert {("flows", "shop.load"), ("items", "shop.item")} <= waiting, waiting
    sagas = [table.app.sagas.get(f"order-{i}") for i in range(IN_FLIGHT)]
    assert all(saga.status is not SagaStatus.RUNNING for saga in sagas), sagas
