"""app.wait / app.wait_async (#19): the result of a completed job, the failure of a
discarded or cancelled one, a timeout; woken by LISTEN/NOTIFY on PostgreSQL (only jobs
someone waits for notify) and by the change watcher on SQLite."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest

import rota
from tests.helpers import fast_settings, run_worker_until, wait_for


def test_wait_returns_results_and_raises_failures(app: rota.App) -> None:
    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task(max_attempts=1)
    def explode(order: str) -> None:
        raise ValueError(f"price field [/usd] missing for {order}")

    @app.task
    def refuse() -> None:
        raise rota.Discard("not today")

    ok = add.enqueue(a=2, b=3)
    bad = explode.enqueue(order="order-1817")
    discarded = refuse.enqueue()
    outcomes: dict[str, Any] = {}

    def waits() -> bool:
        outcomes["ok"] = app.wait(ok, timeout=20)
        for name, job in (("bad", bad), ("discarded", discarded)):
            try:
                app.wait(job.id, timeout=20)
            except rota.JobFailedError as exc:
                outcomes[name] = exc
        return True

    worker = rota.Worker(app, fast_settings())
    asyncio.run(run_worker_until(worker, waits, timeout=30))
    assert outcomes["ok"] == 5
    failed = outcomes["bad"]
    assert type(failed) is rota.JobFailedError
    assert failed.error_type == "ValueError"
    assert failed.error == "price field [/usd] missing for order-1817"
    assert "order-1817" in str(failed) and failed.job.state is rota.JobState.DISCARDED
    assert "not today" in str(outcomes["discarded"])
    # A finished job answers at once, also by id.
    assert app.wait(ok.id, timeout=0) == 5
    with pytest.raises(rota.JobNotFoundError):
        app.wait(987_654, timeout=1)


def test_wait_times_out_and_sees_a_cancel(app: rota.App) -> None:
    @app.task
    def later() -> None:
        pass

    job = later.enqueue(delay=3600)
    with pytest.raises(rota.WaitTimeoutError) as caught:
        app.wait(job, timeout=0.2)
    assert isinstance(caught.value, TimeoutError)
    # A cancel by someone else wakes the waiter (no worker runs here).
    caught_error: list[BaseException] = []

    def waiter() -> None:
        try:
            app.wait(job, timeout=20)
        except BaseException as exc:
            caught_error.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    other = rota.App(app.url)
    try:
        wait_for(lambda: _awaited(app, job.id))
        other.cancel_job(job.id)
    finally:
        other.close()
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert len(caught_error) == 1 and isinstance(caught_error[0], rota.JobCancelledError)


def _awaited(app: rota.App, job_id: int) -> bool:
    """The waiter has flagged the job (so it listens already)."""
    with app.driver.database.read() as session:
        row = session.one("job_get", {"id": job_id})
    return bool(row and row["awaited"])


def test_wait_async(app: rota.App) -> None:
    @app.task
    async def double(n: int) -> int:
        return n * 2

    async def main() -> list[Any]:
        jobs = await double.enqueue_many_async([{"n": i} for i in range(5)])
        worker = rota.Worker(app, fast_settings())
        results: list[Any] = []

        async def waits() -> None:
            results.extend(await asyncio.gather(*(app.wait_async(j, timeout=20) for j in jobs)))

        waiting = asyncio.create_task(waits())
        await run_worker_until(worker, waiting.done, timeout=30)
        await waiting
        with pytest.raises(rota.WaitTimeoutError):
            await app.wait_async(double.enqueue(n=9, delay=3600), timeout=0.1)
        return results

    assert asyncio.run(main()) == [0, 2, 4, 6, 8]


def test_only_awaited_jobs_notify(app: rota.App, dialect: str) -> None:
    """The drain pays nothing for jobs nobody waits for: on PostgreSQL only an awaited
    job's finish sends NOTIFY rota_done (the trigger's WHEN clause)."""
    if dialect != "postgres":
        pytest.skip("NOTIFY is PostgreSQL's; SQLite wakes on its change watcher")

    @app.task
    def noop(i: int) -> int:
        return i

    plain = noop.enqueue_many([{"i": i} for i in range(20)])
    awaited = noop.enqueue(i=99)
    assert app.driver.job_await_mark(awaited.id) is not None
    with psycopg.connect(str(app.url.raw), autocommit=True) as listener:
        listener.execute("LISTEN rota_done")
        worker = rota.Worker(app, fast_settings())
        done = {j.id for j in [*plain, awaited]}
        asyncio.run(
            run_worker_until(
                worker,
                lambda: all(app.get_job(i).state is rota.JobState.COMPLETED for i in done),
            )
        )
        payloads = [n.payload for n in listener.notifies(timeout=1.0)]
    # The channel is the database's: runs in other schemas may notify on it too.
    assert [p for p in payloads if int(p) in done] == [str(awaited.id)]


def test_waiting_does_not_poll_the_row(app: rota.App, dialect: str) -> None:
    """While nothing changes, a waiter reads nothing: it is woken, not looping. (SQLite's
    watcher sees the waiter's own flagging commit once.)"""

    @app.task
    def later() -> None:
        pass

    job = later.enqueue(delay=3600)
    driver = app.driver
    calls = {"job_get_many": 0, "job_await_mark": 0, "job_get": 0}
    for name in calls:
        real = getattr(driver, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(*args, **kwargs)

        setattr(driver, name, counted)
    try:
        with pytest.raises(rota.WaitTimeoutError):
            app.wait(job, timeout=1.5)
    finally:
        for name in calls:
            delattr(driver, name)
    assert calls["job_await_mark"] == 1 and calls["job_get"] == 0
    assert calls["job_get_many"] <= (1 if dialect == "sqlite" else 0), calls
