"""rota.testing, the helpers users call from their own tests."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import psycopg
import pytest

import rota
from rota import testing


def test_drain_runs_everything_including_retries(app: rota.App) -> None:
    calls: list[int] = []

    @app.task(max_attempts=3, backoff=rota.Backoff(base=60))
    def flaky(ctx: rota.Context, n: int) -> int:
        calls.append(n)
        if ctx.attempt == 1 and n == 0:
            raise RuntimeError("first try fails")
        return n

    flaky.enqueue_many([{"n": 0}, {"n": 1}])
    first = testing.drain(app)
    assert (first.completed, first.retried) == (1, 1)
    # The retry waits a minute of backoff; with_scheduled runs it now.
    second = testing.drain(app, with_scheduled=True)
    assert second.completed == 1
    assert sorted(calls) == [0, 0, 1]
    assert testing.drain(app).ran == 0


def test_assert_and_refute_enqueued(app: rota.App) -> None:
    @app.task(queue="mail")
    def send(to: str, subject: str = "hi") -> None: ...

    send.enqueue(to="a@example.com")
    job = testing.assert_enqueued(app, send, {"to": "a@example.com"})
    assert job.queue == "mail"
    testing.assert_enqueued(app, send.name)
    testing.refute_enqueued(app, send, {"to": "b@example.com"})
    with pytest.raises(AssertionError, match="no waiting"):
        testing.assert_enqueued(app, send, {"to": "b@example.com"})
    with pytest.raises(AssertionError, match="expected no such job"):
        testing.refute_enqueued(app, send)


def test_inline_runs_at_once_and_raises_task_errors(app: rota.App) -> None:
    @app.task
    def double(n: int) -> int:
        if n < 0:
            raise ValueError("negative")
        return 2 * n

    with testing.inline(app):
        job = double.enqueue(n=21)
        assert app.get_job(job.id).result == 42  # type: ignore[union-attr]
        with pytest.raises(ValueError, match="negative"):
            double.enqueue(n=-1)
    later = double.enqueue(n=1)
    assert app.get_job(later.id).state is rota.JobState.AVAILABLE  # type: ignore[union-attr]


def test_inline_runs_the_job_it_enqueued(app: rota.App) -> None:
    ran: list[int] = []

    @app.task
    def record(n: int) -> None:
        ran.append(n)

    waiting = record.enqueue(n=1)
    with testing.inline(app):
        record.enqueue(n=2)
    assert ran == [2]
    assert app.get_job(waiting.id).state is rota.JobState.AVAILABLE  # type: ignore[union-attr]


def test_inline_refuses_uncommitted_jobs(app: rota.App) -> None:
    @app.task
    def record(n: int) -> None: ...

    with (
        testing.inline(app),
        app.transaction() as conn,
        pytest.raises(rota.RotaError, match="not committed yet"),
    ):
        record.enqueue(n=1, conn=conn)


def test_inline_refuses_uncommitted_async_jobs_with_the_same_words(
    app: rota.App, dialect: str
) -> None:
    """enqueue_async in the caller's own (async) transaction under inline: the reason it
    cannot run, not a complaint about the connection's type."""

    @app.task
    def record(n: int) -> None: ...

    async def main() -> None:
        conn: Any
        if dialect == "postgres":
            conn = await psycopg.AsyncConnection.connect(str(app.url.raw))
        else:
            conn = sqlite3.connect(app.url.path)
        try:
            with pytest.raises(rota.RotaError, match="not committed yet"):
                await record.enqueue_async(n=1, conn=conn)
        finally:
            if dialect == "postgres":
                await conn.close()
            else:
                conn.close()

    with testing.inline(app):
        asyncio.run(main())


def test_drain_counts_jobs_completed_in_their_own_transaction(app: rota.App) -> None:
    @app.task
    def book(ctx: rota.Context) -> None:
        with ctx.transaction():
            pass  # the job completes together with this transaction

    book.enqueue()
    report = rota.testing.drain(app)
    assert report.completed == 1
    assert [j.state for j in report.jobs] == [rota.JobState.COMPLETED]
