"""A worker in-process and its presence (#17): it registers before its first claim, and
while its presence session is cut it claims nothing until it has registered again."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

import rota
from rota.job import JobState
from tests.helpers import async_wait_for, fast_settings

LOCK_KEY = "SELECT (tableoid::bigint << 32) | key, session FROM rota_presence WHERE worker = %s"


def test_a_worker_registers_its_presence_before_it_claims(app: rota.App) -> None:
    @app.task(name="noop")
    def noop(ctx: rota.Context) -> str:
        return "ok"

    job = noop.enqueue()
    worker = rota.Worker(app, fast_settings())

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        try:
            done = await async_wait_for(lambda: _state(app, job.id) is JobState.COMPLETED)
            assert done
            (record,) = app.driver.presence.records()
            assert record.worker == worker.id and record.lost_at is None
            assert worker.presence.present and worker.presence.registrations == 1
        finally:
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    asyncio.run(scenario())
    # A clean stop with nothing left running removes the row.
    assert app.driver.presence.records() == []


@pytest.mark.postgres
def test_a_cut_presence_session_stops_claims_until_registered_again(pg_url: str) -> None:
    app = rota.App(pg_url)
    app.migrate()

    @app.task(name="noop")
    def noop(ctx: rota.Context) -> str:
        return "ok"

    worker = rota.Worker(app, fast_settings())

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        blocker = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
        try:
            await async_wait_for(lambda: worker.presence.present)
            # Cut its session, and take its lock ourselves before it registers again: a
            # stand-in for a presence session that cannot come back yet.
            await async_wait_for(lambda: _cut_and_take(blocker, worker.id), timeout=15)
            await async_wait_for(lambda: not worker.presence.present)
            assert worker.presence.losses >= 1
            job = noop.enqueue()
            fetcher = worker.fetchers["default"]
            gated, fetches = fetcher.gated, fetcher.fetches
            worker._wake(None)
            # Woken twice since the job was committed, with free slots: no claim was made.
            await async_wait_for(lambda: fetcher.gated >= gated + 2)
            assert fetcher.fetches == fetches
            assert _state(app, job.id) is JobState.AVAILABLE
            await blocker.close()  # the lock is free: it registers again and claims
            await async_wait_for(lambda: _state(app, job.id) is JobState.COMPLETED, timeout=15)
            assert worker.presence.present and worker.presence.registrations >= 2
        finally:
            await blocker.close()
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    try:
        asyncio.run(scenario())
    finally:
        app.close()


async def _cut_and_take(conn: psycopg.AsyncConnection[Any], worker: str) -> bool:
    """Terminate `worker`'s presence session and try to take its lock: True once taken
    (the worker may win the race to it; then the next call cuts it again)."""
    row = await (await conn.execute(LOCK_KEY, (worker,))).fetchone()
    if row is None:
        return False
    key, session = row
    await conn.execute("SELECT pg_terminate_backend(%s)", (session,))
    for _ in range(200):
        taken = await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))).fetchone()
        if taken is not None and taken[0]:
            return True
        await asyncio.sleep(0.005)
    return False


def _state(app: rota.App, job_id: int) -> JobState | None:
    job = app.get_job(job_id)
    return None if job is None else job.state


@pytest.mark.postgres
def test_a_worker_that_cannot_register_again_in_time_stops_its_jobs(pg_url: str) -> None:
    """Its peers may take its jobs once the grace has passed: it stops them first (as a
    lost lease does), and the job runs again later, once."""
    app = rota.App(pg_url)
    app.migrate()
    reasons: list[str | None] = []

    @app.task(name="wait_stop")
    def wait_stop(ctx: rota.Context) -> str:
        if ctx.attempt == 1:
            while not ctx.wait_cancelled(0.01):
                pass
            reasons.append(ctx.cancel_reason)
            raise RuntimeError("stopped")
        return "ok"

    worker = rota.Worker(app, fast_settings())

    async def scenario() -> None:
        task = asyncio.create_task(worker.run())
        blocker = await psycopg.AsyncConnection.connect(pg_url, autocommit=True)
        try:
            job = wait_stop.enqueue()
            await async_wait_for(lambda: worker.running == 1)
            await async_wait_for(lambda: _cut_and_take(blocker, worker.id), timeout=15)
            await async_wait_for(lambda: reasons == ["lost"], timeout=10)
            assert not worker.presence.present  # stopped while still not registered
            await blocker.close()
            # Nothing was written for the stopped attempt: its lease runs out (2 s here)
            # and it runs again, here, once.
            await async_wait_for(lambda: _state(app, job.id) is JobState.COMPLETED, timeout=20)
            done = app.get_job(job.id)
            assert done is not None and done.attempt == 2
        finally:
            await blocker.close()
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    try:
        asyncio.run(scenario())
    finally:
        app.close()
