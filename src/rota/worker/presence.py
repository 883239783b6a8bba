"""PresenceKeeper: registers the worker as present before its first claim and keeps it
so (rota.drivers.presence). While the presence lock is lost (its session was cut) the
worker claims nothing, since peers may rescue what it holds; it registers again at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from rota.drivers.base import Driver
from rota.drivers.presence import PresenceHold, PresenceTakenError
from rota.maintenance.service import DbCall, backoff_delay, log_failure, wait_set

log = logging.getLogger("rota.presence")

# Seconds between checks of the presence lock: a local syscall, no round trip.
CHECK_INTERVAL = 0.25
# Seconds before the peers' grace ends by which a worker that lost its lock has stopped
# its jobs (a sweep's clock and ours are not compared: this covers the lag between them).
FENCE_MARGIN = 0.25
# After a failed registration: from 0.1 s, doubling up to 2 s: a worker must be back
# soon after the database is (rota.drivers.postgres.presence waits 10 s after a start).
RETRY_BASE = 0.1
RETRY_MAX = 2.0


class PresenceKeeper:
    def __init__(
        self,
        driver: Driver,
        db: DbCall,
        worker_id: str,
        *,
        on_present: Callable[[], None],
        on_gone: Callable[[], None] = lambda: None,
        interval: float = CHECK_INTERVAL,
        enabled: bool = True,
        server_options: str = "",
        grace: float | None = None,
    ) -> None:
        self.driver = driver
        self.db = db
        self.worker_id = worker_id
        self.on_present = on_present  # called when the worker may claim (again)
        # Called once when the lock has been gone so long that peers may take this
        # worker's jobs any moment (their grace, less the time to notice the loss and a
        # margin): the worker stops its jobs first, so none runs twice at once.
        self.on_gone = on_gone
        grace = driver.presence.grace if grace is None else grace  # the peers' sweeps'
        self.fence_after = max(0.0, grace - interval - FENCE_MARGIN)
        self._fence: asyncio.TimerHandle | None = None  # armed while a loss lasts
        self.interval = interval
        self._hold: PresenceHold | None = None
        self.enabled = enabled  # False: never registers, never holds claims back
        self.server_options = server_options  # the presence session's, on the server
        self._present = asyncio.Event()
        self.registrations = 0
        self.losses = 0  # times the lock was found gone while the worker lived
        self.failures = 0  # registrations in a row that failed

    @property
    def present(self) -> bool:
        """Registered and holding the lock: the fetchers may claim."""
        return self._hold is not None or not self.enabled

    async def wait(self, stop: asyncio.Event) -> None:
        """Until present (or `stop`): the worker starts claiming only then."""
        if self.present:
            return
        waits = [asyncio.create_task(self._present.wait()), asyncio.create_task(stop.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()

    async def run(self, stop: asyncio.Event) -> None:
        if not self.enabled:
            return
        while not stop.is_set():
            if self._hold is None:
                delay = await self._register()
            else:
                delay = self.interval
                hold = self._hold
                try:
                    alive = await self.db(hold.alive)
                except Exception as exc:  # a bug of ours: treat the lock as lost
                    log_failure(log, "checking presence", exc, "registering again")
                    alive = False
                if not alive:
                    self._lost()
                    delay = 0.0
            await wait_set(stop, delay)

    async def _register(self) -> float:
        try:
            hold = await self.db(self.driver.presence.hold, self.worker_id, self.server_options)
        except Exception as exc:
            self.failures += 1
            delay = backoff_delay(self.failures, RETRY_BASE, RETRY_MAX)
            # A sweep may hold an SQLite lock file for a moment: say so only if it lasts.
            if not isinstance(exc, PresenceTakenError) or self.failures >= 5:
                log_failure(
                    log, "registering presence", exc, f"not claiming; retrying in {delay:.1f}s"
                )
            return delay
        first = self.registrations == 0
        self.registrations += 1
        self.failures = 0
        if first:
            # Before the gate opens: what runs under this id now is not ours to keep.
            try:
                await self._rescue_predecessor()
            except BaseException:  # cancelled (a stop): let go of the lock again
                await asyncio.shield(self.db(hold.close))
                raise
        self._hold = hold  # present: the fetchers may claim from here on
        self._present.set()
        if self._fence is not None:  # back in time: its jobs carry on
            self._fence.cancel()
            self._fence = None
        if not first:
            log.info("presence of worker %s registered again; claiming again", self.worker_id)
        self.on_present()
        return self.interval

    async def _rescue_predecessor(self) -> None:
        """Jobs running under this id belong to an earlier process with the same
        --worker-id that died (this one has claimed nothing yet): rescue them now."""
        try:
            report = await self.db(self.driver.presence.rescue, [self.worker_id])
        except Exception as exc:  # their leases still run out
            log_failure(log, "rescuing the jobs of an earlier worker", exc, "moving on")
            return
        if report.rescued or report.discarded or report.cancelled:
            log.warning("rescued the jobs of an earlier worker %s: %s", self.worker_id, report)

    def _gone(self) -> None:
        """The loss has lasted fence_after (a timer, not the registration loop, which
        may be stuck connecting): stop the jobs before the peers may take them."""
        self._fence = None
        if self._hold is not None:
            return
        log.error(
            "worker %s is not present again after %.1fs: stopping its jobs, which other "
            "workers may take now",
            self.worker_id,
            self.fence_after,
        )
        self.on_gone()

    def _lost(self) -> None:
        self.losses += 1
        if self._fence is None:
            self._fence = asyncio.get_running_loop().call_later(self.fence_after, self._gone)
        log.warning(
            "worker %s lost its presence session (the database ended it); not claiming "
            "until it is registered again",
            self.worker_id,
        )
        hold, self._hold = self._hold, None
        self._present.clear()
        if hold is not None:
            with contextlib.suppress(Exception):
                hold.close()

    async def close(self, timeout: float, leave: bool) -> None:
        """At the end of a stop: remove the row when nothing of ours is left running (the
        worker drained), then let go of the lock; what is left is rescued by a peer."""
        if self._fence is not None:
            self._fence.cancel()
            self._fence = None
        hold, self._hold = self._hold, None
        self._present.clear()
        if hold is None:
            return
        try:
            if leave:
                await asyncio.wait_for(
                    self.db(self.driver.presence.leave, self.worker_id), timeout=timeout
                )
        except Exception as exc:
            log.warning("leaving presence failed at shutdown (%s: %s)", type(exc).__name__, exc)
        finally:
            await self.db(hold.close)
