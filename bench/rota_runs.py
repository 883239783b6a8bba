"""Measurements through rota's public API: enqueue (single and bulk), a drain by one
worker process, and enqueue-to-start latency against an idle worker process."""

from __future__ import annotations

import asyncio
import multiprocessing.connection
import random
import time
from typing import Any

import rota
from bench import tasks
from bench.child import SPAWN, stop
from bench.db import BenchError, Database

BULK_BATCH = 1000
CONCURRENCY = 100
FETCH_BATCH = 100


def worker_settings(concurrency: int = CONCURRENCY) -> rota.WorkerSettings:
    """Defaults, apart from one `bench` queue of `concurrency` slots, claimed up to 100 at
    a time (what `rota worker --queues bench=C` runs)."""
    return rota.WorkerSettings(queues={tasks.QUEUE: concurrency}, fetch_batch=FETCH_BATCH)


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


# --- latency ----------------------------------------------------------------------------


def latency_child(
    url: str,
    stamps: multiprocessing.connection.Connection,
    stop_event: Any,
    concurrency: int = CONCURRENCY,
) -> None:
    """Child-process entry: an idle worker whose `bench.stamp` task reports when it starts."""
    app = tasks.make_app(url)
    app.check_schema()
    tasks.stamp_sink = lambda seq, started: stamps.send((seq, started))
    worker = rota.Worker(app, worker_settings(concurrency))

    async def main() -> None:
        run = asyncio.create_task(worker.run())
        while not worker.ready and not run.done():
            await asyncio.sleep(0.005)
        stamps.send(("ready", 0.0))
        while not stop_event.is_set() and not run.done():
            await asyncio.sleep(0.05)
        worker.stop()
        await run

    try:
        asyncio.run(main())
    finally:
        app.close()
        stamps.close()


def latency(
    db: Database,
    samples: int,
    *,
    concurrency: int = CONCURRENCY,
    warmup: int = 10,
    spacing: tuple[float, float] = (0.01, 0.02),
) -> dict[str, list[float]]:
    """Enqueue `samples` jobs one at a time (each after the previous one started, then a
    random 10-20 ms pause) and return seconds from the enqueue() call to the task start,
    and from enqueue() returning (the commit) to the start."""
    receiver, sender = SPAWN.Pipe(duplex=False)
    stop_event = SPAWN.Event()
    proc = SPAWN.Process(
        target=latency_child,
        args=(db.url, sender, stop_event, concurrency),
        name="rota-bench-latency",
    )
    proc.start()
    sender.close()
    from_call: list[float] = []
    from_commit: list[float] = []
    try:
        _expect_ready(receiver, proc)
        with tasks.make_app(db.url) as app:
            task = app.get_task(tasks.STAMP)
            app.check_schema()
            for seq in range(warmup + samples):
                called = time.monotonic()
                task.enqueue(seq=seq)
                returned = time.monotonic()
                got, started = _next_stamp(receiver, proc)
                if got != seq:
                    raise BenchError(f"latency: expected the start of job {seq}, got {got}")
                if seq >= warmup:
                    from_call.append(started - called)
                    from_commit.append(started - returned)
                time.sleep(random.uniform(*spacing))
    finally:
        stop_event.set()
        stop(proc)
        receiver.close()
    return {"from_call": from_call, "from_commit": from_commit}


def _expect_ready(receiver: multiprocessing.connection.Connection, proc: Any) -> None:
    if not receiver.poll(60):
        raise BenchError("latency: the worker did not start within 60s")
    try:
        kind, _ = receiver.recv()
    except EOFError:
        raise BenchError(f"latency: the worker died (exit code {proc.exitcode})") from None
    if kind != "ready":
        raise BenchError(f"latency: unexpected first message {kind!r}")


def _next_stamp(receiver: multiprocessing.connection.Connection, proc: Any) -> tuple[int, float]:
    # Polling would pick any job up within poll_interval (1s); 10s means it is stuck.
    if not receiver.poll(10):
        raise BenchError("latency: a job did not start within 10s")
    try:
        seq, started = receiver.recv()
    except EOFError:
        raise BenchError(f"latency: the worker died (exit code {proc.exitcode})") from None
    return int(seq), float(started)
