"""Heartbeater: renews the lease of every job this worker holds, in one statement per
beat. A job missing from the answer lost its lease (it was rescued): it is told to
stop, and its eventual completion will be refused by the fencing token anyway."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from rota.context import Context
from rota.drivers.base import Driver
from rota.maintenance.service import DbCall

log = logging.getLogger("rota.worker")


class Heartbeater:
    def __init__(self, driver: Driver, db: DbCall, *, lease: float, interval: float) -> None:
        self.driver = driver
        self.db = db
        self.lease = lease
        self.interval = interval
        self._held: dict[int, tuple[str, Context]] = {}
        # Jobs whose outcome is handed to the completer: still renewed until written,
        # but a missing renewal is expected (our own completion may have landed).
        self._submitted: set[int] = set()
        self._event = asyncio.Event()
        self.beats = 0
        # For the health endpoint (time.monotonic() values): the last beat that succeeded
        # (leases renewed, or none held), the last beat that ended either way (a stuck
        # heartbeater stops moving it), and how many beats in a row have failed.
        self.last_beat: float | None = None
        self.last_attempt: float | None = None
        self.failures = 0

    def track(self, job_id: int, token: str, ctx: Context) -> None:
        self._held[job_id] = (token, ctx)

    def submitted(self, job_id: int) -> None:
        self._submitted.add(job_id)

    def untrack(self, job_id: int) -> None:
        self._held.pop(job_id, None)
        self._submitted.discard(job_id)

    def nudge(self) -> None:
        self._event.set()

    @property
    def held(self) -> int:
        return len(self._held)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout=self.interval)
            self._event.clear()
            try:
                await self.beat()
            except Exception as exc:
                self.failures += 1
                log.warning(
                    "heartbeat failed (%s: %s); leases expire in %.0fs unless renewed",
                    type(exc).__name__,
                    exc,
                    self.lease,
                )
            else:
                self.failures = 0
                self.last_beat = time.monotonic()
            self.last_attempt = time.monotonic()

    async def beat(self) -> None:
        snapshot = dict(self._held)
        if not snapshot:
            return
        leases = [(job_id, token) for job_id, (token, _) in snapshot.items()]
        renewed = await self.db(self.driver.job_lease_renew, leases, self.lease)
        self.beats += 1
        alive = {r.job_id: r for r in renewed}
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
