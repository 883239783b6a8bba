"""Pruner: deletes finished jobs past their retention, per state (completed, cancelled,
discarded), and old inbox records, in small batches so no table is locked long.
RetentionService is the same loop for a feature's own finished records."""

from __future__ import annotations

import math
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


class Pruner(PeriodicService):
    name: ClassVar[str] = "pruner"
    # Batches per state and run: a backlog is worked off over several runs, and each batch
    # is its own short transaction, so claims and completions never wait long on a prune.
    max_batches = 20

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
    ) -> None:
        super().__init__(driver, interval)
        self.completed_age = completed_age
        self.discarded_age = discarded_age
        self.cancelled_age = completed_age if cancelled_age is None else cancelled_age
        self.inbox_age = inbox_age
        self.batch = batch

    def run_once(self) -> PruneReport:
        counts: dict[str, int] = {}
        ages = {
            "completed": self.completed_age,
            "cancelled": self.cancelled_age,
            "discarded": self.discarded_age,
        }
        for state, age in ages.items():
            counts[state] = 0
            if math.isinf(age):
                continue  # kept for good
            for _ in range(self.max_batches):
                deleted = self.driver.job_prune(state, age, self.batch)
                counts[state] += deleted
                if deleted < self.batch:
                    break
        inbox_deleted = self.driver.inbox_prune(self.inbox_age, self.batch)
        return PruneReport(
            deleted=sum(counts.values()),
            inbox_deleted=inbox_deleted,
            completed=counts["completed"],
            cancelled=counts["cancelled"],
            discarded=counts["discarded"],
        )


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
