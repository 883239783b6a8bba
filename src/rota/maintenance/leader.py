"""Leader election on a lease row: one worker at a time runs the maintenance services.
A dead leader's row expires after `ttl`, and the next worker to try takes over."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rota.drivers.base import Driver
from rota.maintenance.service import DbCall, log_failure

log = logging.getLogger("rota.leader")

LEADER_NAME = "maintenance"


class Elector:
    def __init__(self, driver: Driver, worker_id: str, ttl: float) -> None:
        self.driver = driver
        self.worker_id = worker_id
        self.ttl = ttl
        self.is_leader = False

    def attempt(self) -> bool:
        was = self.is_leader
        self.is_leader = self.driver.leader_attempt_elect(LEADER_NAME, self.worker_id, self.ttl)
        if self.is_leader != was:
            log.info(
                "worker %s %s leadership", self.worker_id, "gained" if self.is_leader else "lost"
            )
        return self.is_leader

    def resign(self) -> None:
        if self.is_leader:
            self.driver.leader_resign(LEADER_NAME, self.worker_id)
            self.is_leader = False

    async def run(self, db: DbCall, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await db(self.attempt)
            except Exception as exc:
                # Without the database we cannot prove leadership, so stop acting as leader.
                # The next try keeps the pace: a leader that backed off would lose its term.
                self.is_leader = False
                log_failure(log, "leader election", exc, "not leading until it succeeds")
            # Renew well inside the ttl; followers poll at the same pace.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.ttl / 3)
