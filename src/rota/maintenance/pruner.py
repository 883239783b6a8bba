"""Pruner: deletes finished jobs past their retention, per state (completed, cancelled,
discarded), and old inbox records, in small batches so no table is locked long.
RetentionService is the same loop for a feature's own finished records."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rota.drivers.base import Driver
from rota.maintenance.service import PeriodicService


@dataclass(frozen=True)
class PruneReport:
    deleted: int
    inbox_deleted: int = 0
    completed: int = 0
    cancelled: int = 0
    discarded: int = 0
    # A state still had rows past its retention when the pass's time was up: the next
    # pass comes at once instead of after the interval.
    backlog: bool = False


FINISHED = ("completed", "cancelled", "discarded")


class BatchSizer:
    """Deletes as many rows per statement as fit in TARGET seconds: a batch that was quick
    doubles, a slow one halves, between `least` and MAX_BATCH. Each batch is its own short
    transaction, so claims and completions never wait long behind a prune, at any rate."""

    TARGET = 0.1
    MAX_BATCH = 50_000

    def __init__(self, start: int, least: int = 100) -> None:
        self.size = start
        self.least = min(least, start)

    def took(self, seconds: float, full: bool) -> None:
        if full and seconds < self.TARGET / 2:
            self.size = min(self.size * 2, self.MAX_BATCH)
        elif seconds > self.TARGET * 2:
            self.size = max(self.size // 2, self.least)


class Pruner(PeriodicService):
    """Finished jobs past their retention are deleted oldest first, in batches sized to
    take about BatchSizer.TARGET each, for up to `budget` seconds a pass; while a backlog
    remains, passes follow each other without waiting for the interval. So retention
    keeps the table flat whatever the rate of finished jobs (docs/operations.md)."""

    name: ClassVar[str] = "pruner"
    budget = 1.0  # seconds of deleting per pass, then the other services get their turn
    backlog_delay = 0.05  # seconds between passes while a backlog remains

    def __init__(
        self,
        driver: Driver,
        interval: float,
        *,
        completed_age: float,
        discarded_age: float,
        inbox_age: float = 7 * 24 * 3600.0,
        cancelled_age: float | None = None,
        batch: int = 1000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(driver, interval)
        self.completed_age = completed_age
        self.discarded_age = discarded_age
        self.cancelled_age = completed_age if cancelled_age is None else cancelled_age
        self.inbox_age = inbox_age
        self.clock = clock
        self.sizers = {
            state: BatchSizer(batch) for state in ("completed", "cancelled", "discarded")
        }
        self.inbox_batch = batch

    def run_once(self) -> PruneReport:
        counts: dict[str, int] = {}
        ages = {
            "completed": self.completed_age,
            "cancelled": self.cancelled_age,
            "discarded": self.discarded_age,
        }
        deadline = self.clock() + self.budget
        backlog = False
        for state, age in ages.items():
            counts[state] = 0
            if math.isinf(age):
                continue  # kept for good
            sizer = self.sizers[state]
            while True:
                if self.clock() >= deadline:
                    backlog = True  # not known to be done: look again soon
                    break
                size = sizer.size
                started = self.clock()
                deleted = self.driver.job_prune(state, age, size)
                sizer.took(self.clock() - started, deleted >= size)
                counts[state] += deleted
                if deleted < size:
                    break
        inbox_deleted = self.driver.inbox_prune(self.inbox_age, self.inbox_batch)
        return PruneReport(
            deleted=sum(counts.values()),
            inbox_deleted=inbox_deleted,
            completed=counts["completed"],
            cancelled=counts["cancelled"],
            discarded=counts["discarded"],
            backlog=backlog,
        )

    def next_delay(self, report: object) -> float:
        if isinstance(report, PruneReport) and report.backlog:
            return self.backlog_delay
        return self.interval


@dataclass(frozen=True)
class RetentionReport:
    deleted: int


class RetentionService(PeriodicService):
    """A feature's retention: `prune(age, limit)` deletes up to `limit` of its records
    finished over `age` seconds ago; it runs in batches until one comes back short (or
    max_batches ran). math.inf keeps them. Subclasses set `name`."""

    max_batches = 20

    def __init__(
        self,
        driver: Driver,
        interval: float,
        *,
        prune: Callable[[float, int], int],
        age: float,
        batch: int = 1000,
    ) -> None:
        super().__init__(driver, interval)
        self.prune = prune
        self.age = age
        self.batch = batch

    def run_once(self) -> RetentionReport:
        if math.isinf(self.age):
            return RetentionReport(0)  # kept for good
        total = 0
        for _ in range(self.max_batches):
            deleted = self.prune(self.age, self.batch)
            total += deleted
            if deleted < self.batch:
                break
        return RetentionReport(total)
