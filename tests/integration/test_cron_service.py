"""Declaring schedules (`@app.cron`, `app.schedule`) and the cron service's edge cases, on
both dialects: what is refused at the door, what a stored schedule becomes, and a stored
schedule that can no longer be evaluated."""

from __future__ import annotations

import sqlite3
from datetime import timedelta

import pytest

import rota
from rota.schedules.service import CronService


def test_cron_over_a_task_uses_its_policy_with_overrides(app: rota.App) -> None:
    @app.cron("@hourly", name="hourly-report", priority=-5)
    @app.task(queue="reports", max_attempts=3)
    def report(ctx: rota.Context, region: str = "eu") -> None:
        pass

    assert isinstance(report, rota.Task) and app.tasks[report.name] is report
    declared = app.schedules["hourly-report"]
    assert (declared.name, declared.task, declared.spec.expression) == (
        "hourly-report",
        report.name,
        "@hourly",
    )
    assert (declared.job.queue, declared.job.priority, declared.job.max_attempts) == (
        "reports",
        -5,
        3,
    )
    assert declared.args == {"region": "eu"}  # defaults are stored with the template
    (record,) = app.sync_schedules()
    assert (record.task, record.queue, record.priority, record.max_attempts) == (
        report.name,
        "reports",
        -5,
        3,
    )


def test_cron_on_a_function_registers_the_task_with_its_options(app: rota.App) -> None:
    @app.cron("*/10 * * * *", queue="cleanup", timeout=30, max_attempts=2)
    def sweep() -> None:
        pass

    assert sweep.policy.queue == "cleanup" and sweep.policy.timeout == 30
    assert app.schedules[sweep.name].spec.expression == "*/10 * * * *"
    sweep()  # still a plain callable


def test_declarations_are_refused_before_anything_is_registered(app: rota.App) -> None:
    with pytest.raises(rota.ScheduleError, match="unknown time zone"):

        @app.cron("0 3 * * *", tz="Europe/Berln")
        def report() -> None:
            pass

    with pytest.raises(rota.ArgumentsError):

        @app.cron("0 3 * * *", args={"nope": 1})
        def other() -> None:
            pass

    assert app.tasks == {} and app.schedules == {}

    @app.task
    def digest(team: str) -> None:
        pass

    with pytest.raises(rota.ArgumentsError, match="team"):
        app.schedule(digest, "@daily")  # the task's required argument is missing
    with pytest.raises(rota.ArgumentsError, match="args must be a dict"):
        app.schedule(digest, "@daily", args=["ops"])  # type: ignore[arg-type]
    with pytest.raises(rota.UnknownTaskError):
        app.schedule("no.such.task", "@daily")
    app.schedule(digest, "@daily", args={"team": "ops"})
    with pytest.raises(rota.ScheduleError, match="already declared"):
        app.schedule(digest, "@hourly", args={"team": "ops"})
    app.schedule(digest, "@hourly", args={"team": "ops"}, name="digest-hourly")
    other_app = rota.App(app.url.raw)
    try:
        with pytest.raises(rota.TaskDefinitionError, match="not a task of this app"):
            other_app.schedule(digest, "@daily", args={"team": "x"})
    finally:
        other_app.close()
    with pytest.raises(rota.TaskDefinitionError, match="timeout= belongs to the task"):
        app.cron("@daily", timeout=5, name="t")(digest)


def test_a_short_deadline_warns_at_the_declaration(app: rota.App) -> None:
    with pytest.warns(rota.ScheduleWarning, match="under 10s") as caught:

        @app.cron("* * * * *", starting_deadline=5)
        def quick() -> None:
            pass

    assert caught[0].filename == __file__  # points at the user's declaration


def test_a_stored_schedule_that_cannot_be_evaluated_is_skipped_with_an_event(
    app: rota.App,
) -> None:
    @app.cron("* * * * *", name="elsewhere", tz="Europe/Berlin")
    def job() -> None:
        pass

    app.sync_schedules()
    # Stored by a host whose tz database knew a zone that this leader's does not.
    with app.transaction() as conn:
        if isinstance(conn, sqlite3.Connection):
            conn.execute("UPDATE rota_schedules SET timezone = 'Mars/Olympus'")
        else:
            conn.execute("UPDATE rota_schedules SET timezone = 'Mars/Olympus'")
    later = app.driver.db_now() + timedelta(minutes=5)
    service = CronService(app.driver, 1.0, clock=lambda: later)
    first = service.run_once()
    assert first.enqueued == 0 and first.events == 1
    event = app.get_schedule("elsewhere").last_event or ""
    assert event.startswith("InvalidSchedule: unknown time zone 'Mars/Olympus'")
    assert service.run_once().events == 0  # said once
    assert app.schedule_history("elsewhere") == []


def test_a_schedule_no_longer_declared_stays_until_deleted(app: rota.App) -> None:
    @app.cron("@daily", name="legacy")
    def legacy() -> None:
        pass

    app.sync_schedules()
    with rota.App(app.url.raw) as newer:  # the next deployment declares nothing
        assert newer.sync_schedules() == []
        assert [r.name for r in newer.list_schedules()] == ["legacy"]
        newer.delete_schedule("legacy")
    assert app.list_schedules() == []
