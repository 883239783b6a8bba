"""Workflows on both dialects with real in-process workers: dependency order, static and
dynamic fan-out, fan-in, per-step retry budgets, both failure policies, cancel,
retry-step, idempotent and transactional starts, cron starts, and a controller that
never inserts a step's jobs twice."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import rota
from rota.drivers.base import JobFilter
from rota.schedules.service import CronService
from rota.testing import drain
from rota.workflows import StepState, WorkflowState
from rota.workflows import plan as workflow_plan
from rota.workflows.service import WorkflowController
from rota.workflows.store import WorkflowStore
from tests.helpers import fast_settings, run_worker_until


def run_until_finished(app: rota.App, ref: int | str, timeout: float = 20.0) -> rota.WorkflowRun:
    """Run an in-process worker (with a fast workflow controller) until the run finishes."""
    worker = rota.Worker(
        app, fast_settings(queues={"default": 8}, workflow_interval=0.05, leader_ttl=2.0)
    )

    def finished() -> bool:
        return app.workflows.get(ref).state.finished

    asyncio.run(run_worker_until(worker, finished, timeout=timeout))
    return app.workflows.get(ref)


def settle(app: rota.App, rounds: int = 50) -> None:
    """Without a worker: run the ready jobs, then a controller pass, until nothing moves."""
    for _ in range(rounds):
        ran = drain(app, with_scheduled=True).ran
        report = app.workflows.advance()
        if not ran and not report.advanced:
            return
    raise AssertionError("the workflow did not settle")


def step_jobs(app: rota.App, task: rota.Task[Any, Any]) -> list[rota.Job]:
    return app.driver.job_list(JobFilter(task=task.name, limit=10_000))


# --- the shape: order, fan-out, fan-in ---------------------------------------------------------


def test_pipeline_runs_in_dependency_order_with_fan_out_and_fan_in(app: rota.App) -> None:
    log: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def record(name: str, started: float) -> None:
        with lock:
            log.append((name, started, time.monotonic()))

    @app.task
    def extract(day: str) -> list[str]:
        started = time.monotonic()
        time.sleep(0.05)
        record("extract", started)
        return ["ada", "bob", "cy", "dee", "eve", "fay", "gus"]

    @app.task
    def process(ctx: rota.Context, extract: list[str]) -> list[str]:
        started = time.monotonic()
        step = ctx.workflow
        assert step is not None and step.total == 3 and step.step == "process"
        mine = extract[step.index :: step.total]  # shard i of 3
        record("process", started)
        return mine

    @app.task
    def receipt(ctx: rota.Context, customer: str, day: str) -> dict[str, str]:
        record("receipt", time.monotonic())
        return {"customer": customer, "day": day}

    @app.task
    def summary(ctx: rota.Context, receipt: list[dict[str, str]]) -> dict[str, Any]:
        record("summary", time.monotonic())
        step = ctx.workflow
        assert step is not None
        # The same results, read through ctx: every completed step's result.
        assert step.results["receipt"] == receipt and step.args == {"day": "2026-11-29"}
        return {"receipts": len(receipt), "customers": sorted(r["customer"] for r in receipt)}

    wf = rota.Workflow("nightly")
    e = wf.step(extract)
    p = wf.step(process, after=e, fan_out=3)
    r = wf.step(receipt, after=p, each="customer")
    wf.step(summary, after=r)

    started = app.workflows.start(wf, args={"day": "2026-11-29"}, key="nightly-2026-11-29")
    assert started.created and started.state is WorkflowState.RUNNING
    assert [s.state for s in started.steps] == [
        StepState.RUNNING,
        StepState.PENDING,
        StepState.PENDING,
        StepState.PENDING,
    ]
    done = run_until_finished(app, started.id)

    assert done.state is WorkflowState.COMPLETED, done.error
    assert [s.total for s in done.steps] == [1, 3, 7, 1]  # static 3, dynamic 7
    assert len(step_jobs(app, process)) == 3 and len(step_jobs(app, receipt)) == 7
    assert done.results["summary"] == {
        "receipts": 7,
        "customers": ["ada", "bob", "cy", "dee", "eve", "fay", "gus"],
    }
    # Results of a fan-out come in index order: shard 0's customers first.
    assert done.results["process"] == [["ada", "dee", "gus"], ["bob", "eve"], ["cy", "fay"]]
    # Nothing started before everything it runs after had finished.
    end = {n: max(t for m, _, t in log if m == n) for n in ("extract", "process", "receipt")}
    first = {n: min(s for m, s, _ in log if m == n) for n in ("process", "receipt", "summary")}
    assert end["extract"] <= first["process"]
    assert end["process"] <= first["receipt"]
    assert end["receipt"] <= first["summary"]
    meta = step_jobs(app, receipt)[0].meta["workflow"]
    assert meta["id"] == done.id and meta["step"] == "receipt" and meta["total"] == 7


def test_an_empty_dynamic_fan_out_completes_and_the_fan_in_gets_an_empty_list(
    app: rota.App,
) -> None:
    @app.task
    def find() -> list[int]:
        return []

    @app.task
    def handle(item: int) -> int:
        return item

    @app.task
    def total(handle: list[int], find: list[int]) -> int:
        return len(handle) + len(find)

    wf = rota.Workflow("empty")
    f = wf.step(find)
    h = wf.step(handle, after=f, each="item")
    wf.step(total, after=[h, f])
    run = app.workflows.start(wf)
    settle(app)
    done = app.workflows.get(run.id)
    assert done.state is WorkflowState.COMPLETED
    assert (done.step("handle").total, done.step("handle").result) == (0, [])
    assert done.results["total"] == 0 and step_jobs(app, handle) == []


def test_each_over_a_result_that_is_not_a_list_fails_the_step_clearly(app: rota.App) -> None:
    @app.task
    def find() -> dict[str, int]:
        return {"a": 1}

    @app.task
    def handle(item: int) -> None:
        pass

    wf = rota.Workflow("bad-each")
    wf.step(handle, after=wf.step(find), each="item")
    run = app.workflows.start(wf)
    settle(app)
    done = app.workflows.get(run.id)
    assert done.state is WorkflowState.FAILED
    assert done.step("handle").state is StepState.FAILED
    assert "must be a list, not dict" in (done.step("handle").error or "")
    assert "step 'handle' failed" in (done.error or "")


# --- retries and failure policies -----------------------------------------------------------


def test_each_step_has_its_own_retry_budget(app: rota.App) -> None:
    calls: Counter[str] = Counter()

    @app.task(max_attempts=20)
    def flaky() -> str:
        calls["flaky"] += 1
        if calls["flaky"] < 3:
            raise rota.Retry("not yet", after=0)
        return "ok"

    @app.task(max_attempts=20)
    def fragile() -> None:
        calls["fragile"] += 1
        raise ValueError("always broken")

    wf = rota.Workflow("budgets", on_failure="continue")
    wf.step(flaky, max_attempts=3)  # the third attempt succeeds: inside the budget
    wf.step(fragile, max_attempts=2)  # two attempts, then the step fails
    done = run_until_finished(app, app.workflows.start(wf).id)

    assert calls == {"flaky": 3, "fragile": 2}
    assert done.step("flaky").state is StepState.COMPLETED
    fragile_step = done.step("fragile")
    assert fragile_step.state is StepState.FAILED
    assert fragile_step.jobs[0].attempt == 2 and fragile_step.jobs[0].state == "discarded"
    assert "ValueError: always broken" in (fragile_step.error or "")
    assert done.state is WorkflowState.FAILED
    assert step_jobs(app, fragile)[0].max_attempts == 2


def test_fail_policy_fails_the_workflow_and_cancels_running_and_pending_steps(
    app: rota.App,
) -> None:
    seen: dict[str, Any] = {}

    @app.task
    def root() -> int:
        return 1

    @app.task
    def boom() -> None:
        raise ValueError("bad row 17")

    @app.task
    def slow(ctx: rota.Context) -> None:
        seen["slow started"] = True
        seen["slow cancelled"] = ctx.wait_cancelled(15)
        raise RuntimeError("stopped on request")  # how a task ends when told to stop

    @app.task
    def after_slow() -> None:
        seen["after_slow"] = True

    @app.task
    def after_boom() -> None:
        seen["after_boom"] = True

    wf = rota.Workflow("fail-fast")  # on_failure="fail" is the default
    r = wf.step(root)
    b = wf.step(boom, after=r, max_attempts=1)
    s = wf.step(slow, after=r)
    wf.step(after_slow, after=s)
    wf.step(after_boom, after=b)
    run = app.workflows.start(wf)

    worker = rota.Worker(app, fast_settings(queues={"default": 8}, workflow_interval=0.05))

    def cancelled_everything() -> bool:
        current = app.workflows.get(run.id)
        slow_jobs = step_jobs(app, slow)
        return current.state.finished and bool(slow_jobs) and slow_jobs[0].state.finished

    asyncio.run(run_worker_until(worker, cancelled_everything, timeout=20))
    done = app.workflows.get(run.id)
    assert done.state is WorkflowState.FAILED
    assert "step 'boom' failed" in (done.error or "") and "bad row 17" in (done.error or "")
    states = {s.name: s.state for s in done.steps}
    assert states == {
        "root": StepState.COMPLETED,
        "boom": StepState.FAILED,
        "slow": StepState.CANCELLED,
        "after_slow": StepState.CANCELLED,
        "after_boom": StepState.CANCELLED,
    }
    assert seen.get("slow cancelled") is True  # the running job was asked to stop
    assert step_jobs(app, slow)[0].state is rota.JobState.CANCELLED
    assert "after_slow" not in seen and "after_boom" not in seen
    assert step_jobs(app, after_slow) == [] and step_jobs(app, after_boom) == []


def test_continue_policy_finishes_other_branches_and_skips_what_needs_the_failure(
    app: rota.App,
) -> None:
    @app.task
    def root() -> int:
        return 2

    @app.task
    def boom(root: int) -> None:
        raise ValueError(f"cannot handle {root}")

    @app.task
    def double(root: int) -> int:
        return root * 2

    @app.task
    def report(double: int) -> str:
        return f"double is {double}"

    @app.task
    def needs_both(boom: Any, double: int) -> None:
        pass

    wf = rota.Workflow("best-effort", on_failure="continue")
    r = wf.step(root)
    b = wf.step(boom, after=r, max_attempts=1)
    d = wf.step(double, after=r)
    wf.step(report, after=d)
    wf.step(needs_both, after=[b, d])
    done = run_until_finished(app, app.workflows.start(wf).id)

    assert done.state is WorkflowState.FAILED
    states = {s.name: s.state for s in done.steps}
    assert states == {
        "root": StepState.COMPLETED,
        "boom": StepState.FAILED,
        "double": StepState.COMPLETED,
        "report": StepState.COMPLETED,
        "needs_both": StepState.SKIPPED,
    }
    assert done.results["report"] == "double is 4"
    assert done.step("needs_both").error == "step 'boom' did not complete"
    assert step_jobs(app, needs_both) == []


def test_continue_policy_lets_a_fan_out_finish_before_its_step_fails(app: rota.App) -> None:
    @app.task
    def part(ctx: rota.Context) -> int:
        assert ctx.workflow is not None
        if ctx.workflow.index == 1:
            raise rota.Discard("part 1 is broken")
        return ctx.workflow.index

    wf = rota.Workflow("parts", on_failure="continue")
    wf.step(part, fan_out=4)
    run = app.workflows.start(wf)
    settle(app)
    step = app.workflows.get(run.id).step("part")
    assert step.state is StepState.FAILED
    assert [j.state for j in step.jobs] == ["completed", "discarded", "completed", "completed"]
    assert "1 of 4 jobs failed" in (step.error or "") and "part 1 is broken" in (step.error or "")


# --- operator actions ----------------------------------------------------------------------------


def test_cancel_stops_a_running_workflow(app: rota.App) -> None:
    gate = threading.Event()

    @app.task
    def wait(ctx: rota.Context) -> None:
        gate.set()
        if ctx.wait_cancelled(15):
            raise RuntimeError("stopped on request")

    @app.task
    def queued() -> None:
        pass

    @app.task
    def later() -> None:
        pass

    wf = rota.Workflow("cancel-me")
    w = wf.step(wait)
    wf.step(queued, fan_out=2, args={})
    wf.step(later, after=w)
    run = app.workflows.start(wf, key="to-cancel")
    worker = rota.Worker(
        app, fast_settings(queues={"default": 1}, workflow_interval=0.05)
    )  # one slot: `queued` waits behind `wait`

    def cancel_when_running() -> bool:
        if not gate.is_set():
            return False
        if app.workflows.get(run.id).state is WorkflowState.RUNNING:
            cancelled = app.workflows.cancel("to-cancel")
            assert cancelled.state is WorkflowState.CANCELLED
        return all(j.state.finished for j in step_jobs(app, wait))

    asyncio.run(run_worker_until(worker, cancel_when_running, timeout=20))
    done = app.workflows.get(run.id)
    assert done.state is WorkflowState.CANCELLED and done.error == "cancelled by request"
    assert {s.name: s.state for s in done.steps} == {
        "wait": StepState.CANCELLED,
        "queued": StepState.CANCELLED,
        "later": StepState.CANCELLED,
    }
    jobs = step_jobs(app, wait) + step_jobs(app, queued)
    assert {j.state for j in jobs} == {rota.JobState.CANCELLED}
    assert step_jobs(app, later) == []
    with pytest.raises(rota.WorkflowError, match="only a running workflow can be cancelled"):
        app.workflows.cancel(run.id)


def test_retry_step_runs_the_failed_jobs_again_and_the_workflow_finishes(app: rota.App) -> None:
    broken = {"yes": True}

    @app.task
    def load() -> list[int]:
        return [1, 2, 3]

    @app.task
    def check(n: int) -> int:
        if broken["yes"] and n == 2:
            raise ValueError("upstream was down")
        return n * 10

    @app.task
    def publish(check: list[int]) -> int:
        return sum(check)

    wf = rota.Workflow("retryable")
    c = wf.step(check, after=wf.step(load), each="n", max_attempts=1)
    wf.step(publish, after=c)
    run = app.workflows.start(wf)
    settle(app)
    failed = app.workflows.get(run.id)
    assert failed.state is WorkflowState.FAILED
    assert failed.step("publish").state is StepState.CANCELLED
    with pytest.raises(rota.WorkflowError, match="only a failed step can be retried"):
        app.workflows.retry_step(run.id, "load")
    with pytest.raises(rota.WorkflowError, match="has no step 'nope'"):
        app.workflows.retry_step(run.id, "nope")

    broken["yes"] = False
    retried = app.workflows.retry_step(run.id, "check")
    assert retried.state is WorkflowState.RUNNING
    assert retried.step("check").state is StepState.RUNNING
    assert retried.step("publish").state is StepState.PENDING
    done = run_until_finished(app, run.id)
    assert done.state is WorkflowState.COMPLETED and done.error is None
    assert done.results["publish"] == 60
    # Only the failed job ran again (same job, a second attempt); the others did not.
    assert sorted(j.attempt for j in done.step("check").jobs) == [1, 1, 2]
    assert len(step_jobs(app, check)) == 3
    with pytest.raises(rota.WorkflowError, match="completed"):
        app.workflows.retry_step(run.id, "check")


# --- starting: idempotency, transactions, refusals ----------------------------------------------


def test_start_is_idempotent_by_key_and_joins_the_callers_transaction(app: rota.App) -> None:
    @app.task
    def only(day: str) -> str:
        return day

    wf = rota.Workflow("once")
    wf.step(only)
    first = app.workflows.start(wf, args={"day": "mon"}, key="once-mon")
    again = app.workflows.start(wf, args={"day": "mon"}, key="once-mon")
    assert first.created and not again.created and again.id == first.id
    assert len(step_jobs(app, only)) == 1

    other = rota.Workflow("other")
    other.step(only, name="only-other")
    with pytest.raises(rota.WorkflowError, match="belongs to a run of workflow 'once'"):
        app.workflows.start(other, args={"day": "mon"}, key="once-mon")

    class Abort(Exception):
        pass

    with pytest.raises(Abort), app.transaction() as conn:
        app.workflows.start(wf, args={"day": "tue"}, key="once-tue", conn=conn)
        raise Abort
    with pytest.raises(rota.WorkflowNotFoundError, match="no workflow with key 'once-tue'"):
        app.workflows.get("once-tue")
    assert len(step_jobs(app, only)) == 1  # the first step's job rolled back with it

    with app.transaction() as conn:
        kept = app.workflows.start(wf, args={"day": "wed"}, key="once-wed", conn=conn)
    assert app.workflows.get("once-wed").id == kept.id
    assert [j.args for j in step_jobs(app, only)] == [{"day": "wed"}, {"day": "mon"}]
    assert [r.key for r in app.workflows.all()] == ["once-wed", "once-mon"]
    assert [r.key for r in app.workflows.all(name="once", state="running", limit=1)] == ["once-wed"]


def test_bad_starts_are_refused_before_anything_is_written(app: rota.App) -> None:
    @app.task
    def typed(day: str, count: int, extra: Any = None) -> None:
        pass

    wf = rota.Workflow("typed")
    wf.step(typed)
    with pytest.raises(rota.ArgumentsError, match=r"no step takes the arguments \['dya'\]"):
        app.workflows.start(wf, args={"day": "x", "count": 1, "dya": "x"})
    with pytest.raises(rota.ArgumentsError, match=r"required arguments \['count'\]"):
        app.workflows.start(wf, args={"day": "x"})
    with pytest.raises(rota.ArgumentsError, match="count"):
        app.workflows.start(wf, args={"day": "x", "count": "many"})
    with pytest.raises(rota.ArgumentsError, match="key must be"):
        app.workflows.start(wf, args={"day": "x", "count": 1}, key="")
    with pytest.raises(rota.PayloadError, match="not JSON"):
        app.workflows.start(wf, args={"day": "x", "count": 1, "extra": datetime.now(UTC)})
    foreign = rota.App(app.url.raw)

    @foreign.task
    def elsewhere() -> None:
        pass

    stray = rota.Workflow("stray")
    stray.step(elsewhere)
    with pytest.raises(rota.WorkflowError, match="is not a task of this app"):
        app.workflows.start(stray)
    foreign.close()
    assert app.workflows.all() == [] and app.list_jobs() == []
    with pytest.raises(rota.WorkflowNotFoundError, match="no workflow with id 99"):
        app.workflows.get(99)


# --- cron: a double tick starts one run -------------------------------------------------------


def test_a_scheduled_workflow_starts_once_per_tick(app: rota.App) -> None:
    @app.task
    def nightly_step(region: str) -> str:
        return region

    wf = rota.Workflow("nightly-cron")
    wf.step(nightly_step)
    schedule = app.schedule_workflow(wf, "* * * * *", args={"region": "eu"})
    assert schedule.name == "nightly-cron" and schedule.task == "rota.workflows.start"
    app.sync_schedules()

    now = app.driver.db_now()
    tick = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    at = tick + timedelta(seconds=1)
    # Two schedulers see the same tick (and one of them twice): one run, one job.
    first = CronService(app.driver, 1.0, scheduler="a", clock=lambda: at)
    second = CronService(app.driver, 1.0, scheduler="b", clock=lambda: at)
    assert first.run_once().enqueued == 1
    assert second.run_once().enqueued == 0 and first.run_once().enqueued == 0

    settle(app)
    (run,) = app.workflows.all()
    assert run.name == "nightly-cron" and run.state is WorkflowState.COMPLETED
    # The run's key is the tick's: the schedule and its time in the schedule's zone.
    assert run.key == f"nightly-cron@{tick.isoformat(timespec='seconds')}"
    assert app.workflows.get(run.id).results == {"nightly_step": "eu"}

    # The tick's job runs again (an operator retry, or a crash before its completion was
    # stored): the key is the tick's, so the run is the same one.
    (start_job,) = app.driver.job_list(JobFilter(task="rota.workflows.start"))
    app.retry_job(start_job.id)
    settle(app)
    assert [r.id for r in app.workflows.all()] == [run.id]
    assert len(step_jobs(app, nightly_step)) == 1


# --- crash safety: a controller pass applied twice -------------------------------------------


def test_two_controllers_with_the_same_view_insert_a_steps_jobs_once(app: rota.App) -> None:
    @app.task
    def first() -> list[int]:
        return list(range(5))

    @app.task
    def each_one(n: int) -> int:
        return n

    wf = rota.Workflow("race")
    wf.step(each_one, after=wf.step(first), each="n")
    run = app.workflows.start(wf)
    drain(app)  # `first` completes; its successors are not inserted yet

    store = WorkflowStore(app.driver)
    (snapshot,) = store.running(10)
    one = workflow_plan.advance(snapshot, app.workflows._build)
    two = workflow_plan.advance(snapshot, app.workflows._build)
    assert len(one.inserts) == len(two.inserts) == 5
    assert store.advance(one) is True
    assert store.advance(two) is False  # the version moved: refused as a whole
    assert len(step_jobs(app, each_one)) == 5

    # Controllers racing for real: more runs whose first step just finished, and four
    # threads (each pass its own transactions) advancing them at the same moment.
    more = [app.workflows.start(wf) for _ in range(6)]
    drain(app)
    errors: list[BaseException] = []
    reports: list[Any] = []
    barrier = threading.Barrier(4)

    def passes() -> None:
        try:
            barrier.wait()
            for _ in range(3):
                reports.append(app.workflows.advance())
                drain(app)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=passes) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(r.errors for r in reports) == 0
    settle(app)
    for ref in [run, *more]:
        done = app.workflows.get(ref.id)
        assert done.state is WorkflowState.COMPLETED
        assert done.results["each_one"] == [0, 1, 2, 3, 4]
        assert len(done.step("each_one").jobs) == 5
    # Seven runs, five jobs each: no step's jobs were inserted twice.
    assert len(step_jobs(app, each_one)) == 35 and len(step_jobs(app, first)) == 7
    assert sum(r.jobs for r in reports) == 30  # every insert was counted once, by one winner


def test_a_controller_pass_visits_every_running_workflow_page_by_page(app: rota.App) -> None:
    @app.task
    def one(n: int) -> int:
        return n

    @app.task
    def two(one: int) -> int:
        return one + 1

    wf = rota.Workflow("paged")
    wf.step(two, after=wf.step(one))
    runs = [app.workflows.start(wf, args={"n": n}) for n in range(3)]
    drain(app)
    report = app.workflows.advance(page=1)  # three pages of one
    assert (report.advanced, report.jobs, report.stale, report.errors) == (3, 3, 0, 0)
    drain(app)
    assert app.workflows.advance(page=2).finished == 3
    assert [app.workflows.get(r.id).results["two"] for r in runs] == [1, 2, 3]


def test_the_controller_prunes_finished_runs_past_their_retention(app: rota.App) -> None:
    @app.task
    def fine() -> None:
        pass

    @app.task
    def broken() -> None:
        raise rota.Discard("no")

    good, bad = rota.Workflow("good"), rota.Workflow("bad")
    good.step(fine)
    bad.step(broken)
    kept_running = app.workflows.start(good, key="still-running")
    done = app.workflows.start(good, key="done")
    failed = app.workflows.start(bad, key="failed")
    drain(app, queues=["default"], max_jobs=10_000)
    controller = WorkflowController(
        app.workflows, 1.0, completed_retention=0.05, failed_retention=3600
    )
    # One run's job is put back in the queue: that run is still running after the pass
    # that finishes the other two (whose prune finds nothing old enough yet).
    app.retry_job(app.workflows.get(kept_running.id).steps[0].jobs[0].job_id or 0)
    first = controller.run_once()
    assert first.finished == 2 and first.pruned == 0
    time.sleep(0.1)
    controller._pruned_at = float("-inf")  # the next pass may prune again
    assert controller.run_once().pruned == 1
    with pytest.raises(rota.WorkflowNotFoundError):
        app.workflows.get(done.id)
    assert app.workflows.get(failed.id).state is WorkflowState.FAILED  # kept 1 h
    assert app.workflows.get(kept_running.id).state is WorkflowState.RUNNING
    assert [j.task for j in app.list_jobs()].count(fine.name) == 2  # jobs are the pruner's


def test_ctx_workflow_is_none_outside_workflows(app: rota.App) -> None:
    seen: list[object] = []

    @app.task
    def plain(ctx: rota.Context) -> None:
        seen.append(ctx.workflow)

    plain.enqueue()
    drain(app)
    assert seen == [None]
