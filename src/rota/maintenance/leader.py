"""Leader election on a lease row: one worker at a time runs the maintenance services.
A dead leader's row expires after `ttl`, and the next worker to try takes over. A leader
holds its term only while it is renewed in time: the row set by an election sent at t
lasts at least until t + ttl in the database, so the local flag is cleared at
t + ttl - margin unless a later election came back, even while that election hangs
(two leaders never act at once, #21). Durations only, on the monotonic clock."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from rota.drivers.base import Driver
from rota.maintenance.service import DbCall, log_failure, wait_set

log = logging.getLogger("rota.leader")

LEADER_NAME = "maintenance"


class Elector:
    def __init__(
        self,
        driver: Driver,
        worker_id: str,
        ttl: float,
        *,
        margin: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.driver = driver
        self.worker_id = worker_id
        self.ttl = ttl
        # Room for the database's clock to run faster than ours and for a service pass
        # under way to notice: a tenth of the term.
        self.margin = margin if margin is not None else ttl / 10
        self.clock = clock
        self._leading = False
        self._term_ends = 0.0  # time.monotonic() at which leadership lapses unless renewed
        self.lapses = 0  # terms that ended here because no renewal came back in time

    @property
    def is_leader(self) -> bool:
        if self._leading and self.clock() >= self._term_ends:
            self._leading = False
            self.lapses += 1
            log.warning(
                "worker %s lost leadership: no election came back within %gs (ttl %gs); "
                "not leading until one does",
                self.worker_id,
                self.ttl - self.margin,
                self.ttl,
            )
        return self._leading

    @is_leader.setter
    def is_leader(self, value: bool) -> None:
        """Set by hand (tests): a term of one ttl from now."""
        self._leading = value
        self._term_ends = self.clock() + self.ttl - self.margin

    def attempt(self) -> bool:
        was = self.is_leader
        sent = self.clock()
        won = self.driver.leader_attempt_elect(LEADER_NAME, self.worker_id, self.ttl)
        ends = sent + self.ttl - self.margin
        if won and self.clock() < ends:
            self._leading = True
            self._term_ends = ends
        else:
            # Lost, or won so late that the term it gave may be over: not leading.
            self._leading = False
        if self._leading != was:
            log.info(
                "worker %s %s leadership", self.worker_id, "gained" if self._leading else "lost"
            )
        return self._leading

    def resign(self) -> None:
        if self._leading:
            self._leading = False
            log.info("worker %s lost leadership (resigned)", self.worker_id)
            self.driver.leader_resign(LEADER_NAME, self.worker_id)

    async def run(self, db: DbCall, stop: asyncio.Event) -> None:
        while not stop.is_set():
            election = asyncio.ensure_future(db(self.attempt))
            # While the election waits for an answer, the term may lapse: look at it
            # when it would, so that the flag is cleared (and said) on time.
            while not election.done() and self.is_leader:
                left = max(0.0, self._term_ends - self.clock())
                await asyncio.wait({election}, timeout=left + 0.01)
            try:
                await election
            except Exception as exc:
                # Without the database we cannot prove leadership, so stop acting as leader.
                # The next try keeps the pace: a leader that backed off would lose its term.
                if self._leading:
                    self._leading = False
                    log.info("worker %s lost leadership", self.worker_id)
                log_failure(log, "leader election", exc, "not leading until it succeeds")
            # Renew well inside the ttl; followers poll at the same pace.
            await wait_set(stop, self.ttl / 3)
