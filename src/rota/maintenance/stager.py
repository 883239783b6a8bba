"""Stager: scheduled and retryable jobs whose time has come become available."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rota.maintenance.service import PeriodicService


@dataclass(frozen=True)
class StageReport:
    staged: int


class Stager(PeriodicService):
    name: ClassVar[str] = "stager"
    batch = 5000

    def run_once(self) -> StageReport:
        return StageReport(staged=self.driver.job_stage_due(self.batch))
