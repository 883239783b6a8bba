"""Test helpers: wait for a condition instead of sleeping, and run a worker in-process."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import rota

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 10.0, interval: float = 0.02) -> T:
    """Poll `predicate` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)


async def async_wait_for(
    predicate: Callable[[], T | Awaitable[T]], timeout: float = 10.0, interval: float = 0.02
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


async def claims_tried(worker: rota.Worker, queue: str, count: int = 3) -> None:
    """Wait until `worker` has finished `count` more claims on `queue` than it had now:
    at least `count - 1` of them started after this call, so whatever was committed
    before it has been offered to the worker. What a test asserts after this about jobs
    not started is a fact, not the luck of a sleep that was too short."""
    fetcher = await async_wait_for(lambda: worker.fetchers.get(queue))
    target = fetcher.fetches + count
    await async_wait_for(lambda: fetcher.fetches >= target)


@contextlib.contextmanager
def tickets_app(url: str, **options: Any) -> Iterator[rota.App]:
    """A migrated, open app with one no-op task, `tickets.issue(order)`: for tests of
    storage, where the task only gives the jobs a name and a signature."""
    app = rota.App(url, **options)

    @app.task(name="tickets.issue")
    def issue(order: int) -> None:
        return None

    app.migrate()
    with app:
        yield app


def fast_settings(**overrides: object) -> rota.WorkerSettings:
    """Tiny intervals for tests: quick leases, staging, rescue and leadership."""
    values: dict[str, object] = dict(
        queues={"default": 4},
        lease=2.0,
        heartbeat=0.3,
        poll_interval=0.1,
        grace=2.0,
        stage_interval=0.05,
        rescue_interval=0.1,
        leader_ttl=1.0,
        prune_interval=60.0,
    )
    values.update(overrides)
    return rota.WorkerSettings(**values)  # type: ignore[arg-type]


async def run_worker_until(
    worker: rota.Worker, condition: Callable[[], object], timeout: float = 15.0
) -> None:
    """Run `worker` until `condition()` is truthy (checked off the loop), then stop it."""
    task = asyncio.create_task(worker.run())
    try:
        deadline = time.monotonic() + timeout
        while True:
            done = await asyncio.to_thread(condition)
            if done:
                break
            if task.done():
                task.result()
                raise AssertionError("worker stopped before the condition was met")
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout}s")
            await asyncio.sleep(0.02)
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=30)
