"""Stager: scheduled and retryable jobs whose time has come become available.

Where the worker hears of every commit (SQLite), a pass that staged nothing rests until the
next job falls due (or until a commit: a new or retried job), at most `rest` seconds;
elsewhere it keeps its interval."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rota.maintenance.service import PeriodicService


@dataclass(frozen=True)
class StageReport:
    staged: int


class Stager(PeriodicService):
    name: ClassVar[str] = "stager"
    looks_first = True  # its only writes are jobs falling due
    batch = 5000

    def run_once(self) -> StageReport:
        return StageReport(staged=self.driver.job_stage_due(self.batch))

    def idle(self, report: object) -> bool:
        return isinstance(report, StageReport) and not report.staged

    def due(self) -> float | None:
        return self.driver.job_next_due()
