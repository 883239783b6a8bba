"""PeriodicService: the base owns the loop (interval, jitter, leader gate, error
backoff); each service only writes `run_once() -> Report`, which tests call directly."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from rota.drivers.base import Driver

log = logging.getLogger("rota.maintenance")

# Runs a blocking driver call off the event loop.
DbCall = Callable[..., Awaitable[Any]]


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
            try:
                await asyncio.wait_for(stop.wait(), timeout=delay)
                return
            except TimeoutError:
                pass
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
                delay = min(self.interval * 2**failures, 30.0)
                log.warning(
                    "%s failed (%s: %s); retrying in %.1fs",
                    self.name,
                    type(exc).__name__,
                    exc,
                    delay,
                )


def _nonzero(report: object) -> bool:
    values = getattr(report, "__dict__", {}).values()
    return any(isinstance(v, int) and v for v in values) or (isinstance(report, int) and report > 0)
