"""Typed enqueue and async enqueue (#19): `task.options(...).enqueue(...)` keeps options
apart from arguments (so a task may take `key`, `queue`, `delay`, `tenant`), and
`enqueue_async` / `enqueue_many_async` write the same rows without blocking the loop, on
their own connections or in the caller's async transaction."""

from __future__ import annotations

import asyncio
import sqlite3

import psycopg
import pytest

import rota


def test_options_keep_arguments_apart(app: rota.App) -> None:
    @app.task(queue="mail")
    def send(ctx: rota.Context, key: str, queue: str, delay: int = 0, tenant: str = "") -> None:
        pass

    job = send.options(key="send-1", queue="mail-eu", tenant="acme").enqueue(
        key="template-key", queue="en", delay=5, tenant="shown"
    )
    assert (job.key, job.queue, job.tenant) == ("send-1", "mail-eu", "acme")
    assert job.args == {"key": "template-key", "queue": "en", "delay": 5, "tenant": "shown"}
    stored = app.get_job(job.id)
    assert stored is not None and stored.args == job.args and stored.queue == "mail-eu"
    # Positional arguments bind in the function's order, the context left out.
    positional = send.options().enqueue("k2", "fr")
    assert positional.args == {"key": "k2", "queue": "fr", "delay": 0, "tenant": ""}
    assert positional.queue == "mail"
    # The same idempotency key gives the holder back.
    again = send.options(key="send-1").enqueue(key="other", queue="x")
    assert again.id == job.id and not again.created
    # The mixed call cannot tell them apart on such a task: it refuses, naming the fix.
    with pytest.raises(rota.ArgumentsError, match=r"options\(\.\.\.\)\.enqueue"):
        send.enqueue(key="k3", queue="de")
    # By name (the CLI's and the HTTP API's path) arguments stay arguments.
    by_name = app.enqueue(send.name, {"key": "k4", "queue": "it"}, priority=3)
    assert by_name.args["queue"] == "it" and by_name.priority == 3
    with pytest.raises(rota.ArgumentsError, match="twice"):
        send.options().enqueue("k5", key="k6", queue="x")  # type: ignore[misc]
    with pytest.raises(rota.ArgumentsError, match="delay"):
        send.options(delay=-1)
    with pytest.raises(rota.ArgumentsError, match="many jobs"):
        send.options(key="one").enqueue_many([{"key": "a", "queue": "b"}])
    many = send.options(queue="bulk", priority=-1).enqueue_many(
        [{"key": "a", "queue": "b"}, {"key": "c", "queue": "d"}]
    )
    assert [(j.queue, j.priority, j.args["key"]) for j in many] == [
        ("bulk", -1, "a"),
        ("bulk", -1, "c"),
    ]


def test_todays_enqueue_keeps_working(app: rota.App) -> None:
    @app.task
    def charge(order_id: int) -> None:
        pass

    job = charge.enqueue(order_id=1, key="charge-1", queue="payments", delay=30)
    assert (job.key, job.queue, job.state) == ("charge-1", "payments", rota.JobState.SCHEDULED)
    assert charge.options(queue="payments").enqueue(order_id=2).args == {"order_id": 2}


def test_enqueue_async(app: rota.App) -> None:
    @app.task
    def charge(order_id: int, tenant: str = "") -> None:
        pass

    async def main() -> list[rota.Job]:
        first = await charge.enqueue_async(order_id=1, key="charge-1")
        held = await charge.enqueue_async(order_id=1, key="charge-1")
        assert held.id == first.id and not held.created
        typed = await charge.options(tenant="acme").enqueue_async(2, tenant="arg")
        many = await charge.enqueue_many_async([{"order_id": 3}, {"order_id": 4}], priority=5)
        more = await charge.options(queue="q2").enqueue_many_async([{"order_id": 5}])
        # Many tasks enqueueing at once share the async pool.
        burst = await asyncio.gather(*(charge.enqueue_async(order_id=i) for i in range(10, 30)))
        return [first, typed, *many, *more, *burst]

    jobs = asyncio.run(main())
    assert jobs[1].tenant == "acme" and jobs[1].args == {"order_id": 2, "tenant": "arg"}
    assert [j.priority for j in jobs[2:4]] == [5, 5] and jobs[4].queue == "q2"
    stored = {j.id: j for j in app.list_jobs(limit=100)}
    assert len(stored) == len(jobs) == 25
    assert all(stored[j.id].args == j.args for j in jobs)
    # A second event loop (asyncio.run again) gets a pool of its own.
    assert asyncio.run(charge.enqueue_async(order_id=99)).id not in stored


def test_enqueue_async_in_short_lived_event_loops_never_hangs_their_end(app: rota.App) -> None:
    """A script may call asyncio.run(task.enqueue_async(...)) again and again: each loop
    gets a pool of its own, and none may be left connecting when its loop ends (a cancelled
    connect that psycopg_pool retried kept asyncio.run from returning, within a few hundred
    calls; pytest-timeout fails the test then)."""

    @app.task
    def charge(order_id: int) -> None:
        pass

    ids = {asyncio.run(charge.enqueue_async(order_id=i)).id for i in range(400)}
    assert len(ids) == 400


def test_enqueue_async_in_the_callers_transaction(app: rota.App, dialect: str) -> None:
    @app.task
    def ship(order_id: int) -> None:
        pass

    url = str(app.url.raw)

    async def on_postgres() -> tuple[int, int]:
        async with await psycopg.AsyncConnection.connect(url) as conn:
            kept = await ship.enqueue_async(order_id=1, conn=conn)
            await conn.commit()
            dropped = await ship.options(conn=conn).enqueue_async(order_id=2)
            await conn.rollback()
        return kept.id, dropped.id

    async def on_sqlite() -> tuple[int, int]:
        conn = sqlite3.connect(app.url.path)
        try:
            conn.execute("BEGIN IMMEDIATE")
            kept = await ship.enqueue_async(order_id=1, conn=conn)
            conn.commit()
            conn.execute("BEGIN IMMEDIATE")
            dropped = await ship.options(conn=conn).enqueue_async(order_id=2)
            conn.rollback()
        finally:
            conn.close()
        return kept.id, dropped.id

    kept, dropped = asyncio.run(on_postgres() if dialect == "postgres" else on_sqlite())
    assert app.get_job(kept) is not None
    assert app.get_job(dropped) is None
    with pytest.raises(rota.ConfigurationError, match="conn="):
        asyncio.run(ship.enqueue_async(order_id=3, conn=object()))
