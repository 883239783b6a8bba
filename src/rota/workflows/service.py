"""Workflow controller: each pass records the step jobs that finished, starts the steps
that became ready, applies failure policies and finishes runs; now and then it prunes
finished runs past their retention. Leader-only, but safe if two leaders overlap: a
change applies only to the workflow version it was computed from."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rota.maintenance.service import PeriodicService
from rota.workflows.store import WorkflowStore

if TYPE_CHECKING:
    from rota.workflows.registry import WorkflowRegistry


@dataclass(frozen=True)
class WorkflowControllerReport:
    advanced: int = 0  # workflows changed
    jobs: int = 0  # step jobs inserted
    finished: int = 0  # workflows finished
    stale: int = 0  # changes refused because another writer moved the run first
    errors: int = 0
    pruned: int = 0  # finished runs deleted


class WorkflowController(PeriodicService):
    name: ClassVar[str] = "workflows"
    prune_batch = 1000

    def __init__(
        self,
        workflows: WorkflowRegistry,
        interval: float,
        *,
        completed_retention: float = 24 * 3600.0,
        failed_retention: float = 14 * 24 * 3600.0,
        prune_interval: float = 60.0,
        page: int = 200,
    ) -> None:
        super().__init__(workflows.driver, interval)
        self.workflows = workflows
        self.page = page  # running workflows read per query (a pass reads them all)
        # Finished runs are kept as long as jobs in the same end state (the pruner's
        # retention), so a run is never pruned before the jobs it points at.
        self.completed_retention = completed_retention
        self.failed_retention = failed_retention
        self.prune_interval = prune_interval
        self._pruned_at = float("-inf")

    def idle(self, report: object) -> bool:
        # Nothing moved: a run moves only when its step jobs or its own row change, each
        # a commit (the plan reads no clock). Errors and stale changes are tried again.
        return isinstance(report, WorkflowControllerReport) and not any(
            (report.advanced, report.jobs, report.finished, report.stale, report.errors)
        )

    def run_once(self) -> WorkflowControllerReport:
        report = self.workflows.advance(page=self.page)
        pruned = 0
        if time.monotonic() - self._pruned_at >= self.prune_interval:
            pruned = WorkflowStore(self.driver).prune(
                self.completed_retention, self.failed_retention, self.prune_batch
            )
            self._pruned_at = time.monotonic()
        return WorkflowControllerReport(
            advanced=report.advanced,
            jobs=report.jobs,
            finished=report.finished,
            stale=report.stale,
            errors=report.errors,
            pruned=pruned,
        )
