"""Pruner: deletes finished jobs past their retention so the hot table stays small."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rota.drivers.base import Driver
from rota.maintenance.service import PeriodicService


@dataclass(frozen=True)
class PruneReport:
    deleted: int


class Pruner(PeriodicService):
    name: ClassVar[str] = "pruner"
    batch = 5000

    def __init__(
        self, driver: Driver, interval: float, *, completed_age: float, discarded_age: float
    ) -> None:
        super().__init__(driver, interval)
        self.completed_age = completed_age
        self.discarded_age = discarded_age

    def run_once(self) -> PruneReport:
        deleted = self.driver.job_prune_finished(self.completed_age, self.discarded_age, self.batch)
        return PruneReport(deleted=deleted)
