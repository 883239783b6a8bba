"""Sagas on both dialects with in-process workers: the happy path, failure at each step
(compensations in reverse, once each), compensations that keep failing, timeouts and
deadlines, concurrent advances (one wins), stale jobs as no-ops, abort, retry, the CLI,
and bad input refused before anything is written."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import defaultdict
from typing import Any

import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from rota.sagas import engine, machine
from rota.sagas.service import SagaSupervisor
from rota.sagas.store import SagaStore
from rota.worker.fetcher import claim_now
from tests.helpers import fast_settings, run_worker_until, wait_for

FAST_RETRY = rota.Backoff(base=0.01, cap=0.02)


class Shop:
    """A three-step saga whose steps log their effects per saga key."""

    def __init__(self, app: rota.App) -> None:
        self.app = app
        self.effects: dict[str, list[str]] = defaultdict(list)
        self.lock = threading.Lock()
        self.failing_compensation = False
        saga = rota.Saga("fulfilment", max_attempts=2, compensate_attempts=2, backoff=FAST_RETRY)

        def effect(data: dict[str, Any], what: str) -> None:
            with self.lock:
                self.effects[data["order"]].append(what)

        def maybe_fail(data: dict[str, Any], step: str) -> None:
            if data.get("fail_at") == step:
                raise RuntimeError(f"{step} is out of order")

        @saga.step
        def reserve(ctx: rota.Context, data: dict[str, Any]) -> dict[str, Any]:
            assert ctx.meta["saga"]["step"] == "reserve"
            maybe_fail(data, "reserve")
            effect(data, "reserve")
            return {"reservation": f"R-{data['order']}"}

        @reserve.compensate
        def release(data: dict[str, Any]) -> None:
            assert data["reservation"] == f"R-{data['order']}"
            effect(data, "release")

        @saga.step
        def pay(data: dict[str, Any]) -> dict[str, Any]:
            maybe_fail(data, "pay")
            effect(data, "pay")
            return {"payment": "P-1"}

        def refund(data: dict[str, Any]) -> None:
            if self.failing_compensation:
                raise ConnectionError("the bank is down")
            effect(data, "refund")

        pay.compensate(refund)

        def ship(data: dict[str, Any]) -> str:
            maybe_fail(data, "ship")
            effect(data, "ship")
            return "T-1"

        saga.step(ship, compensate=lambda data: effect(data, "unship"))
        self.saga = app.sagas.register(saga)

    def start(self, order: str, **data: Any) -> rota.SagaRecord:
        return self.app.sagas.start(self.saga, key=order, data={"order": order, **data})

    def run_until_finished(self, *keys: str, **settings: Any) -> None:
        def finished() -> bool:
            return all(self.app.sagas.get(k).status.finished for k in keys)

        worker = rota.Worker(self.app, fast_settings(**settings))
        asyncio.run(run_worker_until(worker, finished, timeout=30))


def events_of(saga: rota.SagaRecord) -> list[tuple[str, str | None, str]]:
    return [(h["event"], h.get("step"), h["status"]) for h in saga.history]


def test_happy_path_accumulates_data_and_history(app: rota.App) -> None:
    shop = Shop(app)
    started = shop.start("order-42", amount=30)
    assert (started.status, started.step, started.version) == ("running", "reserve", 1)
    first_job = app.get_job(started.job_id or 0)
    assert first_job is not None and first_job.task == "saga:fulfilment/reserve"
    assert first_job.meta["saga"] == {
        "id": started.id,
        "key": "order-42",
        "version": 1,
        "step": "reserve",
        "phase": "forward",
    }
    shop.run_until_finished("order-42")

    saga = app.sagas.get("order-42")
    assert saga.status is rota.SagaStatus.COMPLETED and saga.step is None and saga.error is None
    assert saga.data == {
        "order": "order-42",
        "amount": 30,
        "reservation": "R-order-42",
        "payment": "P-1",
        "ship": "T-1",  # a non-dict result is kept under the step's name
    }
    assert events_of(saga) == [
        ("started", "reserve", "running"),
        ("step_completed", "reserve", "running"),
        ("step_completed", "pay", "running"),
        ("step_completed", "ship", "completed"),
    ]
    times = [h["at"] for h in saga.history]
    assert times == sorted(times) and all(t.tzinfo is not None for t in times)
    assert shop.effects["order-42"] == ["reserve", "pay", "ship"]

    # Running a step's job again after it committed is a no-op: no effect, no move.
    app.retry_job(first_job.id)
    worker = rota.Worker(app, fast_settings())
    asyncio.run(
        run_worker_until(
            worker, lambda: (j := app.get_job(first_job.id)) is not None and j.state.finished
        )
    )
    assert app.get_job(first_job.id).state is rota.JobState.COMPLETED  # type: ignore[union-attr]
    assert shop.effects["order-42"] == ["reserve", "pay", "ship"]
    assert app.sagas.get("order-42").version == saga.version


def test_failure_at_each_step_compensates_in_reverse_once_each(app: rota.App) -> None:
    shop = Shop(app)
    for step in ("reserve", "pay", "ship"):
        shop.start(f"fails-at-{step}", fail_at=step)
    shop.run_until_finished("fails-at-reserve", "fails-at-pay", "fails-at-ship")

    assert shop.effects["fails-at-reserve"] == []
    assert shop.effects["fails-at-pay"] == ["reserve", "release"]
    assert shop.effects["fails-at-ship"] == ["reserve", "pay", "refund", "release"]
    for step in ("reserve", "pay", "ship"):
        saga = app.sagas.get(f"fails-at-{step}")
        assert saga.status is rota.SagaStatus.COMPENSATED, saga
        assert saga.error is not None and f"{step} is out of order" in saga.error
        assert "attempt 2 of 2" in saga.error
    assert events_of(app.sagas.get("fails-at-ship")) == [
        ("started", "reserve", "running"),
        ("step_completed", "reserve", "running"),
        ("step_completed", "pay", "running"),
        ("step_failed", "ship", "compensating"),
        ("compensation_completed", "pay", "compensating"),
        ("compensation_completed", "reserve", "compensated"),
    ]
    assert events_of(app.sagas.get("fails-at-reserve"))[-1] == (
        "step_failed",
        "reserve",
        "compensated",
    )
    assert [s.key for s in app.sagas.list(status="compensated")] == [
        "fails-at-ship",
        "fails-at-pay",
        "fails-at-reserve",
    ]


def test_compensation_that_keeps_failing_leaves_the_saga_failed_until_retried(
    app: rota.App,
) -> None:
    shop = Shop(app)
    shop.failing_compensation = True
    shop.start("order-7", fail_at="ship")
    shop.run_until_finished("order-7")
    saga = app.sagas.get("order-7")
    assert saga.status is rota.SagaStatus.FAILED and saga.step == "pay"
    assert saga.error is not None and "the bank is down" in saga.error
    assert "compensation of 'pay' failed" in saga.error
    assert shop.effects["order-7"] == ["reserve", "pay"]  # release waits for refund

    shop.failing_compensation = False
    retried = app.sagas.retry("order-7")
    assert (retried.status, retried.step) == ("compensating", "pay")
    shop.run_until_finished("order-7")
    saga = app.sagas.get("order-7")
    assert saga.status is rota.SagaStatus.COMPENSATED
    assert shop.effects["order-7"] == ["reserve", "pay", "refund", "release"]
    assert [e for e, _, _ in events_of(saga)][-4:] == [
        "compensation_failed",
        "retried",
        "compensation_completed",
        "compensation_completed",
    ]
    with pytest.raises(rota.SagaError, match="nothing to retry"):
        app.sagas.retry("order-7")


def test_a_step_past_its_timeout_fails_and_is_compensated(app: rota.App) -> None:
    saga = rota.Saga("slow")
    undone: list[str] = []

    @saga.step
    def first(data: dict[str, Any]) -> None:
        return None

    @first.compensate
    def undo_first(data: dict[str, Any]) -> None:
        undone.append("first")

    @saga.step(timeout=0.2, max_attempts=1)
    def hang(ctx: rota.Context, data: dict[str, Any]) -> None:
        ctx.wait_cancelled(10)

    app.sagas.register(saga)
    app.sagas.start(saga, key="slow-1")
    worker = rota.Worker(app, fast_settings())
    asyncio.run(run_worker_until(worker, lambda: app.sagas.get("slow-1").status.finished))
    record = app.sagas.get("slow-1")
    assert record.status is rota.SagaStatus.COMPENSATED
    assert record.error is not None and "timeout" in record.error
    assert undone == ["first"]


def test_a_step_past_its_deadline_fails_and_its_job_is_cancelled(app: rota.App) -> None:
    saga = rota.Saga("deadline")

    @saga.step(deadline=0.05)
    def wait_for_parcel(data: dict[str, Any]) -> None:
        return None

    app.sagas.register(saga)
    started = app.sagas.start(saga, key="d-1")
    assert started.deadline_at is not None
    supervisor = SagaSupervisor(app.driver, 1.0)
    wait_for(lambda: supervisor.run_once().overdue == 1, timeout=5)
    record = app.sagas.get("d-1")
    assert record.status is rota.SagaStatus.COMPENSATED
    assert record.error == "the step passed its deadline"
    job = app.get_job(started.job_id or 0)
    assert job is not None and job.state is rota.JobState.CANCELLED
    assert supervisor.run_once().steps_failed == 0  # nothing left to do


def test_concurrent_advances_of_one_step_one_wins(app: rota.App) -> None:
    shop = Shop(app)
    started = shop.start("race")
    barrier = threading.Barrier(8)
    results: list[rota.SagaRecord | None] = []
    errors: list[BaseException] = []

    def advance(n: int) -> None:
        try:
            barrier.wait()
            with app.transaction() as conn:
                moved = engine.apply(
                    app.driver,
                    conn,
                    started.id,
                    started.version,
                    lambda s: machine.step_completed(s, {"winner": n}),
                )
            results.append(moved)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=advance, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    winners = [r for r in results if r is not None]
    assert len(results) == 8 and len(winners) == 1
    saga = app.sagas.get("race")
    assert saga.version == 2 and saga.step == "pay"
    assert saga.data["winner"] == winners[0].data["winner"]
    assert len(app.list_jobs(task="saga:fulfilment/pay")) == 1
    assert len(saga.history) == 2


def test_abort_compensates_completed_steps_and_cancels_the_waiting_one(app: rota.App) -> None:
    shop = Shop(app)
    started = shop.start("order-9")
    with app.transaction() as conn:  # step one committed, as its job would
        moved = engine.apply(
            app.driver,
            conn,
            started.id,
            1,
            lambda s: machine.step_completed(s, {"reservation": "R-order-9"}),
        )
    assert moved is not None and moved.step == "pay"
    aborted = app.sagas.abort("order-9", reason="customer cancelled")
    assert (aborted.status, aborted.step) == ("compensating", "reserve")
    pay_job = app.get_job(moved.job_id or 0)
    assert pay_job is not None and pay_job.state is rota.JobState.CANCELLED
    shop.run_until_finished("order-9")
    saga = app.sagas.get("order-9")
    assert saga.status is rota.SagaStatus.COMPENSATED and saga.error == "customer cancelled"
    assert shop.effects["order-9"] == ["release"]
    assert ("aborted", "pay", "compensating") in events_of(saga)
    with pytest.raises(rota.SagaError, match="only a running saga"):
        app.sagas.abort("order-9")
    with pytest.raises(rota.SagaNotFoundError):
        app.sagas.abort("order-unknown")


def test_retry_runs_a_step_waiting_for_its_backoff_now(app: rota.App) -> None:
    saga = rota.Saga("patient")
    tries: list[int] = []

    @saga.step
    def call_partner(ctx: rota.Context, data: dict[str, Any]) -> None:
        tries.append(ctx.attempt)
        if ctx.attempt == 1:
            raise rota.Retry("partner busy", after=3600)

    app.sagas.register(saga)
    started = app.sagas.start(saga, key="p-1")
    worker = rota.Worker(app, fast_settings())
    asyncio.run(
        run_worker_until(
            worker,
            lambda: app.get_job(started.job_id or 0).state is rota.JobState.RETRYABLE,  # type: ignore[union-attr]
        )
    )
    assert app.sagas.retry("p-1").status is rota.SagaStatus.RUNNING
    worker = rota.Worker(app, fast_settings())
    asyncio.run(run_worker_until(worker, lambda: app.sagas.get("p-1").status.finished))
    assert app.sagas.get("p-1").status is rota.SagaStatus.COMPLETED
    assert tries == [1, 2]


def test_start_is_idempotent_by_key_and_joins_the_callers_transaction(app: rota.App) -> None:
    shop = Shop(app)
    first = shop.start("order-1")
    again = shop.start("order-1", other=True)
    assert again.id == first.id and again.data == {"order": "order-1"}
    other = rota.Saga("other")
    other.step(lambda data: None, name="only")
    app.sagas.register(other)
    with pytest.raises(rota.SagaError, match="belongs to a 'fulfilment' saga"):
        app.sagas.start(other, key="order-1")

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), app.transaction() as conn:
        app.sagas.start(shop.saga, key="order-2", data={"order": "order-2"}, conn=conn)
        raise Rollback
    with pytest.raises(rota.SagaNotFoundError):
        app.sagas.get("order-2")
    assert len(app.list_jobs()) == 1  # only order-1's first step


def test_bad_input_is_refused_before_anything_is_written(app: rota.App) -> None:
    shop = Shop(app)
    unregistered = rota.Saga("unregistered")
    unregistered.step(lambda data: None, name="x")
    with pytest.raises(rota.TaskDefinitionError, match="not registered"):
        app.sagas.start(unregistered, key="k")
    with pytest.raises(rota.TaskDefinitionError, match="not registered"):
        app.sagas.start("nope", key="k")
    for key in ("", "   ", "x" * 513, 42):
        with pytest.raises(rota.ArgumentsError, match="saga key"):
            app.sagas.start(shop.saga, key=key)  # type: ignore[arg-type]
    with pytest.raises(rota.ArgumentsError, match="must be a dict"):
        app.sagas.start(shop.saga, key="k", data=[1])  # type: ignore[arg-type]
    with pytest.raises(rota.ArgumentsError, match="JSON"):
        app.sagas.start(shop.saga, key="k", data={"when": object()})
    with pytest.raises(rota.ArgumentsError, match="unknown saga status"):
        app.sagas.list(status="done")
    for limit in ("10", 0, True):
        with pytest.raises(rota.ArgumentsError, match="limit"):
            app.sagas.list(limit=limit)  # type: ignore[arg-type]
    with pytest.raises(rota.SagaNotFoundError, match="no saga with key 'k'"):
        app.sagas.get("k")
    assert app.sagas.list() == [] and app.list_jobs() == []

    with pytest.raises(rota.TaskDefinitionError, match="has no steps"):
        app.sagas.register(rota.Saga("empty"))
    with pytest.raises(rota.TaskDefinitionError, match="bad saga name"):
        rota.Saga("no spaces")
    twice = rota.Saga("twice")
    twice.step(lambda data: None, name="a")
    with pytest.raises(rota.TaskDefinitionError, match="already has a step named 'a'"):
        twice.step(lambda data: None, name="a")
    with pytest.raises(rota.TaskDefinitionError, match=r"take \(data\) or \(ctx, data\)"):
        twice.step(lambda: None, name="b")
    with pytest.raises(rota.TaskDefinitionError, match="async"):

        @twice.step
        async def c(data: dict[str, Any]) -> None: ...

    with pytest.raises(rota.TaskDefinitionError, match="deadline"):
        twice.step(lambda data: None, name="d", deadline=-1)
    with pytest.raises(rota.TaskDefinitionError, match="already registered"):
        app.sagas.register(rota.Saga("fulfilment"))


def test_cli_ls_show_retry_abort(app: rota.App, database_url: str) -> None:
    shop = Shop(app)
    shop.start("order-cli")
    shop.start("order-done")
    with app.transaction() as conn:
        done = app.sagas.get("order-done")
        for _ in range(3):
            saga = SagaStore(app.driver).lock(conn, done.id)
            assert saga is not None
            engine.apply(
                app.driver, conn, saga.id, saga.version, lambda s: machine.step_completed(s, None)
            )
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        env = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None, "COLUMNS": "200"}
        return runner.invoke(cli, ["sagas", *args], env=env, catch_exceptions=False)

    listed = invoke("ls", "--json")
    assert listed.exit_code == 0, listed.output
    assert [(s["key"], s["status"]) for s in json.loads(listed.stdout)] == [
        ("order-done", "completed"),
        ("order-cli", "running"),
    ]
    only = json.loads(invoke("ls", "--status", "running", "--json").stdout)
    assert [s["key"] for s in only] == ["order-cli"]
    shown = json.loads(invoke("show", "order-cli", "--json").stdout)
    assert shown["step"] == "reserve" and shown["steps"] == ["reserve", "pay", "ship"]
    assert shown["history"][0]["event"] == "started"
    text = invoke("show", "order-cli")
    assert text.exit_code == 0 and "order-cli" in text.stdout and "started" in text.stdout
    assert "order-done" in invoke("ls").stdout

    refused = invoke("retry", "order-done")
    assert refused.exit_code == 1 and "nothing to retry" in refused.stderr
    assert invoke("retry", "order-cli", "--json").exit_code == 0  # waiting: nothing to do
    aborted = json.loads(invoke("abort", "order-cli", "--reason", "ops", "--json").stdout)
    assert aborted["status"] == "compensated" and aborted["error"] == "ops"
    missing = invoke("show", "nope")
    assert missing.exit_code == 1 and "no saga with key 'nope'" in missing.stderr


def test_history_times_come_from_the_database(app: rota.App) -> None:
    shop = Shop(app)
    before = app.driver.db_now()
    time.sleep(0.01)
    saga = shop.start("t-1")
    assert before <= saga.history[0]["at"] <= app.driver.db_now()


def test_a_worker_lost_on_the_last_attempt_still_leads_to_compensation(app: rota.App) -> None:
    """The last attempt's worker dies (it never completes nor renews its lease): the
    rescuer dead-letters the job and the supervisor compensates the completed step."""
    saga = rota.Saga("fragile")
    effects: list[str] = []

    @saga.step
    def book(data: dict[str, Any]) -> None:
        effects.append("book")

    @book.compensate
    def unbook(data: dict[str, Any]) -> None:
        effects.append("unbook")

    @saga.step(max_attempts=1, queue="payments")
    def charge(data: dict[str, Any]) -> None:
        effects.append("charge")

    app.sagas.register(saga)
    started = app.sagas.start(saga, key="ghost")
    with app.transaction() as conn:  # step one committed, as its job would
        moved = engine.apply(
            app.driver, conn, started.id, 1, lambda s: machine.step_completed(s, None)
        )
    assert moved is not None and moved.job_id is not None
    # A worker claims the charge job (its only attempt) and is never heard of again.
    claimed = claim_now(app, "payments", 10, "ghost-worker", 0.2)
    assert [j.id for j in claimed] == [moved.job_id]
    worker = rota.Worker(app, fast_settings(queues={"default": 2, "payments": 2}))
    asyncio.run(run_worker_until(worker, lambda: app.sagas.get("ghost").status.finished))
    record = app.sagas.get("ghost")
    job = app.get_job(moved.job_id)
    assert job is not None and job.state is rota.JobState.DISCARDED
    assert job.history[-1].outcome is rota.Outcome.LOST
    assert record.status is rota.SagaStatus.COMPENSATED, record.history
    assert effects == ["unbook"]  # the charge never ran; the completed booking is undone


def test_sagas_under_testing_inline_and_drain(app: rota.App) -> None:
    from rota.testing import drain, inline

    shop = Shop(app)
    with inline(app):
        shop.start("inline-1")  # steps are queued, not run at once
    assert shop.effects["inline-1"] == []
    drain(app)
    assert app.sagas.get("inline-1").status is rota.SagaStatus.COMPLETED
    shop.start("inline-2", fail_at="pay")
    drain(app, with_scheduled=True)  # pay fails twice and is dead-lettered
    assert app.sagas.supervise().steps_failed == 1
    drain(app)
    assert app.sagas.get("inline-2").status is rota.SagaStatus.COMPENSATED
    assert shop.effects["inline-2"] == ["reserve", "release"]


def test_a_step_in_the_transaction_writes_exactly_once_with_its_move(app: rota.App) -> None:
    mark = "?" if app.driver.dialect == "sqlite" else "%s"
    with app.transaction() as conn:
        conn.execute("CREATE TABLE orders (key TEXT PRIMARY KEY, state TEXT)")
    saga = rota.Saga("tx", max_attempts=2, backoff=FAST_RETRY)
    tries: list[int] = []

    @saga.step(transaction=True)
    def place(ctx: rota.Context, data: dict[str, Any], conn: Any) -> dict[str, Any]:
        tries.append(ctx.attempt)
        conn.execute(f"INSERT INTO orders VALUES ({mark}, 'placed')", (data["key"],))
        if ctx.attempt == 1:
            raise ConnectionError("lost the partner after writing")  # rolls the row back
        app.publish("order.placed", {"key": data["key"]}, conn=conn)  # same transaction
        return {"placed": True}

    @place.compensate(transaction=True)
    def unplace(data: dict[str, Any], conn: Any) -> None:
        conn.execute(f"UPDATE orders SET state = 'cancelled' WHERE key = {mark}", (data["key"],))

    @saga.step
    def refuse(data: dict[str, Any]) -> None:
        raise rota.Discard("out of stock")

    app.sagas.register(saga)
    started = app.sagas.start(saga, key="tx-1", data={"key": "tx-1"})
    worker = rota.Worker(app, fast_settings())
    asyncio.run(run_worker_until(worker, lambda: app.sagas.get("tx-1").status.finished))
    assert app.sagas.get("tx-1").status is rota.SagaStatus.COMPENSATED
    assert tries == [1, 2]
    with app.transaction() as conn:
        rows = [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in conn.execute(
            "SELECT key, state FROM orders"
        ).fetchall()]  # fmt: skip
    assert rows == [("tx-1", "cancelled")]
    assert [e.name for e in app.events.list()] == ["order.placed"]

    # The committed step's job run again changes nothing (the row lock sees the move).
    app.retry_job(started.job_id or 0)
    worker = rota.Worker(app, fast_settings())
    asyncio.run(
        run_worker_until(worker, lambda: app.get_job(started.job_id or 0).state.finished)  # type: ignore[union-attr]
    )
    assert tries == [1, 2] and len(app.events.list()) == 1
    with pytest.raises(rota.TaskDefinitionError, match=r"\(data, conn\) or \(ctx, data, conn\)"):
        saga.step(lambda data: None, name="bad", transaction=True)


def test_abort_waits_for_a_running_step_unless_forced(app: rota.App) -> None:
    saga = rota.Saga("long")
    effects: list[str] = []

    @saga.step
    def book(data: dict[str, Any]) -> None:
        effects.append("book")

    @book.compensate
    def unbook(data: dict[str, Any]) -> None:
        effects.append("unbook")

    @saga.step
    def wait_for_partner(ctx: rota.Context, data: dict[str, Any]) -> None:
        ctx.wait_cancelled(20)  # cooperative: returns once the job is asked to stop
        effects.append("stopped" if ctx.cancelled else "partner")

    app.sagas.register(saga)
    app.sagas.start(saga, key="long-1")
    refused: list[str] = []

    def abort_when_running() -> bool:
        current = app.sagas.get("long-1")
        job = app.get_job(current.job_id or 0)
        if current.step == "wait_for_partner" and job and job.state is rota.JobState.RUNNING:
            if not refused:
                with pytest.raises(rota.SagaError, match="is running now") as caught:
                    app.sagas.abort("long-1")
                refused.append(str(caught.value))
                aborted = app.sagas.abort("long-1", reason="partner gone", force=True)
                assert aborted.status is rota.SagaStatus.COMPENSATING
        return current.status.finished and not app.list_jobs(state="running")

    worker = rota.Worker(app, fast_settings())
    asyncio.run(run_worker_until(worker, abort_when_running))
    record = app.sagas.get("long-1")
    assert record.status is rota.SagaStatus.COMPENSATED and record.error == "partner gone"
    assert refused and sorted(effects) == ["book", "stopped", "unbook"]  # never "partner"
    waited = app.get_job(record.history[1]["next_job_id"])
    assert waited is not None and waited.state is rota.JobState.CANCELLED


def test_abort_never_races_a_worker_claiming_the_waiting_step(app: rota.App) -> None:
    """A worker polling while abort decides must not claim the waiting step's job, run
    its effect after the abort and leave it uncompensated (PostgreSQL let it through)."""
    shop = Shop(app)
    shop.start("order-race")
    original = SagaStore.update
    threads: list[threading.Thread] = []

    def run_worker() -> None:
        worker = rota.Worker(app, fast_settings())
        done = lambda: app.sagas.get("order-race").status.finished  # noqa: E731
        asyncio.run(run_worker_until(worker, done, timeout=30))

    def update_after_a_worker_polled(store: SagaStore, conn: Any, change: Any) -> Any:
        if not threads:
            # Abort has checked the step's job and is about to record its move: a worker
            # starts now, polls a few times, and runs the step if it can claim the job.
            threads.append(threading.Thread(target=run_worker))
            threads[0].start()
            until = time.monotonic() + 1.0
            while not shop.effects["order-race"] and time.monotonic() < until:
                time.sleep(0.02)
        return original(store, conn, change)

    SagaStore.update = update_after_a_worker_polled  # type: ignore[method-assign]
    try:
        app.sagas.abort("order-race", reason="customer cancelled")
    finally:
        SagaStore.update = original  # type: ignore[method-assign]
    threads[0].join(35)
    saga = app.sagas.get("order-race")
    assert saga.status is rota.SagaStatus.COMPENSATED
    assert shop.effects["order-race"] == []  # the reservation never happened


def test_the_supervisor_passes_over_a_saga_whose_step_holds_its_row(pg_url: str) -> None:
    """A step running inside its transaction (transaction=True) holds the saga row; once
    past its deadline the supervisor must pass it over, not wait on the lock for as long
    as the step runs (stalling every other saga and a database thread of the leader)."""
    app = rota.App(pg_url)
    app.migrate()
    saga = rota.Saga("slow-in-tx")
    started, release = threading.Event(), threading.Event()

    @saga.step(transaction=True, deadline=0.2)
    def hold_the_row(data: dict[str, Any], conn: Any) -> None:
        started.set()
        release.wait(15)

    app.sagas.register(saga)
    app.sagas.start(saga, key="slow-1")
    done = lambda: app.sagas.get("slow-1").status.finished  # noqa: E731
    worker = threading.Thread(
        target=lambda: asyncio.run(
            run_worker_until(rota.Worker(app, fast_settings()), done, timeout=30)
        )
    )
    worker.start()
    try:
        assert started.wait(10)
        assert wait_for(lambda: [s for s in SagaStore(app.driver).stalled(10) if s.overdue])
        supervising = threading.Thread(target=app.sagas.supervise)
        supervising.start()
        supervising.join(3)
        assert not supervising.is_alive(), "the supervisor waited on the step's row lock"
    finally:
        release.set()
        worker.join(35)
    assert app.sagas.get("slow-1").status is rota.SagaStatus.COMPLETED  # it committed late
    app.close()
