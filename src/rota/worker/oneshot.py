"""One job, run to its end in this process (`rota run`): claim that exact job, execute it
through the Executor with its lease renewed by a Heartbeater, complete it, and after a
retryable failure wait out the task's backoff here and claim it again."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Any

from rota.app import App
from rota.context import Context
from rota.drivers.base import Completion
from rota.errors import JobNotFoundError
from rota.job import Job, JobState
from rota.maintenance.service import wait_set
from rota.telemetry.attempts import AttemptObserver
from rota.worker.executor import Executor
from rota.worker.heartbeat import Heartbeater

log = logging.getLogger("rota.run")

# How often to look at a job that someone else holds (a worker took it first).
FOLLOW_INTERVAL = 1.0

AttemptFunc = Callable[[Job, Completion | None], None]


class OneShot:
    """Runs one job until it is completed, discarded or cancelled.

    `stop()` (SIGTERM) lets the running attempt finish within `grace`, then gives the job
    back to its queue without spending the attempt, as a worker does; `halt()` gives it
    back at once. Either way `run()` returns the job as it is then."""

    def __init__(
        self,
        app: App,
        *,
        lease: float = 30.0,
        grace: float = 30.0,
        worker_id: str | None = None,
        on_attempt: AttemptFunc | None = None,
    ) -> None:
        self.app = app
        self.driver = app.driver
        self.lease = lease
        self.grace = grace
        self.worker_id = worker_id or f"rota-run:{socket.gethostname()}:{os.getpid()}"
        self.on_attempt = on_attempt
        self.attempts = 0  # attempts this process ran
        self._stop = asyncio.Event()
        self._ctx: Context | None = None
        self._grace_timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- control (call on the loop, e.g. from loop.add_signal_handler) ----------------------

    def stop(self) -> None:
        if self._stop.is_set():
            self.halt()
            return
        self._stop.set()
        ctx = self._ctx
        if ctx is not None and self._loop is not None:
            ctx.draining = True
            self._grace_timer = self._loop.call_later(self.grace, ctx.request_cancel, "shutdown")

    def halt(self) -> None:
        self._stop.set()
        if self._ctx is not None:
            self._ctx.request_cancel("shutdown")

    # --- run ----------------------------------------------------------------------------

    async def run(self, job_id: int) -> Job:
        loop = self._loop = asyncio.get_running_loop()
        db_threads = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="rota-run-db")
        task_threads = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rota-run")

        async def db(func: Callable[..., Any], *args: Any) -> Any:
            return await loop.run_in_executor(db_threads, functools.partial(func, *args))

        heartbeater = Heartbeater(self.driver, db, lease=self.lease, interval=self.lease / 3)
        beat_stop = asyncio.Event()
        beating = asyncio.create_task(heartbeater.run(beat_stop), name="rota-run-heartbeat")
        executor = Executor(self.app, task_threads)
        try:
            while True:
                if self._stop.is_set():  # stopped while waiting for a backoff
                    return await self._current(db, job_id)
                claim = (self.driver.job_claim, job_id, self.worker_id, self.lease)
                job: Job | None = await db(*claim)
                if job is None:
                    current = await self._current(db, job_id)
                    if current.state.finished or self._stop.is_set():
                        return current
                    await self._wait(await self._delay(db, current))
                    continue
                await self._attempt(job, executor, heartbeater, db)
                current = await self._current(db, job_id)
                if current.state.finished or self._stop.is_set():
                    return current
                # Retryable (or snoozed): loop, and the claim waits for its run_at.
        finally:
            beat_stop.set()
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
            db_threads.shutdown(wait=False)
            # A sync task still running past its timeout cannot be interrupted; its
            # thread is fenced (no lease) and ends with the process.
            task_threads.shutdown(wait=False, cancel_futures=True)

    async def _attempt(
        self,
        job: Job,
        executor: Executor,
        heartbeater: Heartbeater,
        db: Callable[..., Any],
    ) -> None:
        ctx = Context(job, worker_id=self.worker_id, driver=self.driver, nudge=heartbeater.nudge)
        heartbeater.track(job.id, job.lease_token or "", ctx)
        self._ctx = ctx
        self.attempts += 1
        # Log context, consumer span and counters, as a worker records them (rota.observe).
        observer = AttemptObserver(self.app.metrics)
        watch = observer.start(job)
        execution = None
        try:
            execution = await executor.run(job, ctx)
            if execution.completion is not None:
                heartbeater.submitted(job.id)
                await db(self.driver.job_complete_many, [execution.completion])
        finally:
            observer.finish(watch, execution)
            self._ctx = None
            if self._grace_timer is not None:
                self._grace_timer.cancel()
                self._grace_timer = None
            heartbeater.untrack(job.id)
        if self.on_attempt is not None:
            self.on_attempt(job, execution.completion)

    async def _current(self, db: Callable[..., Any], job_id: int) -> Job:
        current: Job | None = await db(self.driver.job_get, job_id)
        if current is None:
            raise JobNotFoundError(f"job {job_id} is gone (pruned or deleted)")
        return current

    async def _delay(self, db: Callable[..., Any], job: Job) -> float:
        """Seconds until `job` can be claimed again, by the database's clock."""
        if job.state in (JobState.SCHEDULED, JobState.RETRYABLE):
            now: datetime = await db(self.driver.db_now)
            return max(0.0, (job.run_at - now).total_seconds())
        # Running under another worker, or available and about to be taken: follow it.
        return FOLLOW_INTERVAL

    async def _wait(self, seconds: float) -> None:
        await wait_set(self._stop, seconds)
