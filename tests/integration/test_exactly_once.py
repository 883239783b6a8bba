"""Exactly-once effects through the worker: ctx.transaction(), durable steps,
checkpoints, and idempotency keys under concurrency."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from typing import Any

import pytest

import rota
from rota import testing
from rota.worker.fetcher import claim_now
from tests.helpers import fast_settings, run_worker_until


def finished(app: rota.App, *ids: int) -> bool:
    return all((j := app.get_job(i)) is not None and j.state.finished for i in ids)


def create_effects_table(app: rota.App) -> None:
    with app.transaction() as conn:
        conn.execute("CREATE TABLE effects (job_id INTEGER, attempt INTEGER, note TEXT)")


def effects(app: rota.App) -> list[tuple[Any, ...]]:
    with app.transaction() as conn:
        rows = conn.execute("SELECT job_id, attempt, note FROM effects ORDER BY attempt").fetchall()
    return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in rows]


def param(app: rota.App) -> str:
    return "?" if app.driver.dialect == "sqlite" else "%s"


def test_transaction_commits_effect_and_completion_together(app: rota.App) -> None:
    create_effects_table(app)
    mark = param(app)

    @app.task(max_attempts=3, backoff=rota.Backoff(base=0.01, cap=0.01))
    def pay(ctx: rota.Context, fail_inside: bool) -> str:
        with ctx.transaction() as conn:
            conn.execute(
                f"INSERT INTO effects VALUES ({mark}, {mark}, {mark})",
                (ctx.job.id, ctx.attempt, "paid"),
            )
            if fail_inside and ctx.attempt == 1:
                raise RuntimeError("crash before commit")
        return "ignored"

    ok = pay.enqueue(fail_inside=False)
    retried = pay.enqueue(fail_inside=True)
    asyncio.run(
        run_worker_until(
            rota.Worker(app, fast_settings()), lambda: finished(app, ok.id, retried.id)
        )
    )
    rows = effects(app)
    assert sorted(rows) == sorted([(ok.id, 1, "paid"), (retried.id, 2, "paid")])
    done = app.get_job(retried.id)
    assert done is not None and done.state is rota.JobState.COMPLETED
    assert [a.outcome.value for a in done.history] == ["failed", "completed"]


def test_transaction_of_a_stale_attempt_rolls_back(app: rota.App) -> None:
    """A worker whose lease was taken over cannot commit its effect."""
    create_effects_table(app)
    mark = param(app)

    @app.task
    def pay(order: int) -> None: ...

    job = pay.enqueue(order=1)
    (first,) = claim_now(app, "default", 1, "w1", 0.05)
    time.sleep(0.15)
    app.driver.job_rescue_expired(10)
    (second,) = claim_now(app, "default", 1, "w2", 30)
    stale = rota.Context(first, worker_id="w1", driver=app.driver)
    with pytest.raises(rota.LeaseLostError), stale.transaction() as conn:
        conn.execute(f"INSERT INTO effects VALUES ({mark}, {mark}, {mark})", (job.id, 1, "dup"))
    fresh = rota.Context(second, worker_id="w2", driver=app.driver)
    with fresh.transaction() as conn:
        conn.execute(f"INSERT INTO effects VALUES ({mark}, {mark}, {mark})", (job.id, 2, "once"))
    assert effects(app) == [(job.id, 2, "once")]
    assert app.get_job(job.id).state is rota.JobState.COMPLETED  # type: ignore[union-attr]


def test_steps_run_once_across_retries(app: rota.App) -> None:
    calls: list[str] = []

    @app.task(max_attempts=3, backoff=rota.Backoff(base=0.01, cap=0.01))
    def fulfil(ctx: rota.Context, order: int) -> dict[str, Any]:
        charge = ctx.step(
            "charge",
            lambda: (
                calls.append("charge")
                or {"id": f"ch_{order}", "key": ctx.idempotency_key("charge")}
            ),
        )
        if ctx.attempt == 1:
            raise ConnectionError("shipping API down")
        ship = ctx.step("ship", lambda: calls.append("ship") or "shipped")
        return {"charge": charge, "ship": ship}

    @app.task(max_attempts=2, backoff=rota.Backoff(base=0.01, cap=0.01))
    async def fulfil_async(ctx: rota.Context) -> int:
        async def charge() -> int:
            calls.append("async-charge")
            return 7

        value = await ctx.step_async("charge", charge)
        if ctx.attempt == 1:
            raise ConnectionError("later")
        return value

    a = fulfil.enqueue(order=42)
    b = fulfil_async.enqueue()
    asyncio.run(
        run_worker_until(rota.Worker(app, fast_settings()), lambda: finished(app, a.id, b.id))
    )
    ja, jb = app.get_job(a.id), app.get_job(b.id)
    assert ja is not None and jb is not None
    assert calls.count("charge") == 1 and calls.count("ship") == 1
    assert calls.count("async-charge") == 1
    assert ja.result["charge"]["id"] == "ch_42"  # type: ignore[index]
    assert len(ja.result["charge"]["key"]) == 32  # type: ignore[index]
    assert jb.result == 7 and jb.attempt == 2


def test_idempotency_key_is_stable_per_job_and_step(app: rota.App) -> None:
    @app.task
    def t() -> None: ...

    j1, j2 = t.enqueue(), t.enqueue()
    c1 = rota.Context(j1, worker_id="w")
    assert c1.idempotency_key("a") == rota.Context(j1, worker_id="other").idempotency_key("a")
    assert c1.idempotency_key("a") != c1.idempotency_key("b")
    assert c1.idempotency_key("a") != rota.Context(j2, worker_id="w").idempotency_key("a")


def test_checkpoints_let_a_retry_resume(app: rota.App) -> None:
    processed: list[int] = []

    @app.task(max_attempts=3, backoff=rota.Backoff(base=0.01, cap=0.01))
    def chunks(ctx: rota.Context, total: int) -> int:
        start = (ctx.last_checkpoint or {}).get("next", 0)
        for i in range(start, total):
            processed.append(i)
            ctx.checkpoint({"next": i + 1})
            if i == 4 and ctx.attempt == 1:
                raise RuntimeError("worker hiccup")
        return len(processed)

    job = chunks.enqueue(total=10)
    report = testing.drain(app, with_scheduled=True)
    assert report.completed == 1
    assert processed == list(range(10))  # chunk 0-4 once, then 5-9: nothing redone
    assert app.get_job(job.id).checkpoint == {"next": 10}  # type: ignore[union-attr]


def test_draining_worker_lets_tasks_checkpoint(app: rota.App) -> None:
    @app.task
    async def long(ctx: rota.Context) -> None:
        i = ctx.last_checkpoint or 0
        while True:
            i += 1
            if ctx.draining:
                await ctx.checkpoint_async(i)
                raise rota.Snooze(0)
            await asyncio.sleep(0.01)

    job = long.enqueue()
    worker = rota.Worker(app, fast_settings(grace=5.0))

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        while (j := app.get_job(job.id)) is None or j.state is not rota.JobState.RUNNING:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        worker.stop()
        await task

    asyncio.run(scenario())
    final = app.get_job(job.id)
    assert final is not None and final.state is rota.JobState.AVAILABLE
    assert isinstance(final.checkpoint, int) and final.checkpoint > 1
    assert final.history[-1].outcome is rota.Outcome.SNOOZED


# --- keys under concurrency: many processes, one key, one job ---------------------------


def _enqueue_same_key(url: str, barrier: Any, out: Any) -> None:
    app = rota.App(url)

    @app.task(name="shop.make_ticket")
    def make_ticket(order_id: int) -> None: ...

    barrier.wait()
    job = make_ticket.enqueue(order_id=1049, key="order-1049")
    out.put((job.id, job.created))
    app.close()


@pytest.mark.e2e
def test_fifty_processes_one_key_one_job(database_url: str) -> None:
    with rota.App(database_url) as app:
        app.migrate()
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(50), ctx.Queue()
    procs = [
        ctx.Process(target=_enqueue_same_key, args=(database_url, barrier, out)) for _ in range(50)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    ids = {job_id for job_id, _ in results}
    assert len(ids) == 1
    assert sum(created for _, created in results) == 1
    with rota.App(database_url) as app:
        assert len(app.list_jobs()) == 1


def test_enqueue_in_ctx_transaction_and_inbox(app: rota.App) -> None:
    """A consumer handles each outside message once, in the transaction of its effect."""

    @app.task
    def follow_up(message_id: str) -> None: ...

    deliveries = ["m1", "m2", "m1", "m3", "m2"]  # the broker redelivers m1 and m2
    for message_id in deliveries:
        with app.transaction() as conn:
            if app.inbox_record(conn, "orders", message_id):
                follow_up.enqueue(message_id=message_id, conn=conn)
    assert sorted(j.args["message_id"] for j in app.list_jobs()) == ["m1", "m2", "m3"]
    with pytest.raises(rota.ArgumentsError):
        app.inbox_record(None, "orders", "m4")
