"""Stager: scheduled and retryable jobs whose time has come become available.

Where the worker hears of every commit (SQLite), a pass that staged nothing asks when the
next job falls due and rests until then (or until a commit: a new or retried job), at most
`rest` seconds; elsewhere it keeps its interval."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rota.maintenance.service import PeriodicService


@dataclass(frozen=True)
class StageReport:
    staged: int
    # Seconds until the next job falls due, when asked (a resting stager that staged
    # nothing); None: not asked, or no job waits for its time.
    due_in: float | None = None


class Stager(PeriodicService):
    name: ClassVar[str] = "stager"
    batch = 5000

    def run_once(self) -> StageReport:
        staged = self.driver.job_stage_due(self.batch)
        if staged or not self.rests:
            return StageReport(staged=staged)
        return StageReport(staged=0, due_in=self.driver.job_next_due())

    def rest_for(self, report: object) -> float | None:
        if not isinstance(report, StageReport) or report.staged:
            return None
        return self.rest_until(report.due_in)
