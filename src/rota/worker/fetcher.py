"""Fetcher: one per queue. When slots are free and it is woken (a notification, a freed
slot, or the poll interval) it claims a batch with the statement of the queue's mode, and
the claim carries the completions waiting to be written: one transaction, one round trip
on PostgreSQL, for the jobs that ended and the jobs that start."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from rota.drivers.base import PLAIN, Claim, Claimed, Driver
from rota.job import Job
from rota.maintenance.service import DbCall, backoff_delay, log_failure, wait_set
from rota.worker.completer import Completer, refused_value

if TYPE_CHECKING:
    from rota.app import App

log = logging.getLogger("rota.worker")

# A limited queue whose claim was held back (jobs wait, the limit is reached) is tried
# again after this, doubling up to LIMITED_RETRY_MAX (or the poll interval, if shorter): a
# slot may be freed by a completion still on its way to the database, by another worker,
# or by the rate window moving on, and none of them sends a notification.
LIMITED_RETRY = 0.05
LIMITED_RETRY_MAX = 0.25
# Modes whose claim statement writes the waiting completions in the same transaction.
CARRY_MODES = frozenset({PLAIN, "gated"})
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
        start: Callable[[list[Job], Fetcher], None],
        completer: Completer,
        claims: Mapping[str, str],
        capabilities: tuple[str, ...] = (),
        gate: Callable[[], bool] = lambda: True,
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
        self.completer = completer
        self.claims = claims  # queue mode -> its named claim statement
        self.capabilities = capabilities  # only jobs these cover are claimed (rota.routing)
        # Claims wait while this is false: the worker is not registered as present
        # (worker.presence), so its peers could rescue what it claims (#17).
        self.gate = gate
        self.gated = 0  # claims not made because of it (tests wait on this)
        self.mode = PLAIN  # how the queue is claimed; the database corrects it on a claim
        self._wake = asyncio.Event()
        self._more = True  # the last claim says more jobs are likely waiting
        # The last claim was held back by a global or rate limit while jobs wait: every
        # freed slot claims again, and the claim is retried with a short backoff.
        self.limited = False
        self._limited_wait = LIMITED_RETRY
        self._unknown_mode: str | None = None  # a mode no plugged feature brings (logged once)
        self.fetches = 0
        self.failures = 0  # claims in a row that failed (the health endpoint reads it)
        # Claims wait while this says so: the worker cannot renew leases (#21); resume()
        # ends the wait and any failure backoff at once.
        self.paused: Callable[[], bool] = _never
        self._resumed = asyncio.Event()
        self.claim_sent = 0.0  # time.monotonic() the last claim was sent: its leases' start

    def wake(self) -> None:
        self._wake.set()

    def resume(self) -> None:
        """The database answers again: claim now, not after the failure backoff."""
        if self.failures:
            self.failures = 0
            self._resumed.set()  # ends the backoff under way (cleared after it)
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
                await _first(stop, self._resumed, delay)
                self._resumed.clear()
            else:
                timeout = self.poll_interval
                if self.limited and self.free > 0:
                    timeout = min(timeout, self._limited_wait)
                    self._limited_wait = min(self._limited_wait * 2, LIMITED_RETRY_MAX)
                if not self._wake.is_set():
                    await wait_set(self._wake, timeout)
            self._wake.clear()
            if self.paused():
                continue
            switched = False
            carry = True
            while self.free > 0 and not stop.is_set():
                if not self.gate():
                    self.gated += 1  # woken again once present (Worker._wake)
                    break
                query = self.claims.get(self.mode)
                if query is None:
                    self._refuse_mode()
                    break
                limit = min(self.free, self.batch)
                # A claim takes the completions along (one transaction for both), except
                # under a limit: there the slots a completion frees must be free for every
                # worker to claim, not refilled by this one in the same transaction.
                carried = self.completer.take() if carry and self.mode in CARRY_MODES else []
                claim = Claim(
                    self.queue,
                    limit,
                    self.worker_id,
                    self.lease,
                    query,
                    self.capabilities,
                    carried,
                )
                try:
                    self.claim_sent = time.monotonic()
                    claimed: Claimed = await self.db(self.driver.job_fetch, claim)
                except Exception as exc:
                    self.completer.give_back(carried)
                    if carried and refused_value(exc):
                        # An outcome the database refuses: the completer isolates it, and
                        # the claim is made again without the completions.
                        carry = False
                        continue
                    self.failures += 1
                    delay = backoff_delay(self.failures, FAILURE_BACKOFF, FAILURE_BACKOFF_MAX)
                    log_failure(
                        log, f"fetching from queue {self.queue!r}", exc, f"retrying in {delay:.1f}s"
                    )
                    break
                self.completer.settle(carried, claimed.accepted)
                self.fetches += 1
                self.failures = 0
                jobs = claimed.jobs
                if claimed.mode is not None and claimed.mode != self.mode:
                    log.info(
                        "queue %r is claimed as %s now (was %s)",
                        self.queue,
                        claimed.mode,
                        self.mode,
                    )
                    self.mode = claimed.mode
                    if not jobs and not claimed.paused and not switched:
                        switched = True
                        continue  # claim again at once, with the statement of the new mode
                waiting = claimed.waiting
                self._more = len(jobs) == limit if waiting is None else waiting
                # Held back: jobs are waiting but the limit gave fewer than asked for.
                self.limited = bool(waiting) and len(jobs) < limit
                if jobs:
                    self._limited_wait = LIMITED_RETRY
                    self.free -= len(jobs)
                    self.start(jobs, self)
                if not self._more or self.limited:
                    break
                # Let finished jobs hand back their slots so the next claim is a real batch.
                await asyncio.sleep(0)

    def _refuse_mode(self) -> None:
        if self._unknown_mode != self.mode:
            self._unknown_mode = self.mode
            log.error(
                "queue %r is claimed as %r, which no feature plugged into this worker's App "
                "brings; its jobs wait for a worker that has it",
                self.queue,
                self.mode,
            )


def _never() -> bool:
    return False


async def _first(stop: asyncio.Event, resumed: asyncio.Event, delay: float) -> None:
    """Wait `delay` seconds, or less if `stop` or `resumed` is set first."""
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(resumed.wait())]
    try:
        await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()


def claim_now(
    app: App,
    queue: str,
    limit: int,
    worker: str,
    lease: float,
    capabilities: tuple[str, ...] | None = None,
) -> list[Job]:
    """Claim up to `limit` jobs of `queue` at once, in the queue's mode, outside a worker
    (rota.testing.drain, tests). `capabilities` None claims routed jobs too."""
    claims = app.claim_queries()
    mode = PLAIN
    for _ in range(2):
        query = claims.get(mode)
        if query is None:
            return []  # a mode no plugged feature brings
        claimed = app.driver.job_fetch(Claim(queue, limit, worker, lease, query, capabilities))
        if claimed.mode is None or claimed.mode == mode or claimed.jobs or claimed.paused:
            return claimed.jobs
        mode = claimed.mode
    return []
