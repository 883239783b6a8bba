"""Fetcher: one per queue. It claims jobs in batches when slots are free and it is
woken (a notification, a freed slot after a full batch, or the poll interval)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from rota.drivers.base import Driver
from rota.job import Job
from rota.maintenance.service import DbCall, backoff_delay, log_failure

log = logging.getLogger("rota.worker")

# A limited queue whose claim was held back (jobs wait, the limit is reached) is tried
# again after this, doubling up to LIMITED_RETRY_MAX (or the poll interval, if shorter): a
# slot may be freed by a completion still on its way to the database, by another worker,
# or by the rate window moving on, and none of them sends a notification.
LIMITED_RETRY = 0.05
LIMITED_RETRY_MAX = 0.25
# After a failed claim: 0.5 s, doubling up to 30 s, jittered (maintenance.service).
FAILURE_BACKOFF = 0.5
FAILURE_BACKOFF_MAX = 30.0


class Fetcher:
    def __init__(
        self,
        driver: Driver,
        db: DbCall,
        *,
        queue: str,
        concurrency: int,
        batch: int,
        worker_id: str,
        lease: float,
        poll_interval: float,
        start: Callable[[Job, Fetcher], None],
        capabilities: tuple[str, ...] = (),
    ) -> None:
        self.driver = driver
        self.db = db
        self.queue = queue
        self.concurrency = concurrency
        self.free = concurrency
        self.batch = batch
        self.worker_id = worker_id
        self.lease = lease
        self.poll_interval = poll_interval
        self.start = start
        self.capabilities = capabilities  # only jobs these cover are claimed (rota.routing)
        self._wake = asyncio.Event()
        self._more = True  # the last claim filled its batch: more jobs are likely waiting
        # The last claim was held back by a global or rate limit while jobs wait: every
        # freed slot claims again, and the claim is retried with a short backoff.
        self.limited = False
        self._limited_wait = LIMITED_RETRY
        self.fetches = 0
        self.failures = 0  # claims in a row that failed (the health endpoint reads it)

    def wake(self) -> None:
        self._wake.set()

    def release(self) -> None:
        """A slot came free (its job finished)."""
        self.free += 1
        if self.limited:
            self._limited_wait = LIMITED_RETRY
            self._wake.set()
        elif self._more:
            self._wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        delay = 0.0
        while not stop.is_set():
            if self.failures:
                # Backing off after failed claims: a wake-up does not cut the wait short.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=delay)
            else:
                timeout = self.poll_interval
                if self.limited and self.free > 0:
                    timeout = min(timeout, self._limited_wait)
                    self._limited_wait = min(self._limited_wait * 2, LIMITED_RETRY_MAX)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            self._wake.clear()
            while self.free > 0 and not stop.is_set():
                limit = min(self.free, self.batch)
                try:
                    jobs: list[Job] = await self.db(
                        self.driver.job_fetch_available,
                        self.queue,
                        limit,
                        self.worker_id,
                        self.lease,
                        self.capabilities,
                    )
                except Exception as exc:
                    self.failures += 1
                    delay = backoff_delay(self.failures, FAILURE_BACKOFF, FAILURE_BACKOFF_MAX)
                    log_failure(
                        log, f"fetching from queue {self.queue!r}", exc, f"retrying in {delay:.1f}s"
                    )
                    break
                self.fetches += 1
                self.failures = 0
                self._more = len(jobs) == limit
                self.limited = self.driver.ops.queue_limited_hint(self.queue)
                if jobs:
                    self._limited_wait = LIMITED_RETRY
                for job in jobs:
                    self.free -= 1
                    self.start(job, self)
                if not self._more:
                    break
                # Let finished jobs hand back their slots so the next claim is a real batch.
                await asyncio.sleep(0)
