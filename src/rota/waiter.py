"""Waiting for a job's outcome (`app.wait`, `app.wait_async`): one listener thread per
App wakes the waiters of finished jobs, from PostgreSQL's LISTEN (the trigger of
migration 0017 notifies awaited jobs only) or SQLite's change watcher; it reads the jobs
it is told about, never polls the rows."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from rota.drivers import Driver
from rota.errors import (
    JobCancelledError,
    JobFailedError,
    JobNotFoundError,
    WaitTimeoutError,
)
from rota.job import Job, JobState

log = logging.getLogger("rota.wait")

OnDone = Callable[[Job], None]
READY_TIMEOUT = 15.0  # seconds to wait for the listener to be listening


class Waiters:
    """The waiters of one App, and the thread that listens for them."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._lock = threading.Lock()
        self._waiting: dict[int, list[OnDone]] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, job_id: int, done: OnDone) -> None:
        """Register `done` for `job_id`; returns once the listener is listening, so a
        finish committed after this call cannot be missed."""
        with self._lock:
            self._waiting.setdefault(job_id, []).append(done)
            if self._thread is None:
                self._thread = threading.Thread(target=self._listen, name="rota-wait", daemon=True)
                self._thread.start()
        if not self._ready.wait(READY_TIMEOUT):
            self.remove(job_id, done)
            raise WaitTimeoutError("could not start listening for finished jobs in time")

    def remove(self, job_id: int, done: OnDone) -> None:
        with self._lock:
            callbacks = self._waiting.get(job_id, [])
            if done in callbacks:
                callbacks.remove(done)
            if not callbacks:
                self._waiting.pop(job_id, None)

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def _listen(self) -> None:
        try:
            self._driver.done_watcher().watch(self._stop, self._changed, self._ready.set)
        except Exception:  # the waiters time out; say why
            log.exception("the listener of app.wait stopped")

    def _changed(self, job_id: int | None) -> None:
        """Some awaited job (or, for None, any) may have finished: read those waited
        for and call the waiters of the finished ones."""
        with self._lock:
            ids = list(self._waiting) if job_id is None else [job_id]
            ids = [i for i in ids if i in self._waiting]
        if not ids:
            return
        try:
            jobs = self._driver.job_get_many(ids)
        except Exception as exc:  # a later wake-up reads again
            log.warning("app.wait could not read jobs %s: %s", ids, exc)
            return
        for job in jobs:
            if job.state.finished:
                with self._lock:
                    callbacks = self._waiting.pop(job.id, [])
                for done in callbacks:
                    # One waiter's failure (its event loop closed meanwhile) must not end
                    # the listener that every other waiter of this App depends on.
                    try:
                        done(job)
                    except Exception:
                        log.warning("a waiter of job %s could not be woken", job.id, exc_info=True)


def outcome(job: Job) -> object:
    """The result of a completed job, or the error its other finish means."""
    if job.state is JobState.COMPLETED:
        return job.result
    last = job.history[-1] if job.history else None
    error_type = last.error_type if last else None
    message = last.message if last else None
    detail = f": {error_type}: {message}" if error_type or message else ""
    if job.state is JobState.CANCELLED:
        raise JobCancelledError(
            f"job {job.id} ({job.task}) was cancelled{detail}",
            job=job,
            error_type=error_type,
            error=message,
        )
    raise JobFailedError(
        f"job {job.id} ({job.task}) failed after {job.attempt} attempt(s){detail}",
        job=job,
        error_type=error_type,
        error=message,
    )


def wait(waiters: Waiters, driver: Driver, job_id: int, timeout: float | None) -> object:
    """Block until job `job_id` finishes; its result, or its failure raised."""
    deadline = None if timeout is None else time.monotonic() + timeout
    finished = threading.Event()
    seen: list[Job] = []

    def done(job: Job) -> None:
        seen.append(job)
        finished.set()

    waiters.add(job_id, done)
    try:
        job = _mark(driver, job_id)
        if job.state.finished:
            return outcome(job)
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not finished.wait(remaining):
            raise _timed_out(job_id, timeout)
        return outcome(seen[0])
    finally:
        waiters.remove(job_id, done)


async def wait_async(
    waiters: Waiters, driver: Driver, job_id: int, timeout: float | None
) -> object:
    """`wait` on the event loop: the blocking calls run in a thread, the waiting on a
    future the listener thread resolves."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Job] = loop.create_future()

    def settle(job: Job) -> None:
        if not future.done():
            future.set_result(job)

    def done(job: Job) -> None:
        loop.call_soon_threadsafe(settle, job)

    async def until_done() -> object:
        job = await asyncio.to_thread(_mark, driver, job_id)
        if job.state.finished:
            return outcome(job)
        return outcome(await future)

    try:
        await asyncio.to_thread(waiters.add, job_id, done)
        return await asyncio.wait_for(until_done(), timeout)
    except TimeoutError:
        raise _timed_out(job_id, timeout) from None
    finally:
        waiters.remove(job_id, done)


def _mark(driver: Driver, job_id: int) -> Job:
    job = driver.job_await_mark(job_id)
    if job is None:
        raise JobNotFoundError(f"no job with id {job_id}")
    return job


def _timed_out(job_id: int, timeout: float | None) -> WaitTimeoutError:
    return WaitTimeoutError(
        f"job {job_id} did not finish within {timeout}s (it goes on; wait again or "
        "look at it with `rota jobs show`)"
    )
