"""Pruner: deletes finished jobs past their retention, per state (completed, cancelled,
discarded), finished sagas and old events, in small batches so no table is locked long."""

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
    sagas: int = 0
    events: int = 0


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
        saga_age: float = math.inf,
        event_age: float = math.inf,
        batch: int = 1000,
    ) -> None:
        super().__init__(driver, interval)
        self.completed_age = completed_age
        self.discarded_age = discarded_age
        self.cancelled_age = completed_age if cancelled_age is None else cancelled_age
        self.inbox_age = inbox_age
        self.saga_age = saga_age
        self.event_age = event_age
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
                deleted = self.driver.ops.job_prune(state, age, self.batch)
                counts[state] += deleted
                if deleted < self.batch:
                    break
        inbox_deleted = self.driver.inbox_prune(self.inbox_age, self.batch)
        sagas = self._drain(self.driver.sagas.prune, self.saga_age)
        events = self._drain(self.driver.events.prune, self.event_age)
        return PruneReport(
            deleted=sum(counts.values()),
            inbox_deleted=inbox_deleted,
            completed=counts["completed"],
            cancelled=counts["cancelled"],
            discarded=counts["discarded"],
            sagas=sagas,
            events=events,
        )

    def _drain(self, prune: Callable[[float, int], int], age: float) -> int:
        """Batches of `prune` until one comes back short (or max_batches ran)."""
        if math.isinf(age):
            return 0
        total = 0
        for _ in range(self.max_batches):
            deleted = prune(age, self.batch)
            total += deleted
            if deleted < self.batch:
                break
        return total
