"""Advertiser: a worker with capabilities records them (and its queues) in rota_workers,
renewed every heartbeat interval and removed on a clean stop, so `app.routing.unroutable()`
can tell a job that waits for a busy worker from one that no live worker can run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from rota.drivers.base import Driver
from rota.maintenance.service import DbCall, log_failure

log = logging.getLogger("rota.worker")


class Advertiser:
    def __init__(
        self,
        driver: Driver,
        db: DbCall,
        *,
        worker_id: str,
        queues: Sequence[str],
        capabilities: Sequence[str],
        interval: float,
        ttl: float,
    ) -> None:
        self.driver = driver
        self.db = db
        self.worker_id = worker_id
        self.queues = tuple(queues)
        self.capabilities = tuple(sorted(capabilities))
        self.interval = interval
        # Three missed renewals before the row counts as gone: one slow beat must not
        # make the worker's jobs look unroutable.
        self.ttl = max(ttl, 3 * interval)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.db(
                    self.driver.routing.worker_advertise,
                    self.worker_id,
                    self.queues,
                    self.capabilities,
                    self.ttl,
                )
            except Exception as exc:  # retried at the interval: the row must not expire
                log_failure(log, "advertising capabilities", exc, "retrying at the interval")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)

    async def retire(self) -> None:
        try:
            await self.db(self.driver.routing.worker_retire, self.worker_id)
        except Exception as exc:  # the row expires on its own
            log.warning("retiring the worker's advertisement failed (%s)", exc)
