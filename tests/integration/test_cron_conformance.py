"""The CronJob conformance cases of SEMANTICS §1.10, one test per row, on both dialects:
the real cron service (`run_once()`) and database, with a clock the test moves by hand."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import rota
from rota.drivers.base import Completion
from rota.job import JobState
from rota.schedules.service import CronReport, CronService

DAY = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday


def at(hhmm: str, seconds: float = 0.0, day: datetime = DAY) -> datetime:
    hour, minute = map(int, hhmm.split(":"))
    return day.replace(hour=hour, minute=minute) + timedelta(seconds=seconds)


class Controller:
    """The cron service under a fake clock: `pass_at(t)` is one reconcile pass at t."""

    def __init__(self, app: rota.App) -> None:
        self.now = DAY
        self.service = CronService(app.driver, 1.0, scheduler="test", clock=lambda: self.now)

    def pass_at(self, when: datetime) -> CronReport:
        self.now = when
        return self.service.run_once()


def set_created_at(app: rota.App, name: str, when: datetime) -> None:
    """Pretend the schedule was created at `when` (creationTimestamp)."""
    with app.transaction() as conn:
        if isinstance(conn, sqlite3.Connection):
            sql = "UPDATE rota_schedules SET created_at = ? WHERE name = ?"
            conn.execute(sql, (when.timestamp(), name))
        else:
            conn.execute("UPDATE rota_schedules SET created_at = %s WHERE name = %s", (when, name))


def declare(app: rota.App, expression: str, created: datetime, **policy: Any) -> str:
    @app.task(name="report")
    def report() -> None:
        pass

    app.schedule(report, expression, name="s", **policy)
    app.sync_schedules()
    set_created_at(app, "s", created)
    return "s"


def ticks(app: rota.App) -> list[str]:
    runs = app.schedule_history("s", limit=1000)
    return sorted(r.scheduled_at.astimezone(UTC).strftime("%H:%M") for r in runs)


def runs_by_tick(app: rota.App) -> dict[str, rota.Job]:
    out = {}
    for run in app.schedule_history("s", limit=1000):
        assert run.job_id is not None
        job = app.get_job(run.job_id)
        assert job is not None
        out[run.scheduled_at.astimezone(UTC).strftime("%H:%M")] = job
    return out


def start(app: rota.App, job: rota.Job) -> rota.Job:
    claimed = app.driver.job_claim(job.id, "test-worker", 30)
    assert claimed is not None
    return claimed


def finish(app: rota.App, job: rota.Job, state: JobState = JobState.COMPLETED) -> None:
    running = job if job.state is JobState.RUNNING else start(app, job)
    entry = json.dumps({"outcome": "completed" if state is JobState.COMPLETED else "discarded"})
    done = app.driver.job_complete_many(
        [Completion(running.id, running.lease_token or "", state, entry)]
    )
    assert done == {running.id}


@pytest.fixture
def cron(app: rota.App) -> Controller:
    return Controller(app)


def test_row_1_one_run_at_the_tick_and_the_next_is_due_five_minutes_later(
    app: rota.App, cron: Controller
) -> None:
    declare(app, "*/5 * * * *", created=at("10:02"))
    assert cron.pass_at(at("10:04", 59.9)).enqueued == 0
    assert cron.pass_at(at("10:05", 0.1)).enqueued == 1
    assert ticks(app) == ["10:05"]
    assert app.get_schedule("s").last_schedule_time == at("10:05")
    assert cron.pass_at(at("10:05", 30)).enqueued == 0
    assert cron.pass_at(at("10:09", 59.9)).enqueued == 0
    assert cron.pass_at(at("10:10", 0.1)).enqueued == 1
    assert ticks(app) == ["10:05", "10:10"]


def test_row_2_after_downtime_only_the_most_recent_tick_runs(
    app: rota.App, cron: Controller
) -> None:
    declare(app, "*/5 * * * *", created=at("09:58"))
    cron.pass_at(at("10:00", 0.5))
    # The controller is down from 10:00 to 10:20: 10:05, 10:10 and 10:15 are missed.
    report = cron.pass_at(at("10:20", 0.5))
    assert report.enqueued == 1
    assert ticks(app) == ["10:00", "10:20"]
    assert app.get_schedule("s").last_schedule_time == at("10:20")


def test_row_3_too_many_missed_times_warns_and_still_starts_the_latest(
    app: rota.App, cron: Controller
) -> None:
    declare(app, "* * * * *", created=at("08:29"))
    report = cron.pass_at(at("10:21", 0.5))  # down 08:29-10:21: 112 missed minutes
    assert report.enqueued == 1 and report.events == 1
    assert ticks(app) == ["10:21"]
    event = app.get_schedule("s").last_event or ""
    assert event.startswith("TooManyMissedTimes: too many missed start times (112)")
    assert "starting_deadline" in event


def test_row_3_with_strict_missed_limit_nothing_starts(app: rota.App, cron: Controller) -> None:
    declare(app, "* * * * *", created=at("08:29"), strict_missed_limit=True)
    report = cron.pass_at(at("10:21", 0.5))
    assert report.enqueued == 0 and report.missed == 1
    assert ticks(app) == []
    record = app.get_schedule("s")
    assert (record.last_event or "").startswith("TooManyMissedTimes")
    assert record.last_schedule_time is None and record.last_missed_time == at("10:21")
    # Recorded as missed, the schedule is not stuck: the next tick runs (the docs: "this
    # does not mean the CronJob will stop running").
    assert cron.pass_at(at("10:22", 0.5)).enqueued == 1
    assert ticks(app) == ["10:22"]


def test_row_4_a_deadline_counts_only_the_window_and_starts_a_run(
    app: rota.App, cron: Controller
) -> None:
    declare(app, "* * * * *", created=at("08:29"), starting_deadline=200)
    report = cron.pass_at(at("10:21", 0.5))
    assert report.enqueued == 1
    assert ticks(app) == ["10:21"]
    assert "TooManyMissedTimes" not in (app.get_schedule("s").last_event or "")
    assert cron.pass_at(at("10:22", 0.5)).enqueued == 1  # the docs' run at 10:22
    assert ticks(app) == ["10:21", "10:22"]


def test_row_5_a_tick_older_than_the_deadline_is_missed(app: rota.App, cron: Controller) -> None:
    declare(app, "*/30 * * * *", created=at("09:40"), starting_deadline=60)
    report = cron.pass_at(at("10:20", 0.5))  # down 10:00-10:20
    assert report.enqueued == 0 and report.missed == 1
    record = app.get_schedule("s")
    assert record.last_event == (
        "MissSchedule: missed scheduled time 2025-06-02 10:00:00 UTC: not started within "
        "the 60s starting deadline"
    )
    assert record.last_missed_time == at("10:00") and record.last_schedule_time is None
    assert cron.pass_at(at("10:25")).enqueued == 0
    assert cron.pass_at(at("10:30", 0.5)).enqueued == 1
    assert ticks(app) == ["10:30"]


def test_row_6_forbid_waits_for_the_active_run_then_starts_the_missed_tick(
    app: rota.App, cron: Controller
) -> None:
    declare(app, "*/5 * * * *", created=at("09:58"), concurrency="forbid")
    cron.pass_at(at("10:00", 0.5))
    a = start(app, runs_by_tick(app)["10:00"])
    report = cron.pass_at(at("10:05", 0.5))
    assert report.enqueued == 0 and report.events == 1
    assert (app.get_schedule("s").last_event or "").startswith("JobAlreadyActive: ")
    assert cron.pass_at(at("10:06")).events == 0  # the same condition is not reported again
    finish(app, a)  # A ends at 10:07
    assert cron.pass_at(at("10:07")).enqueued == 1
    assert ticks(app) == ["10:00", "10:05"]
    finish(app, runs_by_tick(app)["10:05"])
    assert cron.pass_at(at("10:10", 0.5)).enqueued == 1
    assert ticks(app) == ["10:00", "10:05", "10:10"]


def test_row_7_replace_cancels_the_active_run_and_starts_the_new_one(
    app: rota.App, cron: Controller
) -> None:
    declare(app, "*/5 * * * *", created=at("09:58"), concurrency="replace")
    cron.pass_at(at("10:00", 0.5))
    a = start(app, runs_by_tick(app)["10:00"])
    report = cron.pass_at(at("10:05", 0.5))
    assert report.enqueued == 1 and report.replaced == 1
    jobs = runs_by_tick(app)
    assert jobs["10:00"].cancel_requested  # running: asked to stop through the cancel path
    assert jobs["10:05"].state is JobState.AVAILABLE
    # A run still waiting is cancelled outright.
    report = cron.pass_at(at("10:10", 0.5))
    assert report.replaced == 2  # A (still running, asked again) and B (waiting)
    jobs = runs_by_tick(app)
    assert jobs["10:05"].state is JobState.CANCELLED
    assert jobs["10:10"].state is JobState.AVAILABLE
    assert a.id == jobs["10:00"].id


def test_row_8_allow_lets_runs_overlap(app: rota.App, cron: Controller) -> None:
    declare(app, "*/5 * * * *", created=at("09:58"))
    cron.pass_at(at("10:00", 0.5))
    start(app, runs_by_tick(app)["10:00"])
    assert cron.pass_at(at("10:05", 0.5)).enqueued == 1
    jobs = runs_by_tick(app)
    assert jobs["10:00"].state is JobState.RUNNING
    assert jobs["10:05"].state is JobState.AVAILABLE
    assert app.get_schedule("s").active == 2


@pytest.mark.parametrize("deadline", [None, 60])
def test_row_9_resume_starts_the_latest_tick_missed_while_suspended(
    app: rota.App, cron: Controller, deadline: float | None
) -> None:
    declare(app, "*/5 * * * *", created=at("09:58"), starting_deadline=deadline)
    cron.pass_at(at("10:00", 0.5))
    finish(app, runs_by_tick(app)["10:00"])
    app.suspend_schedule("s")
    for minute in range(5, 31, 5):
        assert cron.pass_at(at(f"10:{minute:02}", 0.5)).enqueued == 0
    assert app.get_schedule("s").last_schedule_time == at("10:00")  # does not move
    app.resume_schedule("s")
    report = cron.pass_at(at("10:32"))
    if deadline is None:
        assert report.enqueued == 1
        assert ticks(app) == ["10:00", "10:30"]
    else:
        assert report.enqueued == 0  # 10:30 is older than 60 s at 10:32
        assert ticks(app) == ["10:00"]
        assert "10:30:00" in (app.get_schedule("s").last_event or "")


def test_row_10_history_limits_delete_the_oldest_finished_runs(
    app: rota.App, cron: Controller
) -> None:
    declare(app, "* * * * *", created=at("09:59", 30))
    for minute in range(8):
        cron.pass_at(at(f"10:{minute:02}", 0.5))
    jobs = runs_by_tick(app)
    outcomes = "CFCCFCFC"  # 5 complete, 3 failed, oldest first
    for minute, outcome in enumerate(outcomes):
        state = JobState.COMPLETED if outcome == "C" else JobState.DISCARDED
        finish(app, jobs[f"10:{minute:02}"], state)
    report = cron.pass_at(at("10:07", 30))
    assert report.pruned == 4
    # Kept: the newest 3 complete (10:03, 10:05, 10:07) and the newest failed (10:06).
    assert ticks(app) == ["10:03", "10:05", "10:06", "10:07"]
    for minute in ("00", "01", "02", "04"):  # deleted with their runs
        assert app.get_job(jobs[f"10:{minute}"].id) is None
    record = app.get_schedule("s")
    completed = app.get_job(jobs["10:07"].id)
    assert completed is not None and record.last_successful_time == completed.finished_at


def test_row_11_a_manual_run_ignores_and_does_not_block_forbid(
    app: rota.App, cron: Controller
) -> None:
    declare(app, "*/5 * * * *", created=at("09:58"), concurrency="forbid")
    cron.pass_at(at("10:00", 0.5))
    manual = app.trigger_schedule("s", name="by-hand")  # created although A is active
    assert manual.trigger == "manual" and manual.job_state is JobState.AVAILABLE
    record = app.get_schedule("s")
    assert record.last_schedule_time == at("10:00") and record.active == 1
    finish(app, runs_by_tick(app)["10:00"])
    assert cron.pass_at(at("10:05", 0.5)).enqueued == 1  # the manual run does not block it
    scheduled = [r for r in app.schedule_history("s") if r.trigger == "scheduled"]
    assert len(scheduled) == 2


@pytest.mark.parametrize(
    ("zone", "day", "expression", "dst", "expected"),
    [
        # §1.3 in America/New_York, 2025: our default runs each local time once...
        ("America/New_York", "2025-03-09", "30 2 * * *", "once", ["03:00-04:00"]),
        ("America/New_York", "2025-11-02", "30 1 * * *", "once", ["01:30-04:00"]),
        # ...and dst="kubernetes" skips the gap and runs both occurrences.
        ("America/New_York", "2025-03-09", "30 2 * * *", "kubernetes", []),
        (
            "America/New_York",
            "2025-11-02",
            "30 1 * * *",
            "kubernetes",
            ["01:30-04:00", "01:30-05:00"],
        ),
        ("Europe/Berlin", "2025-10-26", "30 2 * * *", "kubernetes", ["02:30+02:00", "02:30+01:00"]),
    ],
)
def test_row_12_dst_under_both_policies(
    app: rota.App,
    cron: Controller,
    zone: str,
    day: str,
    expression: str,
    dst: str,
    expected: list[str],
) -> None:
    from zoneinfo import ZoneInfo

    local_midnight = datetime.fromisoformat(day).replace(tzinfo=ZoneInfo(zone))
    begin = local_midnight.astimezone(UTC)
    declare(app, expression, created=begin, tz=zone, dst=dst)
    for step in range(1, 6 * 6 + 1):  # a pass every 10 minutes for 6 hours
        cron.pass_at(begin + timedelta(minutes=10 * step))
    runs = sorted(app.schedule_history("s"), key=lambda r: r.scheduled_at)
    assert [r.scheduled_local[11:16] + r.scheduled_local[19:] for r in runs] == expected
    for run in runs:  # stored as UTC and as RFC 3339 in the zone, the same instant
        assert datetime.fromisoformat(run.scheduled_local) == run.scheduled_at


@pytest.mark.parametrize("dst", ["once", "kubernetes"])
def test_day_of_week_steps_run_on_the_days_kubernetes_runs_them(
    app: rota.App, cron: Controller, dst: str
) -> None:
    """`1/2` in day-of-week is `1-6/2` in Kubernetes: Monday, Wednesday, Friday; never
    Sunday (cronsim alone reads it up to 7, which is Sunday again) (#17)."""
    from zoneinfo import ZoneInfo

    berlin = ZoneInfo("Europe/Berlin")
    begin = datetime(2026, 11, 29, 12, tzinfo=berlin).astimezone(UTC)  # a Sunday
    declare(app, "0 0 * * 1/2", created=begin, tz="Europe/Berlin", dst=dst)
    for step in range(1, 14 * 4 + 1):  # a pass every 6 hours for two weeks
        cron.pass_at(begin + timedelta(hours=6 * step))
    runs = sorted(app.schedule_history("s", limit=100), key=lambda r: r.scheduled_at)
    days = [r.scheduled_at.astimezone(berlin).strftime("%a %d") for r in runs]
    assert days == ["Mon 30", "Wed 02", "Fri 04", "Mon 07", "Wed 09", "Fri 11"]


@pytest.mark.parametrize(
    ("expression", "policy", "message"),
    [
        ("61 * * * *", {}, "bad minute field '61'"),
        ("* * * *", {}, "has 4 field(s)"),
        ("0 0 30 2 *", {}, "never fires"),
        ("TZ=UTC * * * * *", {}, "TZ= and CRON_TZ= prefixes are not supported"),
        ("* * * * *", {"tz": "Mars/X"}, "unknown time zone 'Mars/X'"),
        ("* * * * *", {"successful_history_limit": -1}, "successful_history_limit"),
        ("* * * * *", {"failed_history_limit": -3}, "failed_history_limit"),
    ],
)
def test_row_13_invalid_schedules_are_refused_at_declaration(
    app: rota.App, expression: str, policy: dict[str, Any], message: str
) -> None:
    with pytest.raises(rota.ScheduleError) as caught:

        @app.cron(expression, **policy)
        def nightly() -> None:
            pass

    assert message in str(caught.value)
    assert app.schedules == {}
    assert app.sync_schedules() == [] and app.list_schedules() == []
