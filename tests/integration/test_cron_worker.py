"""A worker with schedules, in-process on both dialects: it stores the app's schedules when
it starts, its leader-elected cron service starts due runs, and the worker runs them."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import rota
from rota.job import JobState
from rota.schedules.service import CronService
from rota.schedules.store import ScheduleStore
from tests.helpers import fast_settings, run_worker_until


def test_a_worker_stores_its_schedules_and_runs_the_due_ticks(app: rota.App) -> None:
    @app.cron("* * * * *", name="every-minute", tz="Europe/Berlin")
    def heartbeat(ctx: rota.Context) -> str:
        return f"run {ctx.job.id}"

    assert app.list_schedules() == []  # declared in code, not stored yet
    worker = rota.Worker(app, fast_settings(cron_interval=0.05))
    (cron,) = [s for s in worker.services if isinstance(s, CronService)]
    assert cron.interval == 0.05 and cron.scheduler == worker.id
    # Let the next minute have come already: the database clock, one minute ahead.
    cron.clock = lambda: app.driver.db_now() + timedelta(seconds=61)

    def completed() -> bool:
        if ScheduleStore(app.driver).get("every-minute") is None:
            return False
        runs = app.schedule_history("every-minute")
        return any(r.job_state is JobState.COMPLETED for r in runs)

    asyncio.run(run_worker_until(worker, completed))
    (run,) = app.schedule_history("every-minute")
    assert run.trigger == "scheduled" and run.scheduler == worker.id
    assert run.scheduled_local.endswith(("+01:00", "+02:00"))  # Europe/Berlin
    job = app.get_job(run.job_id or 0)
    assert job is not None and job.task == heartbeat.name and job.result == f"run {job.id}"
    assert app.get_schedule("every-minute").last_schedule_time == run.scheduled_at


def test_cron_interval_is_a_validated_setting() -> None:
    import pytest

    assert rota.WorkerSettings().cron_interval == 1.0
    with pytest.raises(rota.ConfigurationError, match="cron_interval"):
        rota.WorkerSettings(cron_interval=0)
