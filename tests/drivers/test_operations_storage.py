"""Operations storage on both dialects: the partition gate, start deadlines, global and
rate limits in the claim, dead-letter filters, replay (dry run, dedup, audit, permission),
dismissal and retention per state."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

import rota
from rota.drivers.base import Completion
from rota.maintenance.pruner import BatchSizer, Pruner
from rota.maintenance.service import DUE_SLACK
from rota.ops import ReplayReport, Selection
from rota.ops.expirer import Expirer, ExpireReport
from rota.ops.store import OpsStore
from rota.worker.fetcher import claim_now
from tests.helpers import wait_for


def fail(job: rota.Job, error: str = "ValueError", message: str = "boom") -> Completion:
    entry = {"outcome": "discarded", "error_type": error, "message": message}
    assert job.lease_token is not None
    return Completion(job.id, job.lease_token, rota.JobState.DISCARDED, json.dumps(entry))


def done(job: rota.Job) -> Completion:
    assert job.lease_token is not None
    return Completion(job.id, job.lease_token, rota.JobState.COMPLETED, '{"outcome":"completed"}')


def claim(app: rota.App, n: int = 10, queue: str = "q") -> list[rota.Job]:
    return claim_now(app, queue, n, "w", 30)


@pytest.fixture
def task(app: rota.App) -> rota.Task:  # type: ignore[type-arg]
    @app.task(queue="q", name="ops.work")
    def work(n: int = 0) -> None: ...

    return work


def test_partition_gate_runs_one_job_per_key_in_order(app: rota.App, task: rota.Task) -> None:  # type: ignore[type-arg]
    a1 = task.enqueue(n=1, partition_key="a")
    a2 = task.enqueue(n=2, partition_key="a")
    b1 = task.enqueue(n=3, partition_key="b")
    free = task.enqueue(n=4)
    first = claim(app)
    assert sorted(j.id for j in first) == [a1.id, b1.id, free.id]
    assert claim(app) == []  # a2 waits for a1
    app.driver.job_complete_many([done(j) for j in first if j.id == a1.id])
    (second,) = claim(app)
    assert second.id == a2.id and second.partition_key == "a"


def test_a_dead_head_blocks_its_key_until_replayed_or_dismissed(
    app: rota.App,
    task: rota.Task,  # type: ignore[type-arg]
) -> None:
    a1 = task.enqueue(n=1, partition_key="a")
    a2 = task.enqueue(n=2, partition_key="a")
    a3 = task.enqueue(n=3, partition_key="a")
    (head,) = claim(app)
    app.driver.job_complete_many([fail(head)])
    b1 = task.enqueue(n=4, partition_key="b")
    assert [j.id for j in claim(app)] == [b1.id]  # other keys flow
    (poisoned,) = app.queues.partitions()
    assert (poisoned.partition_key, poisoned.dead_job_id, poisoned.waiting) == ("a", a1.id, 2)
    # Replayed in place: the same job runs first again, then the rest of the key.
    report = app.dlq.replay(ids=[a1.id], reason="fixed the bug")
    assert report.job_ids == (a1.id,)
    (again,) = claim(app)
    # A claim returns what the runner needs; the stored job keeps the first attempt.
    assert again.id == a1.id and again.attempt == 2
    assert len(app.get_job(again.id).history) == 1  # type: ignore[union-attr]
    app.driver.job_complete_many([fail(again)])
    assert claim(app) == []
    assert app.dlq.dismiss([a1.id, 999_999], reason="not needed any more") == [a1.id]
    dismissed = app.get_job(a1.id)
    assert dismissed is not None and dismissed.state is rota.JobState.CANCELLED
    assert dismissed.meta["dismissed"]["reason"] == "not needed any more"
    assert dismissed.meta["dismissed"]["by"].startswith("direct:")
    assert [j.id for j in claim(app)] == [a2.id]
    assert app.queues.partitions() == []
    assert a3.id > a2.id


def test_expired_jobs_are_skipped_then_dead_lettered(app: rota.App, task: rota.Task) -> None:  # type: ignore[type-arg]
    soon = datetime.now(UTC) + timedelta(seconds=0.3)
    expiring = task.enqueue(n=1, expires_at=soon)
    later = task.enqueue(n=2, expires_at=datetime.now(UTC) + timedelta(hours=1))
    assert expiring.expires_at is not None and abs(expiring.expires_at - soon) < timedelta(
        milliseconds=5
    )
    time.sleep(0.4)
    assert [j.id for j in claim(app)] == [later.id]
    assert Expirer(app.driver, 1.0).run_once().expired == 1
    (dead,) = app.dlq.list(error_type="Expired")
    assert dead.id == expiring.id and dead.state is rota.JobState.DISCARDED
    assert dead.history[-1].message is not None and "expired" in dead.history[-1].message
    assert Expirer(app.driver, 1.0).run_once().expired == 0
    # A replay is an operator's decision: the passed deadline no longer applies.
    app.dlq.replay(ids=[expiring.id], reason="run it anyway")
    (again,) = claim(app)
    assert again.id == expiring.id and again.expires_at is None


def _not_asked() -> float | None:
    raise AssertionError("a service that may not rest asked when its work falls due")


def test_a_resting_expirer_waits_for_the_next_start_deadline(
    app: rota.App,
    task: rota.Task,  # type: ignore[type-arg]
) -> None:
    """What a resting expirer sleeps until: the earliest start deadline of a waiting job
    (a claimed job's deadline no longer matters), the whole rest when none has one."""
    expirer = Expirer(app.driver, 1.0)
    expirer.rests = True
    # Where it rests it looks first: nothing due, so no pass (no report) and no write.
    assert expirer.pass_once() == (None, expirer.rest)
    assert OpsStore(app.driver).job_next_expiry() is None and expirer.rest == 5.0
    running = task.enqueue(n=1, expires_at=datetime.now(UTC) + timedelta(seconds=1))
    assert [j.id for j in claim(app)] == [running.id]
    assert OpsStore(app.driver).job_next_expiry() is None
    task.enqueue(n=2, expires_at=datetime.now(UTC) + timedelta(seconds=3))
    task.enqueue(n=3, expires_at=datetime.now(UTC) + timedelta(hours=1), delay=60.0)
    due = OpsStore(app.driver).job_next_expiry()
    assert due is not None and 2.5 < due <= 3.01
    report, rest = expirer.pass_once()
    assert report is None
    assert 2.5 < (rest or 0.0) <= 3.01 + DUE_SLACK
    # A deadline that has passed is due: the resting expirer's pass runs and expires it.
    gone = task.enqueue(n=4, expires_at=datetime.now(UTC) + timedelta(milliseconds=50))
    time.sleep(0.1)
    report, rest = expirer.pass_once()
    assert report == ExpireReport(expired=1) and rest is None
    assert app.get_job(gone.id).state is rota.JobState.DISCARDED  # type: ignore[union-attr]
    expirer.rests = False  # PostgreSQL: no rest, so the extra query is not made
    expirer.due = _not_asked  # type: ignore[method-assign]
    assert expirer.pass_once() == (ExpireReport(expired=0), None)


def test_enqueue_refuses_bad_partition_and_deadline_options(task: rota.Task) -> None:  # type: ignore[type-arg]
    with pytest.raises(rota.ArgumentsError, match="partition_key"):
        task.enqueue(partition_key="")
    with pytest.raises(rota.ArgumentsError, match="timezone-aware"):
        task.enqueue(expires_at=datetime.now())
    with pytest.raises(rota.ArgumentsError, match="later than at"):
        now = datetime.now(UTC)
        task.enqueue(at=now + timedelta(hours=1), expires_at=now)
    with pytest.raises(rota.ArgumentsError, match="datetime"):
        task.enqueue(expires_at=30)


def test_global_limit_caps_running_jobs_and_changes_at_run_time(
    app: rota.App,
    task: rota.Task,  # type: ignore[type-arg]
) -> None:
    task.enqueue_many([{"n": i} for i in range(10)])
    app.queues.configure("q", global_limit=3)
    first = claim(app)
    assert len(first) == 3
    assert claim(app) == []
    app.driver.job_complete_many([done(first[0])])
    assert len(claim(app)) == 1
    app.queues.configure("q", global_limit=5)
    assert len(claim(app)) == 2
    app.queues.pause("q")
    app.queues.configure("q", global_limit=None)
    assert claim(app) == []  # paused beats unlimited
    app.queues.resume("q")
    assert len(claim(app)) == 4
    assert app.queues.get("q").global_limit is None


def test_rate_limit_counts_starts_in_a_sliding_window(app: rota.App, task: rota.Task) -> None:  # type: ignore[type-arg]
    task.enqueue_many([{"n": i} for i in range(20)])
    control = app.queues.configure("q", rate=(4, 0.5))
    assert (control.rate_limit, control.rate_period, control.global_limit) == (4, 0.5, None)
    assert len(claim(app, 3)) == 3
    assert len(claim(app)) == 1
    assert claim(app) == []
    time.sleep(0.55)
    assert len(claim(app)) == 4
    app.queues.configure("q", global_limit=2)  # the rate limit is kept
    assert app.queues.get("q").rate_limit == 4


def test_queue_controls_refuse_bad_values(app: rota.App) -> None:
    with pytest.raises(rota.ArgumentsError, match="global_limit"):
        app.queues.configure("q", global_limit=0)
    with pytest.raises(rota.ArgumentsError, match="rate"):
        app.queues.configure("q", rate=(10, 0))
    with pytest.raises(rota.ArgumentsError, match="rate"):
        app.queues.configure("q", rate=10)  # type: ignore[arg-type]
    with pytest.raises(rota.ArgumentsError, match="nothing to change"):
        app.queues.configure("q")
    with pytest.raises(rota.ArgumentsError, match="queue name"):
        app.queues.configure("bad name", global_limit=1)
    assert app.queues.list() == []


def make_dead_letters(app: rota.App, task: rota.Task) -> list[rota.Job]:  # type: ignore[type-arg]
    @app.task(queue="mail", name="ops.mail")
    def mail(to: str) -> None: ...

    task.enqueue_many([{"n": i} for i in range(4)])
    mail.enqueue_many([{"to": f"u{i}"} for i in range(3)])
    jobs = claim(app) + claim(app, queue="mail")
    errors = ["ValueError", "myapp.errors.Declined", "ValueError", "KeyError"]
    completions = [
        fail(j, errors[i % 4], f"card {i} DECLINED" if i % 2 else f"bad {i}")
        for i, j in enumerate(sorted(jobs, key=lambda j: j.id))
    ]
    app.driver.job_complete_many(completions)
    return sorted(jobs, key=lambda j: j.id)


def test_dead_letters_filter_by_task_queue_error_text_time_and_ids(
    app: rota.App,
    task: rota.Task,  # type: ignore[type-arg]
) -> None:
    jobs = make_dead_letters(app, task)
    ids = [j.id for j in jobs]
    assert [j.id for j in app.dlq.list()] == ids[::-1]
    assert {j.task for j in app.dlq.list(task="ops.mail")} == {"ops.mail"}
    assert len(app.dlq.list(queue="q")) == 4
    assert [j.id for j in app.dlq.list(error_type="Declined")] == [ids[5], ids[1]]
    assert len(app.dlq.list(error_type="myapp.errors.Declined")) == 2
    assert len(app.dlq.list(error_type="ValueError")) == 4
    assert len(app.dlq.list(text="declined")) == 3
    assert [j.id for j in app.dlq.list(ids=[ids[0], ids[2]])] == [ids[2], ids[0]]
    future = datetime.now(UTC) + timedelta(minutes=1)
    assert app.dlq.list(since=future) == []
    assert len(app.dlq.list(until=future)) == 7
    assert [j.id for j in app.dlq.list(limit=2, before_id=ids[3])] == [ids[2], ids[1]]
    with pytest.raises(rota.ArgumentsError, match="unknown selection filter"):
        app.dlq.list(colour="red")
    with pytest.raises(rota.ArgumentsError, match="timezone-aware"):
        app.dlq.list(since=datetime.now())


def test_replay_dry_run_counts_match_the_replay(app: rota.App, task: rota.Task) -> None:  # type: ignore[type-arg]
    make_dead_letters(app, task)
    dry = app.dlq.replay(error_type="ValueError", reason="check", dry_run=True)
    assert dry.dry_run and dry.replay_id is None and dry.count == 4 and dry.matched == 4
    assert dry.per_task == {"ops.mail": 2, "ops.work": 2}
    assert len(app.dlq.list()) == 7  # nothing changed
    real = app.dlq.replay(error_type="ValueError", reason="downstream fixed")
    assert (real.count, real.per_task) == (dry.count, dry.per_task)
    assert len(app.dlq.list()) == 3
    capped = app.dlq.replay(selection={"queue": "q"}, reason="r", dry_run=True, limit=1)
    assert (capped.count, capped.matched) == (1, 2)


def test_replaying_twice_creates_no_duplicates(app: rota.App, task: rota.Task) -> None:  # type: ignore[type-arg]
    jobs = make_dead_letters(app, task)
    total = sum(q.counts.get(s, 0) for q in app.list_queues() for s in q.counts)
    first = app.dlq.replay(Selection(queue="q"), reason="once")
    second = app.dlq.replay(Selection(queue="q"), reason="twice")
    assert first.count == 4 and second.count == 0 and second.job_ids == ()
    assert set(first.job_ids) == {j.id for j in jobs if j.queue == "q"}
    assert sum(q.counts.get(s, 0) for q in app.list_queues() for s in q.counts) == total
    replayed = app.get_job(first.job_ids[0])
    assert replayed is not None and replayed.state is rota.JobState.AVAILABLE
    assert replayed.meta["replay_id"] == first.replay_id
    assert replayed.max_attempts == replayed.attempt + 1


def test_replay_is_audited_paced_and_bounded(app: rota.App, task: rota.Task) -> None:  # type: ignore[type-arg]
    make_dead_letters(app, task)
    with pytest.raises(rota.ArgumentsError, match="refusing to replay every dead letter"):
        app.dlq.replay(reason="everything")
    with pytest.raises(rota.ArgumentsError, match="reason"):
        app.dlq.replay(task="ops.work", reason=" ")
    with pytest.raises(rota.ArgumentsError, match="rate"):
        app.dlq.replay(task="ops.work", reason="r", rate=0)
    assert app.dlq.replays() == []  # refused before anything was written
    report = app.dlq.replay(all=True, reason="incident 42 resolved", rate=2.0)
    assert report.count == 7 and report.seconds == pytest.approx(3.0)
    states = [app.get_job(i).state for i in report.job_ids]  # type: ignore[union-attr]
    assert states[0] is rota.JobState.AVAILABLE
    assert set(states[1:]) == {rota.JobState.SCHEDULED}
    (record,) = app.dlq.replays()
    assert record.id == report.replay_id and record.count == 7
    assert record.job_ids == report.job_ids and record.rate == 2.0
    assert record.reason == "incident 42 resolved" and record.selection == {"all": True}
    assert record.principal.startswith("direct:") and "(admin)" in record.principal
    assert abs(record.created_at - app.driver.db_now()) < timedelta(seconds=10)


def test_replay_needs_the_replay_permission(app: rota.App, task: rota.Task) -> None:  # type: ignore[type-arg]
    make_dead_letters(app, task)
    operator = app.tokens.create("ops-bot", "operator")
    replayer = app.tokens.create("replay-bot", "replayer")
    with pytest.raises(rota.PermissionDeniedError, match="replay"):
        app.dlq.replay(task="ops.work", reason="r", token=operator)
    with pytest.raises(rota.PermissionDeniedError):
        app.dlq.replay(
            task="ops.work", reason="r", principal=rota.Principal("v", rota.Role.VIEWER, "token")
        )
    with pytest.raises(rota.AuthenticationError):
        app.dlq.replay(task="ops.work", reason="r", token="rota_nope")
    assert app.dlq.replays() == [] and len(app.dlq.list()) == 7
    # An operator may still look (dry run needs dlq_read only).
    assert app.dlq.replay(task="ops.work", reason="r", dry_run=True, token=operator).count == 4
    report = app.dlq.replay(task="ops.work", reason="r", token=replayer)
    assert report.count == 4 and report.principal == "token:replay-bot (replayer)"
    assert app.dlq.replays()[0].principal == "token:replay-bot (replayer)"
    with pytest.raises(rota.PermissionDeniedError, match="operate"):
        app.dlq.dismiss([1], reason="r", token=replayer)


def test_retention_prunes_each_state_after_its_own_period(
    app: rota.App,
    task: rota.Task,  # type: ignore[type-arg]
) -> None:
    jobs = task.enqueue_many([{"n": i} for i in range(9)])
    running = claim(app)
    app.driver.job_complete_many([done(j) for j in running[:3]] + [fail(j) for j in running[3:6]])
    for job in jobs[6:]:
        app.cancel_job(job.id)  # running ones: asks them to stop; finish them as cancelled
    app.driver.job_complete_many(
        [
            Completion(
                j.id, j.lease_token or "", rota.JobState.CANCELLED, '{"outcome":"cancelled"}'
            )
            for j in running[6:]
        ]
    )
    time.sleep(0.05)
    hour = 3600.0
    keep = Pruner(app.driver, 60, completed_age=hour, discarded_age=hour, cancelled_age=hour)
    assert keep.run_once().deleted == 0
    pruner = Pruner(
        app.driver, 60, completed_age=0.01, discarded_age=float("inf"), cancelled_age=hour, batch=2
    )
    report = pruner.run_once()
    assert (report.completed, report.cancelled, report.discarded) == (3, 0, 0)
    wait_for(lambda: len(app.dlq.list()) == 3)
    report = Pruner(
        app.driver, 60, completed_age=hour, discarded_age=0.01, cancelled_age=0.01
    ).run_once()
    assert (report.completed, report.cancelled, report.discarded) == (0, 3, 3)
    assert all(app.get_job(j.id) is None for j in jobs)


def test_a_pruner_pass_that_runs_out_of_time_comes_back_at_once(
    app: rota.App,
    task: rota.Task,  # type: ignore[type-arg]
) -> None:
    """Retention keeps up with any rate: a pass deletes for at most its budget, says a
    backlog remains, and the next pass follows at once; the pass that finds the end waits
    the interval again."""
    task.enqueue_many([{"n": i} for i in range(30)])
    done = '{"outcome":"completed"}'
    app.driver.job_complete_many(
        [
            Completion(j.id, j.lease_token or "", rota.JobState.COMPLETED, done)
            for j in claim(app, 30)
        ]
    )
    # Finished strictly before the prune's "now" (age 0 prunes `finished_at < now`): on
    # SQLite's millisecond clock a prune in the same millisecond found nothing to delete.
    time.sleep(0.01)
    now = [0.0]

    def clock() -> float:
        now[0] += 0.3  # every look at the clock is 0.3 s later: a slow database
        return now[0]

    pruner = Pruner(
        app.driver, 60, completed_age=0, discarded_age=0, cancelled_age=0, batch=4, clock=clock
    )
    first = pruner.run_once()
    assert first.backlog and 0 < first.completed < 30
    assert pruner.next_delay(first) == pruner.backlog_delay
    pruner.clock = time.monotonic
    rest = pruner.run_once()
    assert not rest.backlog and first.completed + rest.completed == 30
    assert pruner.next_delay(rest) == 60
    assert app.list_jobs(state=rota.JobState.COMPLETED) == []


def test_prune_batches_grow_while_quick_and_shrink_when_slow() -> None:
    sizer = BatchSizer(1000)
    sizer.took(0.01, full=True)
    assert sizer.size == 2000
    sizer.took(0.01, full=False)  # a short batch says nothing about the size
    assert sizer.size == 2000
    sizer.took(1.0, full=True)
    assert sizer.size == 1000
    for _ in range(20):
        sizer.took(0.001, full=True)
    assert sizer.size == BatchSizer.MAX_BATCH
    for _ in range(20):
        sizer.took(5.0, full=True)
    assert sizer.size == 100


def test_worker_settings_validate_retention() -> None:
    with pytest.raises(rota.ConfigurationError, match="cancelled_retention"):
        rota.WorkerSettings(cancelled_retention=-1)
    with pytest.raises(rota.ConfigurationError, match="prune_batch"):
        rota.WorkerSettings(prune_batch=0)
    assert rota.WorkerSettings(discarded_retention=float("inf")).discarded_retention > 0


def test_racing_replays_take_each_dead_letter_once(app: rota.App, task: rota.Task) -> None:  # type: ignore[type-arg]
    task.enqueue_many([{"n": i} for i in range(40)])
    app.driver.job_complete_many([fail(j) for j in claim(app, 40)])
    reports: list[ReplayReport] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def replay() -> None:
        try:
            barrier.wait()
            reports.append(app.dlq.replay(queue="q", reason="race"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=replay) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    taken = [job_id for r in reports for job_id in r.job_ids]
    assert len(taken) == len(set(taken)) == 40
    assert sum(r.count for r in app.dlq.replays()) == 40
