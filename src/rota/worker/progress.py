"""Progress writer: ctx.progress() only records the latest value in memory; this part
writes what changed in one fenced statement at most every `interval` seconds, so a task
reporting in a tight loop costs the database nothing extra (and never blocks the loop)."""

from __future__ import annotations

import asyncio
import logging
import threading

from rota.drivers.base import Driver, ProgressUpdate
from rota.maintenance.service import DbCall, log_failure, wait_set

log = logging.getLogger("rota.worker")


class ProgressWriter:
    def __init__(self, driver: Driver, db: DbCall, *, interval: float = 0.5) -> None:
        self.driver = driver
        self.db = db
        self.interval = interval
        self._pending: dict[int, ProgressUpdate] = {}
        self._lock = threading.Lock()  # report() is called from task threads too
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        # One write at a time: a job's final flush waits for a batch already on its way
        # (which may hold an older value of the same job) instead of racing it.
        self._writing = asyncio.Lock()
        self.writes = 0

    def report(self, update: ProgressUpdate) -> None:
        """Keep `update` as the job's latest value (any thread; never blocks)."""
        with self._lock:
            first = not self._pending
            self._pending[update.job_id] = update
        if first and self._loop is not None:
            self._loop.call_soon_threadsafe(self._event.set)

    def pending(self, job_id: int) -> bool:
        return job_id in self._pending or self._writing.locked()

    def forget(self, job_id: int) -> None:
        with self._lock:
            self._pending.pop(job_id, None)

    async def flush(self, job_id: int | None = None) -> None:
        """Write the pending values now: one job's (before its completion is written,
        after which the fence would refuse it) or all of them."""
        async with self._writing:
            with self._lock:
                if job_id is None:
                    batch, self._pending = list(self._pending.values()), {}
                else:
                    one = self._pending.pop(job_id, None)
                    batch = [] if one is None else [one]
            if not batch:
                return
            try:
                await self.db(self.driver.job_progress_record_many, batch)
                self.writes += 1
            except Exception as exc:
                # Progress is advisory: a failed write is dropped, the next report retries.
                log_failure(log, "writing progress", exc, "dropped until the next report")

    async def run(self, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        while not stop.is_set():
            await wait_set(self._event, 1.0)
            self._event.clear()
            await self.flush()
            # The rate limit: nothing more for this long, however often tasks report.
            await asyncio.sleep(self.interval)
