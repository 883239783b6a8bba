"""Queue controls, ordering and dead letters with real in-process workers on both
dialects: per-key order across parallel workers, poisoned keys, pause within one poll
interval (and across a restart), a rate limit over a short window."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta

import rota
from tests.helpers import fast_settings, wait_for


async def run_workers(
    workers: list[rota.Worker], condition: Callable[[], object], timeout: float = 20.0
) -> None:
    """Run several workers on one loop until `condition()` holds, then stop them all."""
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(condition):
            for task in tasks:
                if task.done():
                    task.result()
                    raise AssertionError("a worker stopped early")
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout}s")
            await asyncio.sleep(0.02)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)


def starts(app: rota.App, queue: str) -> list[datetime]:
    """Every attempt's start time, from the database."""
    out = []
    for job in app.list_jobs(queue=queue, limit=10_000):
        out += [a.started_at for a in job.history if a.started_at is not None]
        if job.state is rota.JobState.RUNNING and job.attempted_at is not None:
            out.append(job.attempted_at)
    return sorted(out)


def test_jobs_of_one_key_run_one_at_a_time_in_order_across_workers(app: rota.App) -> None:
    lock = threading.Lock()
    running: dict[str, int] = defaultdict(int)
    seen: dict[str, list[int]] = defaultdict(list)
    overlap = {"per_key": 0, "total": 0, "now": 0}

    @app.task(queue="orders")
    def handle(customer: str, seq: int) -> None:
        with lock:
            running[customer] += 1
            overlap["now"] += 1
            overlap["per_key"] = max(overlap["per_key"], running[customer])
            overlap["total"] = max(overlap["total"], overlap["now"])
            seen[customer].append(seq)
        time.sleep(0.01)
        with lock:
            running[customer] -= 1
            overlap["now"] -= 1

    for seq in range(8):
        for customer in ("c1", "c2", "c3", "c4"):
            handle.enqueue(customer=customer, seq=seq, partition_key=customer)
    workers = [rota.Worker(app, fast_settings(queues={"orders": 4})) for _ in range(2)]
    asyncio.run(run_workers(workers, lambda: sum(len(v) for v in seen.values()) == 32))
    assert {c: seen[c] for c in seen} == {c: list(range(8)) for c in ("c1", "c2", "c3", "c4")}
    assert overlap["per_key"] == 1  # never two jobs of one key at once
    assert overlap["total"] > 1  # while different keys ran in parallel


def test_a_poisoned_key_is_visible_and_other_keys_flow(app: rota.App) -> None:
    done: list[tuple[str, int]] = []
    broken = {"on": True}

    @app.task(queue="orders", max_attempts=1)
    def handle(customer: str, seq: int) -> None:
        if customer == "bad" and seq == 0 and broken["on"]:
            raise rota.Discard("payment provider refused")
        done.append((customer, seq))

    for seq in range(3):
        for customer in ("bad", "good"):
            handle.enqueue(customer=customer, seq=seq, partition_key=customer)
    worker = rota.Worker(app, fast_settings(queues={"orders": 4}))

    def good_done_and_bad_visible() -> bool:
        return len([d for d in done if d[0] == "good"]) == 3 and bool(app.queues.partitions())

    asyncio.run(run_workers([worker], good_done_and_bad_visible))
    (poisoned,) = app.queues.partitions("orders")
    assert (poisoned.partition_key, poisoned.waiting, poisoned.dead) == ("bad", 2, 1)
    assert [d for d in done if d[0] == "bad"] == []  # later jobs of the key wait
    (dead,) = app.dlq.list(partition_key="bad")
    assert dead.history[-1].message == "payment provider refused"
    broken["on"] = False
    app.dlq.replay(partition_key="bad", reason="provider fixed")
    worker = rota.Worker(app, fast_settings(queues={"orders": 4}))
    asyncio.run(run_workers([worker], lambda: len(done) == 6))
    assert [d for d in done if d[0] == "bad"] == [("bad", 0), ("bad", 1), ("bad", 2)]
    assert app.queues.partitions() == []


