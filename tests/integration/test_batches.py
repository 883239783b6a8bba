"""Batches with real in-process workers on both dialects: every Kubernetes Job rule the
controller applies (parallelism, backoff limits, per-index limits, failure rules, success
policy, deadline over back-off, TTL, suspend/resume, cancel), the callback, ctx.index and
ctx.total, creation in the caller's transaction, and bad input refused before writing."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import rota
from rota.batches import BatchError, BatchNotFoundError, FailureRule, SuccessRule
from rota.batches.service import BatchController, BatchReport
from rota.job import JobState
from tests.helpers import fast_settings, run_worker_until


class Gauge:
    """Counts tasks running at the same time (in-process, so exact)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def __enter__(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.now -= 1


def run(app: rota.App, until: Callable[[], object], timeout: float = 20.0) -> None:
    settings = fast_settings(queues={"default": 8}, batch_interval=0.05)
    worker = rota.Worker(app, settings)
    asyncio.run(run_worker_until(worker, until, timeout=timeout))


def finished(app: rota.App, ref: int | str) -> Callable[[], bool]:
    return lambda: app.batches.get(ref).finished


def stop_when_cancelled(ctx: rota.Context) -> None:
    """Run until the controller cancels this job, then stop (sync tasks cooperate)."""
    if ctx.wait_cancelled(15):
        raise RuntimeError("stopped on request")


def test_indexed_batch_sees_index_and_total_respects_parallelism_and_calls_back(
    app: rota.App,
) -> None:
    gauge = Gauge()
    seen: list[tuple[int, int]] = []
    sampled: list[int] = []

    @app.task
    def shard(ctx: rota.Context) -> int:
        with gauge:
            seen.append((ctx.index, ctx.total))
            ctx.wait_cancelled(0.05)
        return ctx.index * 10

    @app.task
    def report(batch: dict[str, Any]) -> str:
        return f"{batch['condition']} {batch['completed_indexes']}"

    status = app.batch(shard, completions=8, indexed=True, parallelism=3, on_finish=report)
    assert status.active == 3 and status.state == "running" and status.start_time is not None

    def done() -> bool:
        current = app.batches.get(status.id)
        sampled.append(current.active)
        if current.callback_job_id is None:
            return False
        job = app.get_job(current.callback_job_id)
        return job is not None and job.state is JobState.COMPLETED

    run(app, done)
    final = app.batches.get(status.id)
    assert (final.condition, final.reason) == ("Complete", "CompletionsReached")
    assert (final.succeeded, final.failed, final.completed_indexes) == (8, 0, "0-7")
    assert final.completion_time is not None and final.finished_at is not None
    assert sorted(seen) == [(i, 8) for i in range(8)]
    assert gauge.peak <= 3 and max(sampled) <= 3
    jobs = app.batches.jobs(status.id)
    assert sorted(j.result for j in jobs) == [i * 10 for i in range(8)]
    assert all(j.max_attempts == 1 for j in jobs)
    callback = app.get_job(final.callback_job_id or 0)
    assert callback is not None and callback.result == "Complete 0-7"
    assert callback.args["batch"]["succeeded"] == 8


def test_items_run_one_job_each_with_the_item_as_arguments(app: rota.App) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    def shout(item: str) -> str:
        return item.upper()

    first = app.batch(add, items=[{"a": 1, "b": 2}, {"a": 3, "b": 4}], parallelism=2)
    second = app.batch(shout, items=["x", "y", "z"], parallelism=2, name="shouts")
    run(app, lambda: app.batches.get(first.id).finished and app.batches.get("shouts").finished)
    assert sorted(j.result for j in app.batches.jobs(first.id)) == [3, 7]
    assert sorted(j.result for j in app.batches.jobs(second.id)) == ["X", "Y", "Z"]
    assert app.batches.get("shouts").to_json()["mode"] == "NonIndexed"


def test_backoff_limit_counts_failed_attempts_across_the_batch(app: rota.App) -> None:
    @app.task
    def always_fails() -> None:
        raise ValueError("no")

    status = app.batch(always_fails, completions=2, parallelism=1, backoff_limit=2, backoff_delay=0)
    run(app, finished(app, status.id))
    final = app.batches.get(status.id)
    assert (final.condition, final.reason) == ("Failed", "BackoffLimitExceeded")
    assert final.failed == 3 and final.succeeded == 0 and final.completion_time is None
    jobs = app.batches.jobs(status.id)
    assert [j.state for j in jobs] == [JobState.DISCARDED] * 3
    assert jobs[0].history[-1].error_type == "ValueError"


def test_per_index_limits_and_max_failed_indexes(app: rota.App) -> None:
    @app.task
    def odd_only(ctx: rota.Context) -> None:
        if ctx.index % 2 == 0:
            raise ValueError(f"index {ctx.index}")

    common = dict(indexed=True, parallelism=6, backoff_limit_per_index=1, backoff_delay=0)
    docs = app.batch(odd_only, completions=6, max_failed_indexes=5, **common)
    strict = app.batch(odd_only, completions=6, max_failed_indexes=1, **common)
    run(app, lambda: app.batches.get(docs.id).finished and app.batches.get(strict.id).finished)
    final = app.batches.get(docs.id)
    assert (final.condition, final.reason) == ("Failed", "FailedIndexes")
    assert (final.completed_indexes, final.failed_indexes) == ("1,3,5", "0,2,4")
    assert (final.failed, final.succeeded) == (6, 3)
    over = app.batches.get(strict.id)
    assert (over.condition, over.reason) == ("Failed", "MaxFailedIndexesExceeded")
    assert len(over.failed_indexes or "") >= 3  # at least two failed indexes, "0,2"


class Transient(Exception):
    pass


class Flaky(Transient):
    pass


def test_failure_rules_by_exception_type(app: rota.App) -> None:
    tries: Counter[int] = Counter()

    @app.task
    def mixed(ctx: rota.Context) -> str:
        tries[ctx.index] += 1
        if ctx.index == 0 and tries[0] == 1:
            raise Flaky("a subclass of Transient: ignored")
        if ctx.index == 1:
            raise LookupError("fails its index at once")
        if ctx.index == 2 and tries[2] == 1:
            raise RuntimeError("counted, then retried")
        return "ok"

    rules = [
        FailureRule("ignore", on=[Transient]),
        FailureRule("fail_index", on=[LookupError]),
        FailureRule("fail_batch", on=[KeyError]),
    ]
    status = app.batch(
        mixed,
        completions=3,
        indexed=True,
        parallelism=3,
        backoff_limit_per_index=3,
        failure_rules=rules,
        backoff_delay=0,
    )
    run(app, finished(app, status.id))
    final = app.batches.get(status.id)
    assert (final.completed_indexes, final.failed_indexes) == ("0,2", "1")
    assert (final.ignored, final.failed) == (1, 2)
    assert (final.condition, final.reason) == ("Failed", "FailedIndexes")
    assert tries == {0: 2, 1: 1, 2: 2}


def test_a_fail_batch_rule_fails_at_once_and_cancels_running_jobs(app: rota.App) -> None:
    @app.task
    def one_bad(ctx: rota.Context) -> None:
        if ctx.index == 0:
            raise KeyError("fatal")
        stop_when_cancelled(ctx)

    rules = [FailureRule("FailJob", on=[KeyError])]
    status = app.batch(one_bad, completions=3, indexed=True, parallelism=3, failure_rules=rules)
    run(app, finished(app, status.id))
    final = app.batches.get(status.id)
    assert (final.condition, final.reason) == ("Failed", "PodFailurePolicy")
    assert "KeyError" in (final.message or "")
    states = sorted(str(j.state) for j in app.batches.jobs(status.id))
    assert states == ["cancelled", "cancelled", "discarded"]


def test_success_policy_completes_early_and_cancels_the_rest(app: rota.App) -> None:
    @app.task
    def leader_only(ctx: rota.Context) -> None:
        if ctx.index != 0:
            stop_when_cancelled(ctx)

    status = app.batch(
        leader_only,
        completions=4,
        indexed=True,
        parallelism=4,
        success_policy=[SuccessRule(succeeded_indexes="0")],
    )
    run(app, finished(app, status.id))
    final = app.batches.get(status.id)
    assert (final.condition, final.reason) == ("Complete", "SuccessPolicy")
    assert final.completed_indexes == "0" and final.failed == 0
    assert Counter(str(j.state) for j in app.batches.jobs(status.id)) == {
        "completed": 1,
        "cancelled": 3,
    }


def test_deadline_beats_the_backoff_limit_and_cancels_running_jobs(app: rota.App) -> None:
    @app.task
    def slow_or_failing(ctx: rota.Context) -> None:
        if ctx.index == 0:
            raise ValueError("fails; its retry waits 30 s")
        stop_when_cancelled(ctx)

    status = app.batch(
        slow_or_failing,
        completions=2,
        indexed=True,
        parallelism=2,
        backoff_limit=6,
        backoff_delay=30,
        active_deadline=1.0,
    )
    run(app, finished(app, status.id))
    final = app.batches.get(status.id)
    assert (final.condition, final.reason) == ("Failed", "DeadlineExceeded")
    assert final.failed == 1  # retries were left, but the deadline came first
    jobs = app.batches.jobs(status.id)
    assert [str(j.state) for j in jobs] == ["discarded", "cancelled"]


def test_ttl_after_finished_prunes_the_batch_and_its_jobs(app: rota.App) -> None:
    @app.task
    def quick() -> None:
        pass

    @app.task
    def noted(batch: dict[str, Any]) -> None:
        pass

    status = app.batch(
        quick,
        completions=3,
        parallelism=3,
        ttl_after_finished=0.2,
        on_finish=noted,
        name="short-lived",
    )
    job_ids = [j.id for j in app.batches.jobs(status.id)]
    assert len(job_ids) == 3

    def gone() -> bool:
        try:
            app.batches.get("short-lived")
        except BatchNotFoundError:
            return True
        return False

    run(app, gone)
    assert all(app.get_job(i) is None for i in job_ids)
    # The callback is not part of the batch: it ran and stays until normal retention.
    callbacks = app.list_jobs(task=noted.name)
    assert len(callbacks) == 1 and callbacks[0].args["batch"]["condition"] == "Complete"
    # The name is free again.
    assert app.batch(quick, completions=0, name="short-lived").created


def test_suspend_and_resume(app: rota.App) -> None:
    release = threading.Event()

    @app.task
    def waits(ctx: rota.Context) -> None:
        if not release.is_set():
            stop_when_cancelled(ctx)

    status = app.batch(waits, completions=2, parallelism=2, suspend=True, active_deadline=60)
    assert (status.state, status.active, status.start_time) == ("suspended", 0, None)
    assert app.batches.jobs(status.id) == []
    resumed = app.batches.resume(status.id)
    assert resumed.state == "running" and resumed.start_time is not None

    def running_then_suspended() -> bool:
        current = app.batches.get(status.id)
        jobs = app.batches.jobs(status.id)
        if current.state == "running" and any(j.state is JobState.RUNNING for j in jobs):
            app.batches.suspend(status.id)
        return current.suspended and current.active == 0

    run(app, running_then_suspended)
    paused = app.batches.get(status.id)
    assert (paused.succeeded, paused.failed, paused.condition) == (0, 0, None)
    assert {j.state for j in app.batches.jobs(status.id)} == {JobState.CANCELLED}
    release.set()
    again = app.batches.resume(status.id)
    assert again.start_time is not None and resumed.start_time is not None
    assert again.start_time > resumed.start_time  # the deadline counts from the resume
    run(app, finished(app, status.id))
    assert app.batches.get(status.id).condition == "Complete"


def test_cancel_fails_the_batch_after_its_jobs_stop(app: rota.App) -> None:
    @app.task
    def forever(ctx: rota.Context) -> None:
        stop_when_cancelled(ctx)

    status = app.batch(forever, completions=2, parallelism=1, name="stop-me")

    def cancelled() -> bool:
        jobs = app.batches.jobs("stop-me")
        if (
            jobs
            and jobs[0].state is JobState.RUNNING
            and app.batches.get("stop-me").interim is None
        ):
            assert app.batches.cancel("stop-me").state == "terminating"
        return app.batches.get("stop-me").finished

    run(app, cancelled)
    final = app.batches.get(status.id)
    assert (final.condition, final.reason) == ("Failed", "Cancelled")
    with pytest.raises(BatchError, match="failed: nothing to cancel"):
        app.batches.cancel("stop-me")
    with pytest.raises(BatchError, match="cannot change"):
        app.batches.resume("stop-me")


def test_creation_in_the_callers_transaction_and_by_name_is_idempotent(app: rota.App) -> None:
    @app.task
    def noop() -> None:
        pass

    with pytest.raises(RuntimeError), app.transaction() as conn:
        app.batch(noop, completions=2, name="tx", conn=conn)
        raise RuntimeError("roll back")
    with pytest.raises(BatchNotFoundError):
        app.batches.get("tx")
    assert app.list_jobs() == []
    with app.transaction() as conn:
        first = app.batch(noop, completions=2, parallelism=2, name="tx", conn=conn)
    again = app.batch(noop, completions=2, parallelism=2, name="tx")
    assert first.created and not again.created and again.id == first.id
    assert len(app.batches.jobs("tx")) == 2  # not four
    assert [b.id for b in app.batches.list()] == [first.id]


def test_bad_input_is_refused_before_anything_is_written(app: rota.App) -> None:
    @app.task
    def typed(n: int) -> None:
        pass

    @app.task
    def no_batch_arg() -> None:
        pass

    with pytest.raises(rota.ArgumentsError, match="batch item 1"):
        app.batch(typed, items=[{"n": 1}, {"n": "x"}])
    with pytest.raises(BatchError, match="on_finish"):
        app.batch(typed, items=[{"n": 1}], on_finish=no_batch_arg)
    with pytest.raises(BatchError, match="not both"):
        app.batch(typed, items=[{"n": 1}], completions=1)
    with pytest.raises(BatchError, match="parallelism"):
        app.batch(typed, args={"n": 1}, completions=2, parallelism=-1)
    with pytest.raises(BatchError, match="digits"):
        app.batch(typed, args={"n": 1}, name="42")
    with pytest.raises(rota.UnknownTaskError):
        app.batch("nope", completions=1)
    with pytest.raises(BatchError, match="takes a list"):
        app.batch(typed, items="abc")  # type: ignore[arg-type]
    with pytest.raises(BatchError, match="FailureRule values"):
        app.batch(typed, args={"n": 1}, failure_rules=[ValueError])  # type: ignore[list-item]
    with pytest.raises(BatchError, match="completions"):
        app.batch(typed, args={"n": 1}, completions="3")  # type: ignore[arg-type]
    with pytest.raises(BatchError, match="indexed=True"):
        app.batch(typed, args={"n": 1}, success_policy=[SuccessRule(succeeded_count=1)])
    with pytest.raises(rota.ArgumentsError, match="queue"):
        app.batch(typed, items=[{"n": 1}], queue="bad queue!")
    # A single rule where a list is expected, or a non-iterable: a BatchError, not TypeError.
    with pytest.raises(BatchError, match="success_policy takes a list"):
        app.batch(
            typed,
            args={"n": 1},
            completions=2,
            indexed=True,
            success_policy=SuccessRule(succeeded_count=1),  # type: ignore[arg-type]
        )
    with pytest.raises(BatchError, match="failure_rules takes a list"):
        app.batch(typed, args={"n": 1}, failure_rules=FailureRule("ignore", on=ValueError))  # type: ignore[arg-type]
    with pytest.raises(BatchError, match="items takes a list"):
        app.batch(typed, items=5)  # type: ignore[arg-type]
    with pytest.raises(BatchNotFoundError):
        app.batches.get("missing")
    assert app.batches.list() == [] and app.list_jobs() == []


def test_the_controller_service_is_wired_and_reports(app: rota.App) -> None:
    worker = rota.Worker(app, fast_settings(batch_interval=0.2))
    (controller,) = [s for s in worker.services if isinstance(s, BatchController)]
    assert controller.interval == 0.2 and controller.leader_only
    assert controller.run_once().advanced == 0
    # After progress it comes back sooner; idle, it waits the interval.
    assert controller.next_delay(BatchReport(advanced=1)) == pytest.approx(0.02)
    assert controller.next_delay(BatchReport()) == 0.2
    with pytest.raises(rota.ConfigurationError, match="batch_interval"):
        rota.WorkerSettings(batch_interval=0)
    # Zero completions: complete at once, with nothing run (Kubernetes: completions: 0).
    empty = app.batch(worker.app.task(lambda: None, name="t"), completions=0)
    assert (empty.condition, empty.reason) == ("Complete", "CompletionsReached")
    assert (empty.active, empty.succeeded, empty.failed) == (0, 0, 0)
    assert empty.finished_at is not None and app.list_jobs() == []


def test_a_graceful_shutdown_hands_the_job_back_without_a_failure(app: rota.App) -> None:
    started = threading.Event()

    @app.task
    def long_once(ctx: rota.Context) -> str:
        if ctx.attempt == 1:
            started.set()
            ctx.wait_cancelled(10)
            return "first"
        return "second"

    status = app.batch(long_once, completions=1, backoff_limit=0)
    worker = rota.Worker(app, fast_settings(grace=0.1, batch_interval=0.05))
    asyncio.run(run_worker_until(worker, started.is_set))
    (job,) = app.batches.jobs(status.id)
    assert job.state is JobState.AVAILABLE and job.history[-1].outcome is rota.Outcome.SHUTDOWN
    run(app, finished(app, status.id))
    final = app.batches.get(status.id)
    assert (final.condition, final.failed) == ("Complete", 0)
    (job,) = app.batches.jobs(status.id)  # the same job, run again
    assert job.result == "second"


def test_scaling_down_cancels_the_newest_jobs_and_scaling_up_starts_more(app: rota.App) -> None:
    gauge = Gauge()
    release = threading.Event()

    @app.task
    def held(ctx: rota.Context) -> None:
        with gauge:
            while not release.is_set():
                if ctx.wait_cancelled(0.02):
                    raise RuntimeError("stopped on request")

    status = app.batch(held, completions=6, indexed=True, parallelism=3)
    assert app.batches.scale(status.id, 1).parallelism == 1
    seen: list[int] = []

    def settled_at_one() -> bool:
        jobs = app.batches.jobs(status.id)
        running = sum(1 for j in jobs if j.state is JobState.RUNNING)
        seen.append(running)
        cancelled = sum(1 for j in jobs if j.state is JobState.CANCELLED)
        return cancelled == 2 and running == 1 and gauge.now == 1

    run(app, settled_at_one)
    cancelled = [j for j in app.batches.jobs(status.id) if j.state is JobState.CANCELLED]
    assert sorted(j.meta["batch"]["index"] for j in cancelled) == [1, 2]  # the newest
    release.set()
    app.batches.scale(status.id, 6)
    run(app, finished(app, status.id))
    final = app.batches.get(status.id)
    assert (final.condition, final.failed, final.completed_indexes) == ("Complete", 0, "0-5")
    with pytest.raises(BatchError, match="parallelism"):
        app.batches.scale(status.id, -1)
    with pytest.raises(BatchError, match="cannot change"):
        app.batches.scale(status.id, 2)


def test_one_batch_the_controller_cannot_read_does_not_stop_the_others(
    app: rota.App, dialect: str
) -> None:
    """A batch whose stored spec this leader cannot decide on (here: a failure action a
    newer rota wrote) is reported and skipped; the other batches still advance."""

    @app.task
    def unit() -> None:
        pass

    broken = app.batch(unit, completions=1, parallelism=0)
    healthy = app.batch(unit, completions=1, parallelism=0)
    spec = (
        '{"completions": 1, "indexed": false, "parallelism": 0, '
        '"failure_rules": [{"action": "FromTheFuture", "exceptions": ["ValueError"]}]}'
    )
    mark = "?" if dialect == "sqlite" else "%s"
    with app.transaction() as conn:
        conn.execute(f"UPDATE rota_batches SET spec = {mark} WHERE id = {mark}", (spec, broken.id))
    app.batches.scale(broken.id, 1)
    app.batches.scale(healthy.id, 1)
    report = BatchController(app.driver, 1.0).run_once()
    assert (report.started, report.errors) == (1, 1)
    assert app.batches.get(healthy.id).active == 1
    assert app.batches.get(broken.id).active == 0
