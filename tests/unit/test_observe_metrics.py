"""Process-local metrics: histogram buckets, counters per outcome, how an attempt's end
maps to a counter, and the schedule lag arithmetic."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from rota.drivers.base import Completion
from rota.errors import Discard, Snooze
from rota.job import Job, JobState
from rota.observe.cluster import schedule_lag
from rota.schedules.store import ScheduleRecord
from rota.telemetry import metrics as m
from rota.telemetry.attempts import outcome_of

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def job(task: str = "shop.ticket", queue: str = "default", **kw: object) -> Job:
    values: dict[str, object] = dict(
        id=1,
        task=task,
        queue=queue,
        args={},
        state=JobState.RUNNING,
        priority=0,
        attempt=1,
        max_attempts=3,
        run_at=T0,
        created_at=T0,
        attempted_at=T0 + timedelta(seconds=2),
    )
    values.update(kw)
    return Job(**values)  # type: ignore[arg-type]


def test_histogram_buckets_are_cumulative_and_inclusive() -> None:
    hist = m.Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 1.0, 7.0):
        hist.observe(value)
    assert hist.cumulative() == [("0.1", 2), ("1.0", 4), ("+Inf", 5)]
    assert hist.sum == pytest.approx(8.65)


def test_counters_by_outcome_task_and_queue() -> None:
    metrics = m.ProcessMetrics()
    a, b = job("a", "q1"), job("b", "q2")
    metrics.jobs_enqueued([a, a, b, job("b", "q2", created=False)])
    metrics.attempt_finished(a, m.COMPLETED, 0.2)
    metrics.attempt_finished(a, m.RETRIED, 0.3)
    unclaimed = job("b", "q2", attempted_at=None)  # no attempt time: no wait observed
    metrics.attempt_finished(unclaimed, m.FAILED_FINAL, 0.4)
    metrics.attempt_finished(unclaimed, m.DISCARDED, 0.0)
    metrics.attempt_finished(unclaimed, m.OTHER, 0.0)
    snap = metrics.snapshot()
    assert snap.enqueued == {("a", "q1"): 2, ("b", "q2"): 1}  # the duplicate key is not new
    assert snap.completed == {("a", "q1"): 1}
    assert snap.failed == {("a", "q1"): 1, ("b", "q2"): 1}
    assert snap.retried == {("a", "q1"): 1}
    assert snap.discarded == {("b", "q2"): 2}
    assert snap.wait["a"].count == 2 and snap.wait["a"].sum == pytest.approx(4.0)
    assert snap.run["a"].sum == pytest.approx(0.5)
    assert snap.run["b"].count == 3  # every attempt is timed, whatever its outcome
    assert "b" not in snap.wait


def test_wait_is_never_negative() -> None:
    metrics = m.ProcessMetrics()
    # Claimed a moment before run_at (the two clocks are the database's; rounding).
    metrics.attempt_finished(job(attempted_at=T0 - timedelta(milliseconds=3)), m.COMPLETED, 0)
    snap = metrics.snapshot().wait["shop.ticket"]
    assert snap.count == 1 and snap.sum == 0.0
    assert snap.buckets[0] == ("0.005", 1)


def test_counts_from_many_threads_add_up() -> None:
    metrics = m.ProcessMetrics()
    a = job()

    def work() -> None:
        for _ in range(2_000):
            metrics.jobs_enqueued([a])
            metrics.attempt_finished(a, m.COMPLETED, 0.001)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = metrics.snapshot()
    assert snap.enqueued[("shop.ticket", "default")] == 8_000
    assert snap.completed[("shop.ticket", "default")] == 8_000
    assert snap.run["shop.ticket"].count == 8_000


@dataclass
class Ended:
    completion: Completion | None
    completed: bool = False
    error: BaseException | None = None


def completion(state: JobState, refund: bool = False) -> Completion:
    return Completion(1, "t", state, "{}", refund_attempt=refund)


@pytest.mark.parametrize(
    ("ended", "expected"),
    [
        (None, m.OTHER),
        (Ended(None), m.OTHER),  # lease lost
        (Ended(None, completed=True), m.COMPLETED),  # ctx.transaction()
        (Ended(completion(JobState.COMPLETED)), m.COMPLETED),
        (Ended(completion(JobState.RETRYABLE), error=ValueError()), m.RETRIED),
        (Ended(completion(JobState.AVAILABLE), error=ValueError()), m.RETRIED),  # after=0
        (Ended(completion(JobState.AVAILABLE, refund=True)), m.OTHER),  # shutdown
        (Ended(completion(JobState.SCHEDULED, refund=True), error=Snooze(5)), m.OTHER),
        (Ended(completion(JobState.DISCARDED), error=ValueError()), m.FAILED_FINAL),
        (Ended(completion(JobState.DISCARDED), error=Discard("spam")), m.DISCARDED),
        (Ended(completion(JobState.CANCELLED)), m.OTHER),
    ],
)
def test_outcome_of_an_attempt(ended: Ended | None, expected: str) -> None:
    assert outcome_of(ended) == expected


def schedule(expression: str = "*/10 * * * *", **kw: object) -> ScheduleRecord:
    values: dict[str, object] = dict(
        id=1,
        name="digest",
        task="shop.digest",
        queue="default",
        priority=0,
        max_attempts=3,
        args_json="{}",
        expression=expression,
        timezone="UTC",
        dst="once",
        concurrency="allow",
        starting_deadline=None,
        successful_history_limit=3,
        failed_history_limit=1,
        strict_missed_limit=False,
        suspended=False,
        created_at=T0 - timedelta(days=1),
        updated_at=T0,
    )
    values.update(kw)
    return ScheduleRecord(**values)  # type: ignore[arg-type]


def test_schedule_lag_counts_from_the_oldest_unstarted_tick() -> None:
    # Last run at 11:40; ticks at 11:50 and 12:00 are due but not started.
    record = schedule(last_schedule_time=T0 - timedelta(minutes=20))
    assert schedule_lag(record, T0 + timedelta(seconds=30)) == 10 * 60 + 30


def test_schedule_lag_is_zero_on_time_or_suspended() -> None:
    on_time = schedule(last_schedule_time=T0)
    assert schedule_lag(on_time, T0 + timedelta(minutes=9, seconds=59)) == 0.0
    assert schedule_lag(on_time, T0 + timedelta(minutes=10, seconds=2)) == 2.0
    late = schedule(last_schedule_time=T0 - timedelta(hours=1), suspended=True)
    assert schedule_lag(late, T0) == 0.0


def test_schedule_lag_starts_after_a_recorded_miss_or_creation() -> None:
    missed = schedule(
        last_schedule_time=T0 - timedelta(hours=1), last_missed_time=T0 - timedelta(minutes=10)
    )
    assert schedule_lag(missed, T0 + timedelta(seconds=5)) == 5.0
    fresh = schedule(created_at=T0 - timedelta(minutes=3))  # never ran: from creation on
    assert schedule_lag(fresh, T0 + timedelta(minutes=1)) == 60.0