def test_pause_stops_new_starts_within_one_poll_interval_and_survives_a_restart(
    app: rota.App,
) -> None:
    @app.task(queue="slow")
    def nap() -> None:
        time.sleep(0.05)

    nap.enqueue_many([{} for _ in range(200)])
    settings = fast_settings(queues={"slow": 2}, poll_interval=0.1)

    async def pause_while_running() -> datetime:
        worker = rota.Worker(app, settings)
        task = asyncio.create_task(worker.run())
        try:
            while len(await asyncio.to_thread(starts, app, "slow")) < 4:
                await asyncio.sleep(0.02)
            await asyncio.to_thread(app.queues.pause, "slow")
            paused_at = await asyncio.to_thread(app.driver.db_now)
            await asyncio.sleep(0.6)  # several poll intervals: nothing may start
            return paused_at
        finally:
            worker.stop()
            await asyncio.wait_for(task, timeout=30)

    paused_at = asyncio.run(pause_while_running())
    poll = timedelta(seconds=settings.poll_interval)
    assert [s for s in starts(app, "slow") if s > paused_at + poll] == []
    started = len(starts(app, "slow"))
    assert started < 200
    # A new worker (a restart) still finds the queue paused.
    deadline = time.monotonic() + 0.5
    asyncio.run(run_workers([rota.Worker(app, settings)], lambda: time.monotonic() > deadline))
    assert len(starts(app, "slow")) == started
    assert next(q for q in app.list_queues() if q.name == "slow").paused
    app.queues.resume("slow")
    asyncio.run(
        run_workers([rota.Worker(app, settings)], lambda: len(starts(app, "slow")) > started)
    )


def test_rate_limit_holds_over_a_short_window(app: rota.App) -> None:
    @app.task(queue="api")
    def call() -> None: ...

    call.enqueue_many([{} for _ in range(60)])
    app.queues.configure("api", rate=(5, 1.0))
    worker = rota.Worker(app, fast_settings(queues={"api": 10}, poll_interval=0.05))
    asyncio.run(run_workers([worker], lambda: len(starts(app, "api")) >= 16, timeout=15))
    times = starts(app, "api")
    first = times[0]
    # No one-second window holds more than 5 starts...
    for i, t in enumerate(times):
        assert len([u for u in times[i:] if u < t + timedelta(seconds=1.0)]) <= 5
    # ...and the limit is used: 3 windows from the first start hold up to 15 starts (the
    # 20-second e2e test on PostgreSQL checks the 10% band; a loaded CI box may lag here).
    in_three = [t for t in times if t < first + timedelta(seconds=3.0)]
    assert 10 <= len(in_three) <= 15


def test_expired_job_never_runs_on_a_worker(app: rota.App) -> None:
    ran: list[int] = []

    @app.task(queue="q")
    def work(n: int) -> None:
        ran.append(n)

    deadline = app.driver.db_now() + timedelta(milliseconds=200)
    app.pause_queue("q")
    work.enqueue(n=1, expires_at=deadline)
    work.enqueue(n=2)
    wait_for(lambda: app.driver.db_now() > deadline, timeout=5)
    app.resume_queue("q")
    worker = rota.Worker(app, fast_settings(queues={"q": 2}))
    asyncio.run(run_workers([worker], lambda: ran == [2] and len(app.dlq.list()) == 1))
    (dead,) = app.dlq.list(error_type="Expired")
    assert dead.args == {"n": 1} and dead.attempt == 0


def test_a_limited_queue_reuses_each_freed_slot_at_once(app: rota.App) -> None:
    lock = threading.Lock()
    now = {"running": 0, "max": 0}

    @app.task(queue="scarce")
    def hold() -> None:
        with lock:
            now["running"] += 1
            now["max"] = max(now["max"], now["running"])
        time.sleep(0.05)
        with lock:
            now["running"] -= 1

    jobs = hold.enqueue_many([{} for _ in range(12)])
    app.queues.configure("scarce", global_limit=2)
    # A long poll: only the freed-slot wake-up can keep the two slots busy.
    worker = rota.Worker(app, fast_settings(queues={"scarce": 4}, poll_interval=5.0))
    started = time.monotonic()
    asyncio.run(
        run_workers(
            [worker],
            lambda: all((j := app.get_job(x.id)) is not None and j.state.finished for x in jobs),
        )
    )
    assert now["max"] == 2
    assert time.monotonic() - started < 4.0  # 6 rounds of 50 ms, not 6 polls of 5 s
