"""Pruner: deletes finished jobs past their retention so the hot table stays small."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rota.drivers.base import Driver
from rota.maintenance.service import PeriodicService


@dataclass(frozen=True)
class PruneReport:
    deleted: int
    inbox_deleted: int = 0


class Pruner(PeriodicService):
    name: ClassVar[str] = "pruner"
    batch = 5000

    def __init__(
        self,
        driver: Driver,
        interval: float,
        *,
        completed_age: float,
        discarded_age: float,
        inbox_age: float = 7 * 24 * 3600.0,
    ) -> None:
        super().__init__(driver, interval)
        self.completed_age = completed_age
        self.discarded_age = discarded_age
        self.inbox_age = inbox_age

    def run_once(self) -> PruneReport:
        deleted = self.driver.job_prune_finished(self.completed_age, self.discarded_age, self.batch)
        inbox_deleted = self.driver.inbox_prune(self.inbox_age, self.batch)
        return PruneReport(deleted=deleted, inbox_deleted=inbox_deleted)
