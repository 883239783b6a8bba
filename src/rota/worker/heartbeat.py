"""Heartbeater: renews the lease of every job this worker holds, in one statement per
beat. A job missing from the answer lost its lease (it was rescued): it is told to
stop, and its eventual completion will be refused by the fencing token anyway. A job
whose outcome waits for the completer is renewed for one lease at most: an outcome
that can never be written must not keep its job running for ever. Each renewal moves the
job's local lease clock (rota.worker.lease_clock); a job whose lease goes unconfirmed too
long is stopped here, while the database still cannot be reached (fence())."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from rota.context import Context
from rota.drivers.base import Driver
from rota.maintenance.service import DbCall, log_failure, wait_set
from rota.worker.lease_clock import LeaseClock

log = logging.getLogger("rota.worker")

# While beats fail, the next one comes after this at most (not a whole interval), so the
# worker notices within a second that the database is back (#21).
RETRY_AFTER_FAILURE = 1.0


class Heartbeater:
    def __init__(
        self,
        driver: Driver,
        db: DbCall,
        *,
        lease: float,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        fence_after: float | None = None,
    ) -> None:
        self.driver = driver
        self.db = db
        self.lease = lease
        self.interval = interval
        self.clock = clock
        self.leases = LeaseClock(fence_after if fence_after is not None else lease, clock)
        # When the beat now waiting for its answer was sent (None: none is waiting).
        self.in_flight_since: float | None = None
        self.lease_lost = 0  # jobs stopped by the local lease clock
        self.last_lease_lost: float | None = None
        self._held: dict[int, tuple[str, Context]] = {}
        # Jobs whose outcome is handed to the completer (and when): still renewed until
        # written, for one lease at most, and a missing renewal is expected (our own
        # completion may have landed).
        self._submitted: dict[int, float] = {}
        self._event = asyncio.Event()
        self.beats = 0
        # For the health endpoint (time.monotonic() values): the last beat that succeeded
        # (leases renewed, or none held), the last beat that ended either way (a stuck
        # heartbeater stops moving it), and how many beats in a row have failed.
        self.last_beat: float | None = None
        self.last_attempt: float | None = None
        self.failures = 0

    def track(
        self, job_id: int, token: str, ctx: Context, confirmed_at: float | None = None
    ) -> None:
        """Hold `job_id`, whose lease the claim sent at `confirmed_at` set."""
        self._held[job_id] = (token, ctx)
        self.leases.confirmed((job_id,), self.clock() if confirmed_at is None else confirmed_at)

    def submitted(self, job_id: int) -> None:
        self._submitted[job_id] = self.clock()

    def untrack(self, job_id: int) -> None:
        self._held.pop(job_id, None)
        self._submitted.pop(job_id, None)
        self.leases.forget(job_id)

    def context(self, job_id: int) -> Context | None:
        """The context of a job this worker still holds (running, or its outcome not yet
        written)."""
        held = self._held.get(job_id)
        return None if held is None else held[1]

    def nudge(self) -> None:
        self._event.set()

    @property
    def held(self) -> int:
        return len(self._held)

    def hanging(self, after: float) -> bool:
        """A beat has waited longer than `after` seconds for its answer."""
        since = self.in_flight_since
        return since is not None and self.clock() - since > after

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            wait = min(self.interval, RETRY_AFTER_FAILURE) if self.failures else self.interval
            await wait_set(self._event, wait)
            self._event.clear()
            try:
                await self.beat()
            except Exception as exc:
                # The next beat comes at the interval all the same, however many failed:
                # backing off would let the leases run out (the cap is the interval).
                self.failures += 1
                log_failure(
                    log, "heartbeat", exc, f"leases expire in {self.lease:.0f}s unless renewed"
                )
            else:
                self.failures = 0
                self.last_beat = time.monotonic()
            self.last_attempt = time.monotonic()

    async def beat(self) -> None:
        self._drop_unwritten()
        snapshot = dict(self._held)
        sent = self.clock()
        self.in_flight_since = sent
        try:
            if not snapshot:
                # Nothing to renew: still ask, so that health and the paused claims
                # learn within one interval whether the database answers.
                await self.db(self.driver.db_now)
                return
            leases = [(job_id, token) for job_id, (token, _) in snapshot.items()]
            renewed = await self.db(self.driver.job_lease_renew, leases, self.lease)
        finally:
            self.in_flight_since = None
        self.beats += 1
        alive = {r.job_id: r for r in renewed}
        self.leases.confirmed((j for j in alive if j in self._held), sent)
        for job_id, (_, ctx) in snapshot.items():
            renewal = alive.get(job_id)
            if renewal is None:
                if ctx.completed_in_transaction:
                    continue  # the task completed it itself, inside ctx.transaction()
                if job_id in self._held and job_id not in self._submitted:
                    log.error(
                        "job %s lost its lease (rescued by another worker); stopping it", job_id
                    )
                    ctx.request_cancel("lost")
                    self.untrack(job_id)
            elif renewal.cancel_requested:
                ctx.request_cancel("cancelled")

    def _drop_unwritten(self) -> None:
        """Stop renewing jobs whose outcome has waited a whole lease for the completer:
        the lease then runs out and the rescuer runs the job again (at least once)."""
        if not self._submitted:
            return
        oldest = self.clock() - self.lease
        for job_id in [j for j, at in self._submitted.items() if at < oldest]:
            log.error(
                "job %s: its outcome has not been written for %.0fs; no longer renewing "
                "its lease, so it will run again",
                job_id,
                self.lease,
            )
            self.untrack(job_id)

    def fence_all(self, why: str) -> list[int]:
        """Stop every running job now, whatever its lease clock says: for when the
        database may hand them to another worker at once (its presence session ended)."""
        self.leases.expire(list(self._held))
        return self.fence(why)

    def fence(self, why: str) -> list[int]:
        """Stop every running job whose lease this worker could not confirm in time: it
        may run out in the database before the next answer, and another worker may then
        run the job. Jobs whose outcome waits for the completer are left alone (their
        task is done; the fencing token decides whether the outcome is written)."""
        expired = [j for j in self.leases.expired() if j in self._held]
        if not expired:
            return []
        stopped = []
        for job_id in expired:
            if job_id in self._submitted:
                self.leases.forget(job_id)
                continue
            _, ctx = self._held[job_id]
            if not ctx.completed_in_transaction:
                ctx.request_cancel("lost")
                stopped.append(job_id)
            self.untrack(job_id)
        if stopped:
            self.lease_lost += len(stopped)
            self.last_lease_lost = self.clock()
            log.error(
                "LeaseLost: job(s) %s not confirmed for %.1fs (lease %gs): stopping them "
                "before the database can hand them to another worker (%s)",
                ", ".join(map(str, stopped)),
                self.leases.fence_after,
                self.lease,
                why,
            )
        return stopped
