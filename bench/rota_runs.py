"""Measurements through rota's public API: enqueue (single and bulk), and the drain by an
in-process `rota.Worker` (kept for profiling; the CLI worker's are in bench/cli.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import rota
from bench import tasks
from bench.db import BenchError, Database

BULK_BATCH = 1000
CONCURRENCY = 100
FETCH_BATCH = rota.WorkerSettings.fetch_batch  # a claim takes min(free slots, this)


def worker_settings(concurrency: int = CONCURRENCY) -> rota.WorkerSettings:
    """Defaults, apart from one `bench` queue of `concurrency` slots, claimed up to 100 at
    a time, and no log line per job (what `rota worker --queues bench=C --quiet-queue bench`
    runs)."""
    return rota.WorkerSettings(
        queues={tasks.QUEUE: concurrency},
        fetch_batch=FETCH_BATCH,
        quiet_queues=frozenset({tasks.QUEUE}),
    )


# --- enqueue ----------------------------------------------------------------------------


def enqueue_single(db: Database, jobs: int) -> float:
    """Jobs/s of `task.enqueue(n=i)` in a loop (one transaction each)."""
    with tasks.make_app(db.url) as app:
        task = app.get_task(tasks.NOOP_ASYNC)
        for i in range(10):  # warm up: connections, prepared plans
            task.enqueue(n=-i)
        started = time.perf_counter()
        for i in range(jobs):
            task.enqueue(n=i)
        return jobs / (time.perf_counter() - started)


def enqueue_bulk(db: Database, jobs: int) -> float:
    """Jobs/s of `task.enqueue_many` with batches of 1000 (one transaction each)."""
    with tasks.make_app(db.url) as app:
        task = app.get_task(tasks.NOOP_ASYNC)
        task.enqueue_many([{"n": -1}])  # warm up
        batches = [
            [{"n": i} for i in range(start, min(start + BULK_BATCH, jobs))]
            for start in range(0, jobs, BULK_BATCH)
        ]
        started = time.perf_counter()
        for batch in batches:
            task.enqueue_many(batch)
        return jobs / (time.perf_counter() - started)


# --- drain ------------------------------------------------------------------------------


def drain_child(
    url: str, jobs: int, timeout: float, concurrency: int = CONCURRENCY
) -> dict[str, Any]:
    """Child-process entry: run one worker until `jobs` completions are written.

    The clock starts as the worker starts (its connection is already open) and stops
    when the worker has written the last completion; shutdown is not timed. `cpu` is
    this process's CPU time (all threads) over the same span.
    """
    app = tasks.make_app(url)
    app.check_schema()  # open the connection before the clock starts
    worker = rota.Worker(app, worker_settings(concurrency))

    async def main() -> tuple[float, float]:
        cpu = time.process_time()
        started = time.perf_counter()
        deadline = started + timeout
        run = asyncio.create_task(worker.run())
        while worker.completed < jobs and not run.done():
            if time.perf_counter() > deadline:
                break
            await asyncio.sleep(0.002)
        measured = (time.perf_counter() - started, time.process_time() - cpu)
        worker.stop()
        await run
        return measured

    try:
        elapsed, cpu = asyncio.run(main())
    finally:
        app.close()
    if worker.completed < jobs:
        raise BenchError(f"the worker completed {worker.completed} of {jobs} jobs")
    fetches = sum(f.fetches for f in worker.fetchers.values())
    return {"elapsed": elapsed, "cpu": cpu, "completed": worker.completed, "batches": fetches}
