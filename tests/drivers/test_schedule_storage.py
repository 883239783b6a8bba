"""Schedule storage on both dialects: the tick key makes a tick's run unique in the database
(not by read-then-write), claims roll back whole, Forbid is checked in the claim itself, and
definitions are upserted without touching the status the database owns."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import UTC, datetime, timedelta

import pytest

import rota
from rota.drivers.base import Completion, JobFilter
from rota.job import JobState
from rota.schedules.service import run_name
from rota.schedules.store import (
    ClaimStatus,
    ScheduleRecord,
    ScheduleRunFilter,
    ScheduleStore,
    TickClaim,
    TickClaimResult,
)
from tests.helpers import wait_for

T0 = datetime(2025, 6, 2, 10, 0, tzinfo=UTC)


def stored(app: rota.App, expression: str = "*/5 * * * *", **policy: object) -> ScheduleRecord:
    @app.task(name="tick")
    def tick() -> None:
        pass

    app.schedule(tick, expression, name="s", **policy)  # type: ignore[arg-type]
    (record,) = app.sync_schedules()
    return record


def claim(app: rota.App, record: ScheduleRecord, at: datetime) -> TickClaimResult:
    return ScheduleStore(app.driver).tick_claim(
        TickClaim(
            schedule_id=record.id,
            at=at,
            local=at.isoformat(),
            name=run_name(record.name, at),
            scheduler="test",
            job=record.job_row(),
        )
    )


def jobs_of(app: rota.App) -> list[rota.Job]:
    return app.driver.job_list(JobFilter(task="tick", limit=1000))


def finish(app: rota.App, job_id: int, state: JobState = JobState.COMPLETED) -> None:
    job = app.driver.job_claim(job_id, "w", 30)
    assert job is not None
    entry = json.dumps({"outcome": "completed" if state is JobState.COMPLETED else "discarded"})
    app.driver.job_complete_many([Completion(job.id, job.lease_token or "", state, entry)])


def sql(app: rota.App, sqlite_text: str, postgres_text: str, *params: object) -> None:
    with app.transaction() as conn:
        if isinstance(conn, sqlite3.Connection):
            conn.execute(sqlite_text, params)
        else:
            conn.execute(postgres_text, params)


def test_a_claim_creates_the_run_and_its_job_in_one_transaction(app: rota.App) -> None:
    record = stored(app)
    result = claim(app, record, T0)
    assert result.status is ClaimStatus.CLAIMED
    assert result.run is not None and result.job is not None
    assert result.run.job_id == result.job.id and result.run.trigger == "scheduled"
    assert result.run.name == f"s-{int(T0.timestamp()) // 60}"
    assert result.run.scheduled_at == T0 and result.run.scheduler == "test"
    assert result.job.task == "tick" and result.job.state is JobState.AVAILABLE
    after = app.get_schedule("s")
    assert after.last_schedule_time == T0 and after.active == 1


def test_the_same_tick_twice_is_refused_by_the_unique_tick_key(app: rota.App) -> None:
    record = stored(app)
    assert claim(app, record, T0).status is ClaimStatus.CLAIMED
    # Forget lastScheduleTime, as a scheduler with a stale view would: only the unique key
    # (schedule_id, scheduled minute) is left to refuse the second run, and it does.
    sql(
        app,
        "UPDATE rota_schedules SET last_schedule_time = NULL",
        "UPDATE rota_schedules SET last_schedule_time = NULL",
    )
    assert claim(app, record, T0).status is ClaimStatus.EXISTS
    assert claim(app, record, T0 + timedelta(seconds=30)).status is ClaimStatus.EXISTS
    assert len(jobs_of(app)) == 1  # the refused claim's job was rolled back with it
    assert len(app.schedule_history("s")) == 1


def test_racing_claims_of_one_tick_create_one_run(database_url: str) -> None:
    apps = [rota.App(database_url) for _ in range(6)]
    apps[0].migrate()
    record = stored(apps[0])
    results: list[ClaimStatus] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(apps))

    def race(app: rota.App) -> None:
        try:
            barrier.wait()
            results.append(claim(app, record, T0).status)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(a,)) for a in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors, errors
        assert sorted(results) == sorted([ClaimStatus.CLAIMED] + [ClaimStatus.EXISTS] * 5)
        assert len(jobs_of(apps[0])) == 1
    finally:
        for a in apps:
            a.close()


def test_an_older_tick_after_a_newer_one_is_stale_and_rolled_back(app: rota.App) -> None:
    record = stored(app)
    assert claim(app, record, T0 + timedelta(minutes=5)).status is ClaimStatus.CLAIMED
    assert claim(app, record, T0).status is ClaimStatus.STALE
    assert len(jobs_of(app)) == 1 and len(app.schedule_history("s")) == 1
    assert app.get_schedule("s").last_schedule_time == T0 + timedelta(minutes=5)


def test_forbid_is_enforced_by_the_claim_itself(app: rota.App) -> None:
    record = stored(app, concurrency="forbid")
    first = claim(app, record, T0)
    assert first.status is ClaimStatus.CLAIMED and first.job is not None
    # Even a scheduler that believes nothing is active cannot overlap the runs.
    assert claim(app, record, T0 + timedelta(minutes=5)).status is ClaimStatus.BLOCKED
    assert len(jobs_of(app)) == 1
    finish(app, first.job.id)
    assert claim(app, record, T0 + timedelta(minutes=5)).status is ClaimStatus.CLAIMED


def test_allow_and_replace_do_not_block(app: rota.App) -> None:
    record = stored(app, concurrency="replace")
    assert claim(app, record, T0).status is ClaimStatus.CLAIMED
    assert claim(app, record, T0 + timedelta(minutes=5)).status is ClaimStatus.CLAIMED


def test_suspended_and_deleted_schedules_refuse_claims(app: rota.App) -> None:
    record = stored(app)
    app.suspend_schedule("s")
    assert claim(app, record, T0).status is ClaimStatus.SUSPENDED
    app.resume_schedule("s")
    app.delete_schedule("s")
    assert claim(app, record, T0).status is ClaimStatus.MISSING
    assert jobs_of(app) == []
    with pytest.raises(rota.ScheduleNotFoundError):
        app.delete_schedule("s")
    with pytest.raises(rota.ScheduleNotFoundError):
        app.suspend_schedule("s")


def test_manual_runs(app: rota.App) -> None:
    record = stored(app)
    run = app.trigger_schedule("s", name="rerun")
    assert run.trigger == "manual" and run.name == "rerun" and run.job_state is JobState.AVAILABLE
    assert run.scheduler == "manual"
    with pytest.raises(rota.ScheduleError, match="already has a run named 'rerun'"):
        app.trigger_schedule("s", name="rerun")
    generated = app.trigger_schedule("s")
    assert generated.name.startswith("s-manual-")
    after = app.get_schedule("s")
    assert after.last_schedule_time is None and after.active == 0  # manual runs are not active
    active = ScheduleStore(app.driver).run_list(ScheduleRunFilter(record.id, active_only=True))
    assert active == []
    assert len(app.schedule_history("s")) == 2 and len(jobs_of(app)) == 2
    with pytest.raises(rota.ScheduleNotFoundError, match="no schedule named 'nope'"):
        app.trigger_schedule("nope")


def test_manual_trigger_uses_the_stored_template(app: rota.App) -> None:
    @app.task(queue="reports", priority=5)
    def digest(team: str) -> None:
        pass

    app.schedule(digest, "@daily", args={"team": "ops"}, name="digest-ops", priority=-3)
    app.sync_schedules()
    # A CLI without the app's code triggers from the row alone.
    with rota.App(app.url.raw) as bare:
        run = bare.trigger_schedule("digest-ops")
    job = app.get_job(run.job_id or 0)
    assert job is not None
    assert (job.task, job.queue, job.priority, job.args) == (
        digest.name,
        "reports",
        -3,
        {"team": "ops"},
    )


def test_upsert_updates_the_definition_and_keeps_the_status(app: rota.App) -> None:
    record = stored(app)
    claim(app, record, T0)
    app.suspend_schedule("s")
    again = app.sync_schedules()[0]
    assert again.updated_at == record.updated_at  # nothing changed: nothing written
    # A new deployment declares it differently.
    other = rota.App(app.url.raw)
    try:

        @other.task(name="tick")
        def tick() -> None:
            pass

        other.schedule(tick, "0 * * * *", name="s", concurrency="forbid", tz="Europe/Berlin")
        (changed,) = other.sync_schedules()
    finally:
        other.close()
    assert (changed.expression, changed.concurrency, changed.timezone) == (
        "0 * * * *",
        "forbid",
        "Europe/Berlin",
    )
    assert changed.id == record.id and changed.created_at == record.created_at
    assert changed.suspended and changed.last_schedule_time == T0  # status kept


def test_deleting_a_job_deletes_its_run(app: rota.App) -> None:
    record = stored(app)
    result = claim(app, record, T0)
    assert result.job is not None
    finish(app, result.job.id)
    # The pruner with no retention (finished_at must be strictly in the past).
    wait_for(lambda: app.driver.job_prune_finished(0.0, 0.0, 100) == 1)
    assert app.schedule_history("s") == []


def test_history_prune_keeps_the_newest_and_never_touches_unfinished_runs(app: rota.App) -> None:
    record = stored(app, "* * * * *", successful_history_limit=1, failed_history_limit=0)
    jobs = []
    for minute in range(4):
        result = claim(app, record, T0 + timedelta(minutes=minute))
        assert result.job is not None
        jobs.append(result.job.id)
    finish(app, jobs[0])
    finish(app, jobs[1], JobState.DISCARDED)
    finish(app, jobs[2])
    # jobs[3] is still waiting: not part of the history.
    assert history_due(app)
    assert ScheduleStore(app.driver).history_prune(100) == 2
    assert [app.get_job(j) is None for j in jobs] == [True, True, False, False]
    assert app.get_schedule("s").last_successful_time is not None
    # Nothing left to prune or refresh: the next pass only reads (no write transaction).
    assert not history_due(app)
    app.retry_job(jobs[2])  # finished, then retried: unfinished again
    assert ScheduleStore(app.driver).history_prune(100) == 0


def test_history_due_sees_a_success_to_record_within_the_limits(app: rota.App) -> None:
    # One completed run, within its limit: nothing to delete, but lastSuccessfulTime to set.
    record = stored(app, "* * * * *", successful_history_limit=3, failed_history_limit=1)
    result = claim(app, record, T0)
    assert result.job is not None
    assert not history_due(app)  # waiting: not history yet
    finish(app, result.job.id)
    assert history_due(app)
    assert ScheduleStore(app.driver).history_prune(100) == 0
    assert app.get_schedule("s").last_successful_time is not None
    assert not history_due(app)


def history_due(app: rota.App) -> bool:
    database = app.driver.database
    return database.codec.flag(database.query("schedule_history_due")[0]["due"])
