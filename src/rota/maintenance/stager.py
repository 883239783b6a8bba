"""Stager: scheduled and retryable jobs whose time has come become available.

Where the worker hears of every commit (SQLite), a pass that staged nothing asks when the
next job falls due and rests until then (or until a commit: a new or retried job), at most
`rest` seconds; elsewhere it keeps its interval."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rota.maintenance.service import PeriodicService

# A rest until a job falls due ends this much after it: a pass a hair early (the loop's
# clock against the database's) would stage nothing and wait a whole interval more.
DUE_SLACK = 0.005


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
        if report.due_in is None:
            return self.rest  # nothing waits for its time: only a commit brings work
        return min(self.rest, max(report.due_in, 0.0) + DUE_SLACK)
