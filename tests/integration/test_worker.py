"""The worker in-process, on both dialects: outcomes, retries, control flow, timeouts,
cancellation, fencing of stale writes and graceful shutdown."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import rota
from rota.drivers.base import JobInsert
from rota.worker.fetcher import claim_now
from tests.helpers import async_wait_for, claims_tried, fast_settings, run_worker_until


def state_of(app: rota.App, job_id: int) -> rota.JobState | None:
    job = app.get_job(job_id)
    return job.state if job else None


def finished(app: rota.App, *ids: int) -> bool:
    return all((j := app.get_job(i)) is not None and j.state.finished for i in ids)


def test_sync_and_async_tasks_complete_with_results(app: rota.App) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(queue="other")
    async def shout(ctx: rota.Context, word: str) -> dict[str, object]:
        await asyncio.sleep(0.01)
        return {"word": word.upper(), "attempt": ctx.attempt, "job": ctx.job.id}

    j1 = add.enqueue(a=2, b=3)
    j2 = shout.enqueue(word="hi")
    worker = rota.Worker(app, fast_settings(queues={"default": 2, "other": 2}))
    asyncio.run(run_worker_until(worker, lambda: finished(app, j1.id, j2.id)))
    r1, r2 = app.get_job(j1.id), app.get_job(j2.id)
    assert r1 is not None and r1.state is rota.JobState.COMPLETED and r1.result == 5
    assert r2 is not None and r2.result == {"word": "HI", "attempt": 1, "job": j2.id}
    (attempt,) = r2.history
    assert attempt.outcome is rota.Outcome.COMPLETED and attempt.worker == worker.id


def test_failures_retry_with_backoff_then_succeed(app: rota.App) -> None:
    calls: list[int] = []

    @app.task(max_attempts=5, backoff=rota.Backoff(base=0.05, cap=0.1))
    def flaky(ctx: rota.Context) -> str:
        calls.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError(f"downstream unavailable (try {ctx.attempt})")
        return "ok"

    job = flaky.enqueue()
    asyncio.run(run_worker_until(rota.Worker(app, fast_settings()), lambda: finished(app, job.id)))
    final = app.get_job(job.id)
    assert final is not None and final.state is rota.JobState.COMPLETED
    assert calls == [1, 2, 3] and final.attempt == 3
    outcomes = [(a.attempt, a.outcome.value, a.error_type) for a in final.history]
    assert outcomes == [
        (1, "failed", "ConnectionError"),
        (2, "failed", "ConnectionError"),
        (3, "completed", None),
    ]
    assert "downstream unavailable (try 1)" in (final.history[0].message or "")
    assert "raise ConnectionError" in (final.history[0].traceback or "")


def test_exhausted_attempts_and_permanent_errors_are_dead_lettered(app: rota.App) -> None:
    class CardDeclined(Exception):
        pass

    @app.task(max_attempts=2, backoff=rota.Backoff(base=0.01, cap=0.01), permanent=[CardDeclined])
    def charge(declined: bool) -> None:
        if declined:
            raise CardDeclined("card declined")
        raise RuntimeError("boom")

    broken = charge.enqueue(declined=False)
    declined = charge.enqueue(declined=True)
    asyncio.run(
        run_worker_until(
            rota.Worker(app, fast_settings()), lambda: finished(app, broken.id, declined.id)
        )
    )
    b, d = app.get_job(broken.id), app.get_job(declined.id)
    assert b is not None and d is not None
    assert b.state is rota.JobState.DISCARDED and b.attempt == 2
    assert [a.outcome.value for a in b.history] == ["failed", "discarded"]
    assert d.state is rota.JobState.DISCARDED and d.attempt == 1
    assert d.history[0].error_type.endswith("CardDeclined")  # type: ignore[union-attr]
    assert app.list_jobs(state="discarded", limit=10)


def test_retry_after_snooze_and_discard(app: rota.App) -> None:
    @app.task(max_attempts=3)
    def controlled(ctx: rota.Context, mode: str) -> str:
        if mode == "retry" and ctx.attempt == 1:
            raise rota.Retry("rate limited", after=0.3)
        if mode == "snooze" and ctx.attempt == 1:
            raise rota.Snooze(0.2)
        if mode == "discard":
            raise rota.Discard("order was refunded")
        return mode

    retry = controlled.enqueue(mode="retry")
    snooze = controlled.enqueue(mode="snooze")
    discard = controlled.enqueue(mode="discard")
    asyncio.run(
        run_worker_until(
            rota.Worker(app, fast_settings()),
            lambda: finished(app, retry.id, snooze.id, discard.id),
        )
    )
    r, s, d = (app.get_job(j.id) for j in (retry, snooze, discard))
    assert r is not None and s is not None and d is not None
    assert r.state is rota.JobState.COMPLETED
    first, second = r.history
    assert first.message == "rate limited" and first.error_type.endswith("Retry")  # type: ignore[union-attr]
    gap = (second.started_at - first.finished_at).total_seconds()  # type: ignore[operator]
    assert gap >= 0.29
    # Snooze does not spend an attempt: max_attempts grows by one.
    assert s.state is rota.JobState.COMPLETED and s.max_attempts == 4
    assert [a.outcome.value for a in s.history] == ["snoozed", "completed"]
    assert d.state is rota.JobState.DISCARDED and d.attempt == 1
    assert d.history[0].message == "order was refunded"


def test_timeouts_fail_the_attempt(app: rota.App) -> None:
    @app.task(timeout=0.2, max_attempts=1)
    async def slow_async() -> None:
        await asyncio.sleep(10)

    @app.task(timeout=0.2, max_attempts=1)
    def slow_sync(ctx: rota.Context) -> None:
        ctx.wait_cancelled(10)  # a cooperative sync task notices the timeout

    a, s = slow_async.enqueue(), slow_sync.enqueue()
    started = time.monotonic()
    asyncio.run(
        run_worker_until(rota.Worker(app, fast_settings()), lambda: finished(app, a.id, s.id))
    )
    assert time.monotonic() - started < 5
    for job_id in (a.id, s.id):
        job = app.get_job(job_id)
        assert job is not None and job.state is rota.JobState.DISCARDED
        assert job.history[0].error_type == "rota.errors.TaskTimeoutError"


def test_unknown_task_is_retried_not_dropped(app: rota.App) -> None:
    (job,) = app.driver.job_insert_many(
        [JobInsert(task="gone.task", queue="default", args_json="{}", priority=0, max_attempts=2)]
    )

    @app.task
    def present() -> None: ...

    asyncio.run(run_worker_until(rota.Worker(app, fast_settings()), lambda: finished(app, job.id)))
    final = app.get_job(job.id)
    assert final is not None and final.state is rota.JobState.DISCARDED and final.attempt == 2
    assert final.history[0].outcome is rota.Outcome.FAILED
    assert "unknown task 'gone.task'" in (final.history[0].message or "")


def test_cancel_a_running_job(app: rota.App) -> None:
    started = threading.Event()

    @app.task
    async def long_async() -> None:
        started.set()
        await asyncio.sleep(30)

    @app.task
    def long_sync(ctx: rota.Context) -> str:
        # Sync code cannot be interrupted: it checks ctx.cancelled and stops by raising.
        for _ in range(3000):
            if ctx.cancelled:
                raise RuntimeError("stopping: cancelled")
            time.sleep(0.01)
        return "finished anyway"

    a, s = long_async.enqueue(), long_sync.enqueue()

    def cancel_when_running() -> bool:
        for job in (a, s):
            current = app.get_job(job.id)
            if (
                current is not None
                and current.state is rota.JobState.RUNNING
                and not current.cancel_requested
            ):
                app.cancel_job(job.id)
        return finished(app, a.id, s.id)

    asyncio.run(run_worker_until(rota.Worker(app, fast_settings()), cancel_when_running))
    fa, fs = app.get_job(a.id), app.get_job(s.id)
    assert fa is not None and fa.state is rota.JobState.CANCELLED
    assert fa.history[-1].outcome is rota.Outcome.CANCELLED
    assert fs is not None and fs.state is rota.JobState.CANCELLED and fs.result is None
    assert fs.history[-1].outcome is rota.Outcome.CANCELLED


def test_a_rescued_job_refuses_the_stale_workers_writes(app: rota.App) -> None:
    """Worker A stalls; its lease is taken over; when A comes back its completion is
    refused by the fencing token and the new attempt stands."""
    release = threading.Event()
    runs: list[str] = []

    @app.task
    def stall(ctx: rota.Context) -> str:
        runs.append(ctx.worker_id)
        if len(runs) == 1:
            release.wait(20)  # the first run stalls past its lease
            return "stale"
        return "fresh"

    job = stall.enqueue()
    # One slot, so A cannot claim the job again itself while its first run stalls.
    worker_a = rota.Worker(
        app,
        fast_settings(
            queues={"default": 1}, lease=0.5, heartbeat=0.2, maintenance=False, worker_id="A"
        ),
    )

    async def scenario() -> None:
        task_a = asyncio.create_task(worker_a.run())
        # Running, and tracked by A's heartbeater (the claim commits before A starts it).
        while worker_a.heartbeater.context(job.id) is None:
            await asyncio.sleep(0.02)
        assert state_of(app, job.id) is rota.JobState.RUNNING
        # Simulate a long GC pause of A: its heartbeater does not get to renew. (A beat
        # already under way may still renew it once; the rescue waits that out.)
        worker_a.heartbeater.untrack(job.id)

        async def rescued() -> bool:
            report = await asyncio.to_thread(app.driver.job_rescue_expired, 10)
            return report.rescued == 1

        await async_wait_for(rescued, timeout=10)
        fetched = await asyncio.to_thread(claim_now, app, "default", 1, "B", 30)
        assert fetched and fetched[0].attempt == 2
        release.set()  # A wakes up and tries to complete attempt 1
        while worker_a.completer.refused == 0:
            await asyncio.sleep(0.02)
        current = app.get_job(job.id)
        assert current is not None and current.state is rota.JobState.RUNNING
        assert current.lease_token == fetched[0].lease_token
        worker_a.stop()
        await task_a

    asyncio.run(scenario())
    final = app.get_job(job.id)
    assert final is not None and final.result is None and final.worker == "B"
    assert [a.outcome.value for a in final.history] == ["lost"]


def test_graceful_stop_returns_unfinished_jobs_without_spending_an_attempt(app: rota.App) -> None:
    @app.task
    async def endless() -> None:
        await asyncio.sleep(60)

    @app.task
    async def quick() -> str:
        await asyncio.sleep(0.3)
        return "done"

    e, q = endless.enqueue(), quick.enqueue()
    worker = rota.Worker(app, fast_settings(grace=1.0))

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        while not (
            state_of(app, e.id) is rota.JobState.RUNNING
            and state_of(app, q.id) is rota.JobState.RUNNING
        ):
            await asyncio.sleep(0.01)
        started = time.monotonic()
        worker.stop()
        await task
        assert time.monotonic() - started < 5

    asyncio.run(scenario())
    fe, fq = app.get_job(e.id), app.get_job(q.id)
    assert fq is not None and fq.state is rota.JobState.COMPLETED and fq.result == "done"
    assert fe is not None and fe.state is rota.JobState.AVAILABLE
    assert fe.max_attempts == 21 and fe.lease_token is None
    (attempt,) = fe.history
    assert attempt.outcome is rota.Outcome.SHUTDOWN


def test_paused_queue_holds_jobs_until_resumed(app: rota.App) -> None:
    @app.task(queue="reports")
    def report() -> None: ...

    app.pause_queue("reports")
    job = report.enqueue()
    worker = rota.Worker(app, fast_settings(queues={"reports": 1}))

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        await claims_tried(worker, "reports")  # it looked, and the pause held
        assert state_of(app, job.id) is rota.JobState.AVAILABLE
        await asyncio.to_thread(app.resume_queue, "reports")
        while state_of(app, job.id) is not rota.JobState.COMPLETED:
            await asyncio.sleep(0.02)
        worker.stop()
        await task

    asyncio.run(asyncio.wait_for(scenario(), 20))


@pytest.mark.parametrize("count", [300])
def test_many_jobs_each_complete_exactly_once(app: rota.App, count: int) -> None:
    seen: list[int] = []
    lock = threading.Lock()

    @app.task
    def record(n: int) -> None:
        with lock:
            seen.append(n)

    @app.task
    async def record_async(n: int) -> None:
        seen.append(n)

    record.enqueue_many([{"n": i} for i in range(count)])
    record_async.enqueue_many([{"n": count + i} for i in range(count)])
    worker = rota.Worker(app, fast_settings(queues={"default": 16}, fetch_batch=10))
    done = lambda: len(app.list_jobs(state="completed", limit=10_000)) == 2 * count  # noqa: E731
    asyncio.run(run_worker_until(worker, done, timeout=60))
    assert sorted(seen) == list(range(2 * count))


def test_a_result_that_is_not_json_is_dead_lettered_at_once(app: rota.App) -> None:
    @app.task(max_attempts=5)
    def returns_a_set() -> object:
        return {1, 2}

    job = returns_a_set.enqueue()
    asyncio.run(run_worker_until(rota.Worker(app, fast_settings()), lambda: finished(app, job.id)))
    final = app.get_job(job.id)
    assert final is not None and final.state is rota.JobState.DISCARDED and final.attempt == 1
    assert "not JSON" in (final.history[0].message or "")


def test_stored_tracebacks_start_in_the_task(app: rota.App) -> None:
    @app.task(max_attempts=1)
    def explode() -> None:
        raise KeyError("missing seat")

    job = explode.enqueue()
    asyncio.run(run_worker_until(rota.Worker(app, fast_settings()), lambda: finished(app, job.id)))
    text = app.get_job(job.id).history[0].traceback or ""  # type: ignore[union-attr]
    assert 'raise KeyError("missing seat")' in text
    assert "executor.py" not in text and "concurrent/futures" not in text
