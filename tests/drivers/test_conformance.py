"""One conformance suite for the Driver protocol, run on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest

import rota
from rota.drivers.base import PLAIN, Claim, Completion, JobInsert
from rota.job import JobState
from rota.worker.fetcher import claim_now
from tests.helpers import wait_for


def row(task: str = "t", queue: str = "q", priority: int = 0, **kw: object) -> JobInsert:
    values: dict[str, object] = dict(
        task=task, queue=queue, args_json="{}", priority=priority, max_attempts=3
    )
    values.update(kw)
    return JobInsert(**values)  # type: ignore[arg-type]


def entry(outcome: str = "completed") -> str:
    return json.dumps({"outcome": outcome})


def done(job: rota.Job, state: JobState = JobState.COMPLETED, **kw: object) -> Completion:
    return Completion(job.id, job.lease_token or "", state, entry(), **kw)  # type: ignore[arg-type]


def test_migrate_is_idempotent_and_recorded(app: rota.App) -> None:
    assert app.schema_version() == app.driver.latest_schema_version
    assert app.migrate() == []
    app.check_schema()


def test_concurrent_migrations_apply_once(database_url: str) -> None:
    apps = [rota.App(database_url) for _ in range(4)]
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def run(a: rota.App) -> None:
        try:
            results.append(a.migrate())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(a,)) for a in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a in apps:
        a.close()
    assert not errors
    latest = list(range(1, apps[0].driver.latest_schema_version + 1))
    assert sorted(results, key=len) == [[], [], [], latest]


def test_unmigrated_database_names_the_fix(database_url: str) -> None:
    with rota.App(database_url) as fresh:
        assert fresh.schema_version() == 0
        with pytest.raises(rota.SchemaError, match="rota migrate"):
            fresh.check_schema()


def test_fetch_order_is_priority_then_time_then_id(app: rota.App) -> None:
    d = app.driver
    low, high, high2 = d.job_insert_many([row(priority=5), row(priority=-1), row(priority=-1)])
    other_queue = d.job_insert_many([row(queue="other")])[0]
    fetched = claim_now(app, "q", 10, "w1", 30)
    assert [j.id for j in fetched] == [high.id, high2.id, low.id]
    assert all(j.state is JobState.RUNNING and j.attempt == 1 for j in fetched)
    assert len({j.lease_token for j in fetched}) == 3
    assert d.job_get(other_queue.id).state is JobState.AVAILABLE  # type: ignore[union-attr]


def test_fetch_respects_limit_and_never_hands_out_a_job_twice(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row() for _ in range(50)])
    seen: list[int] = []
    lock = threading.Lock()

    def grab() -> None:
        while True:
            jobs = claim_now(app, "q", 7, threading.current_thread().name, 30)
            if not jobs:
                return
            assert len(jobs) <= 7
            with lock:
                seen.extend(j.id for j in jobs)

    threads = [threading.Thread(target=grab, name=f"w{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 50 and len(set(seen)) == 50


def test_completion_is_fenced_by_the_lease_token(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row()])
    (first,) = claim_now(app, "q", 1, "w1", 0.05)
    wait_for(lambda: d.job_rescue_expired(100).rescued == 1)  # once the lease is over
    (second,) = claim_now(app, "q", 1, "w2", 30)
    assert second.id == first.id and second.attempt == 2
    assert second.lease_token != first.lease_token
    # The stale worker comes back: its completion and its renewal are both refused.
    assert d.job_complete_many([done(first)]) == set()
    assert d.job_lease_renew([(first.id, first.lease_token or "")], 30) == []
    current = d.job_get(first.id)
    assert current is not None and current.state is JobState.RUNNING
    assert current.lease_token == second.lease_token
    assert d.job_complete_many([done(second)]) == {second.id}
    final = d.job_get(first.id)
    assert final is not None and final.state is JobState.COMPLETED
    outcomes = [(a.attempt, a.outcome.value, a.worker) for a in final.history]
    assert outcomes == [(1, "lost", "w1"), (2, "completed", "w2")]
    assert final.history[0].error_type == "LeaseExpired"


def test_lease_renewal_keeps_a_long_job_from_rescue(app: rota.App) -> None:
    """On the database clock, with no margin to guess: the first lease runs out while the
    renewed one holds, and only a lease left to run out gets the job rescued."""
    d = app.driver
    d.job_insert_many([row()])
    (job,) = claim_now(app, "q", 1, "w1", 0.5)
    lease = [(job.id, job.lease_token or "")]
    first_expiry = job.lease_expires_at
    assert first_expiry is not None
    renewed = d.job_lease_renew(lease, 60)
    assert [r.job_id for r in renewed] == [job.id]
    held = d.job_get(job.id)
    assert held is not None and held.lease_expires_at is not None
    assert held.lease_expires_at - first_expiry > timedelta(seconds=55)
    wait_for(lambda: d.db_now() > first_expiry)  # the first lease is over
    assert d.job_rescue_expired(10).rescued == 0  # the renewed one holds
    assert [r.job_id for r in d.job_lease_renew(lease, 0.05)] == [job.id]
    wait_for(lambda: d.job_rescue_expired(10).rescued == 1)  # not renewed: rescued
    rescued = d.job_get(job.id)
    assert rescued is not None and rescued.state is JobState.AVAILABLE


def test_rescue_discards_when_attempts_are_exhausted(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row(max_attempts=1)])
    claim_now(app, "q", 1, "w1", 0.01)
    report = wait_for(lambda: (r := d.job_rescue_expired(10)).discarded and r)
    assert (report.rescued, report.discarded) == (0, 1)
    (job,) = d.job_list(rota.drivers.base.JobFilter(states=(JobState.DISCARDED,)))
    assert job.finished_at is not None


def test_retry_snooze_and_refund(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row(), row()])
    a, b = claim_now(app, "q", 2, "w", 30)
    accepted = d.job_complete_many(
        [
            done(a, JobState.RETRYABLE, delay=60.0),
            done(b, JobState.SCHEDULED, delay=0.05, refund_attempt=True),
        ]
    )
    assert accepted == {a.id, b.id}
    ra, rb = d.job_get(a.id), d.job_get(b.id)
    assert ra is not None and rb is not None
    assert ra.state is JobState.RETRYABLE and ra.max_attempts == 3
    assert ra.run_at - d.db_now() > timedelta(seconds=50)
    assert rb.state is JobState.SCHEDULED and rb.max_attempts == 4  # snooze refunds
    assert wait_for(lambda: d.job_stage_due(100)) == 1  # once the 0.05 s snooze is over
    assert d.job_get(b.id).state is JobState.AVAILABLE  # type: ignore[union-attr]
    assert d.job_get(a.id).state is JobState.RETRYABLE  # type: ignore[union-attr]


def test_scheduled_insert_and_staging(app: rota.App) -> None:
    d = app.driver
    later = d.db_now() + timedelta(hours=1)
    past = datetime(2020, 1, 1, tzinfo=UTC)
    a, b, c = d.job_insert_many([row(at=later), row(at=past), row(delay=3600.0)])
    assert (a.state, b.state, c.state) == (
        JobState.SCHEDULED,
        JobState.AVAILABLE,
        JobState.SCHEDULED,
    )
    assert abs((a.run_at - later).total_seconds()) < 0.01
    assert d.job_stage_due(100) == 0
    assert [j.id for j in claim_now(app, "q", 10, "w", 30)] == [b.id]
    assert d.job_stage_due(100, horizon=7200) == 2


def test_next_due_is_the_earliest_scheduled_or_retryable_job(app: rota.App) -> None:
    """What a resting stager sleeps until: seconds to the earliest job waiting for its
    time; available jobs do not count, an overdue one is negative, none is None."""
    d = app.driver
    assert d.job_next_due() is None
    d.job_insert_many([row()])  # available: claimable now, nothing to stage
    assert d.job_next_due() is None
    d.job_insert_many([row(delay=3600.0), row(delay=60.0)])
    due = d.job_next_due()
    assert due is not None and 55.0 < due <= 60.01  # SQLite reads its clock to the ms
    d.job_insert_many([row(at=d.db_now() + timedelta(seconds=30))])
    assert 25.0 < (d.job_next_due() or 0.0) <= 30.01
    (held,) = claim_now(app, "q", 1, "w", 30)
    d.job_complete_many([done(held, JobState.RETRYABLE, delay=10.0)])
    assert 5.0 < (d.job_next_due() or 0.0) <= 10.01  # a retry waits for its time too
    assert d.job_stage_due(100, horizon=7200) == 4
    assert d.job_next_due() is None


def test_idempotency_key_returns_the_existing_job(app: rota.App) -> None:
    d = app.driver
    (first,) = d.job_insert_many([row(key="order-1")])
    again, other_task, fresh = d.job_insert_many(
        [row(key="order-1"), row(task="u", key="order-1"), row(key="order-2")]
    )
    assert first.created and again.id == first.id and not again.created
    assert other_task.created and other_task.id != first.id
    assert fresh.created


def test_cancel_waiting_and_running(app: rota.App) -> None:
    d = app.driver
    waiting, running = d.job_insert_many([row(queue="a"), row(queue="b")])
    assert d.job_cancel(waiting.id).state is JobState.CANCELLED
    (claimed,) = claim_now(app, "b", 1, "w", 30)
    requested = d.job_cancel(running.id)
    assert requested.state is JobState.RUNNING and requested.cancel_requested
    (renewal,) = d.job_lease_renew([(claimed.id, claimed.lease_token or "")], 30)
    assert renewal.cancel_requested
    with pytest.raises(rota.InvalidTransitionError):
        d.job_cancel(waiting.id)
    with pytest.raises(rota.JobNotFoundError):
        d.job_cancel(999_999)


def test_retry_brings_a_discarded_job_back_with_an_attempt(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row(max_attempts=1)])
    (job,) = claim_now(app, "q", 1, "w", 30)
    d.job_complete_many([done(job, JobState.DISCARDED)])
    back = d.job_retry(job.id)
    assert back.state is JobState.AVAILABLE and back.max_attempts == 2 and back.finished_at is None
    with pytest.raises(rota.InvalidTransitionError):
        d.job_retry(job.id)


def test_paused_queue_is_not_fetched(app: rota.App) -> None:
    d = app.driver
    # Due an hour ago on the database clock: its age is known to the second.
    inserted = d.db_now()
    d.job_insert_many([row(at=inserted - timedelta(hours=1))])
    app.pause_queue("q")
    assert claim_now(app, "q", 10, "w", 30) == []
    (report,) = [r for r in app.list_queues() if r.name == "q"]
    since = (d.db_now() - inserted).total_seconds()
    assert report.paused and report.counts == {"available": 1}
    assert report.oldest_available_age is not None
    assert 3600 <= report.oldest_available_age <= 3600 + since + 0.01
    app.resume_queue("q")
    assert len(claim_now(app, "q", 10, "w", 30)) == 1


def test_leader_election_is_exclusive_and_expires(app: rota.App) -> None:
    d = app.driver
    assert d.leader_attempt_elect("m", "a", 0.3)
    assert not d.leader_attempt_elect("m", "b", 0.3)
    assert d.leader_attempt_elect("m", "a", 0.3)  # renewal
    wait_for(lambda: d.leader_attempt_elect("m", "b", 0.3))  # once a's term is over
    d.leader_resign("m", "b")
    assert d.leader_attempt_elect("m", "a", 0.3)


def test_prune_removes_only_old_finished_jobs(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row(), row(), row()])
    a, b, _c = claim_now(app, "q", 3, "w", 30)
    d.job_complete_many([done(a), done(b, JobState.DISCARDED)])
    assert d.job_prune_finished(3600, 3600, 100) == 0
    assert wait_for(lambda: d.job_prune_finished(0.01, 3600, 100)) == 1
    assert d.job_get(a.id) is None and d.job_get(b.id) is not None


def test_list_filters_and_pages(app: rota.App) -> None:
    d = app.driver
    jobs = d.job_insert_many([row(task="x"), row(task="y"), row(task="x", queue="z")])
    f = rota.drivers.base.JobFilter
    assert [j.id for j in d.job_list(f(task="x"))] == [jobs[2].id, jobs[0].id]
    assert [j.id for j in d.job_list(f(queue="z"))] == [jobs[2].id]
    assert [j.id for j in d.job_list(f(limit=1, before_id=jobs[2].id))] == [jobs[1].id]
    assert d.job_list(f(states=(JobState.RUNNING,))) == []


def test_results_and_history_round_trip(app: rota.App) -> None:
    d = app.driver
    d.job_insert_many([row(args_json='{"n": 1, "s": "ü"}')])
    (job,) = claim_now(app, "q", 1, "w", 30)
    assert job.args == {"n": 1, "s": "ü"}
    failed = json.dumps(
        {
            "outcome": "failed",
            "error_type": "ValueError",
            "message": "bad",
            "traceback": "Traceback...",
        }
    )
    d.job_complete_many(
        [Completion(job.id, job.lease_token or "", JobState.AVAILABLE, failed, delay=0.0)]
    )
    (job,) = claim_now(app, "q", 1, "w", 30)
    d.job_complete_many([done(job, result_json='{"ticket": "T-1"}')])
    final = d.job_get(job.id)
    assert final is not None and final.result == {"ticket": "T-1"}
    first, second = final.history
    assert (first.outcome.value, first.error_type, first.message) == ("failed", "ValueError", "bad")
    assert first.started_at is not None and first.finished_at is not None
    assert first.finished_at >= first.started_at
    assert second.outcome.value == "completed"


@pytest.mark.parametrize("gated", [False, True], ids=["plain", "gated"])
def test_a_claim_writes_the_completions_it_carries_and_names_those_accepted(
    app: rota.App, gated: bool
) -> None:
    # A gated queue (a job with a partition key) is claimed by its own statement.
    keys = [{"partition_key": f"p{i}"} if gated else {} for i in range(4)]
    d = app.driver
    d.job_insert_many([row(**k) for k in keys])
    a, b = claim_now(app, "q", 2, "w", 30)
    stale = Completion(b.id, uuid.uuid4().hex, JobState.COMPLETED, entry())
    query = app.claim_queries()["gated" if gated else PLAIN]
    claimed = d.job_fetch(Claim("q", 1, "w", 30, query, completions=[done(a), stale]))
    assert claimed.accepted == {a.id}  # b's lease token is not the one sent: refused
    assert len(claimed.jobs) == 1
    assert d.job_get(a.id).state is JobState.COMPLETED  # type: ignore[union-attr]
    assert d.job_get(b.id).state is JobState.RUNNING  # type: ignore[union-attr]
    # Nothing carried: nothing accepted.
    assert d.job_fetch(Claim("q", 1, "w", 30, query)).accepted == set()
