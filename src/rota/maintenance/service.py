"""PeriodicService: the base owns the loop (interval, jitter, leader gate, error
backoff); each service only writes `run_once() -> Report`, which tests call directly.
Also what every loop of a worker does when a pass fails: back off, and say why."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from rota.drivers.base import Driver
from rota.errors import RotaError, describe

log = logging.getLogger("rota.maintenance")

# Runs a blocking driver call off the event loop.
DbCall = Callable[..., Awaitable[Any]]


def backoff_delay(failures: int, base: float, cap: float) -> float:
    """Seconds to wait after `failures` failures in a row: doubling from `base` up to
    `cap`, drawn from the upper half of that (jitter, so that workers that failed
    together do not retry in step, while each wait is still longer than the last)."""
    top = min(cap, base * 2 ** min(max(failures, 1) - 1, 60))
    return random.uniform(top / 2, top)


def expected_failure(exc: BaseException) -> bool:
    """A failure of the surroundings, not a bug: rota's own errors (the database is away,
    the schema or a privilege is missing), the network, and a driver's OperationalError
    (a lost connection; SQLite's busy database)."""
    return isinstance(exc, RotaError | OSError | TimeoutError) or any(
        cls.__name__ == "OperationalError" for cls in type(exc).__mro__
    )


def log_failure(logger: logging.Logger, what: str, exc: BaseException, then: str) -> None:
    """One line for an expected failure; with the traceback for anything else, which is a
    bug worth reporting (`what failed (Type: message); then`)."""
    logger.warning(
        "%s failed (%s: %s); %s",
        what,
        type(exc).__name__,
        describe(exc),
        then,
        exc_info=None if expected_failure(exc) else exc,
    )


class PeriodicService:
    name: ClassVar[str] = "service"
    leader_only: ClassVar[bool] = True  # False: every worker runs it, leader or not
    immediate: ClassVar[bool] = False  # run at once on start instead of after a random delay

    def __init__(self, driver: Driver, interval: float) -> None:
        if interval <= 0:
            raise ValueError(f"{self.name} interval must be > 0")
        self.driver = driver
        self.interval = interval
        self.runs = 0

    def run_once(self) -> object:
        raise NotImplementedError

    def close(self) -> None:
        """Called once (blocking, off the loop) when the worker stops: undo what only a
        running worker should hold. Most services hold nothing."""

    def next_delay(self, report: object) -> float:
        """Seconds until the next pass after one that returned `report`: the interval,
        unless a service knows more work is coming (the batch controller after progress)."""
        return self.interval

    async def run(self, db: DbCall, is_leader: Callable[[], bool], stop: asyncio.Event) -> None:
        # A random first delay keeps many workers started together from beating in step.
        delay = 0.0 if self.immediate else random.uniform(0, self.interval)
        failures = 0
        while not stop.is_set():
            if await wait_set(stop, delay):
                return
            delay = self.interval
            if self.leader_only and not is_leader():
                continue
            try:
                report = await db(self.run_once)
                self.runs += 1
                failures = 0
                delay = self.next_delay(report)
                if _nonzero(report):
                    log.info("%s: %s", self.name, report)
            except Exception as exc:
                failures += 1
                delay = backoff_delay(failures, 2 * self.interval, 30.0)
                log_failure(log, self.name, exc, f"retrying in {delay:.1f}s")


async def wait_set(event: asyncio.Event, seconds: float) -> bool:
    """Wait until `event` is set or `seconds` have passed; True if it is set. Unlike
    `asyncio.wait_for(event.wait(), seconds)` it starts no task per wait (an idle worker
    waits this way dozens of times a second: its guard, services, presence, heartbeat)."""
    if event.is_set():
        return True
    if seconds <= 0:
        return False
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


def _nonzero(report: object) -> bool:
    values = getattr(report, "__dict__", {}).values()
    return any(isinstance(v, int) and v for v in values) or (isinstance(report, int) and report > 0)
