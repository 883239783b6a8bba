"""Saga supervisor (leader only): moves on the sagas whose current job ended without
moving them, which is how a step or compensation that failed for good is noticed,
whatever ended it: its last error, a timeout, a worker killed on the last attempt (the
rescuer dead-letters it), an operator's cancel, or a step past its deadline."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import ClassVar

from rota.errors import RotaError
from rota.job import Job, JobState
from rota.maintenance.service import PeriodicService
from rota.sagas import engine, machine
from rota.sagas.store import SagaRecord, SagaStatus, SagaStore, StalledSaga


@dataclass(frozen=True)
class SagaReport:
    steps_failed: int = 0
    compensations_failed: int = 0
    overdue: int = 0
    # Whether any saga was stalled this pass (with none, only a commit, a job ending, or
    # a step deadline brings work).
    stalled: bool = False


def failure_reason(stalled: StalledSaga, job: Job | None) -> str:
    """Why the saga's current job counts as failed, for its history and error."""
    if stalled.overdue:
        return "the step passed its deadline"
    if job is None:
        return f"its job {stalled.job_id} is gone"
    if job.state is JobState.CANCELLED:
        return f"its job {job.id} was cancelled"
    if job.state is JobState.COMPLETED:
        return f"its job {job.id} completed without moving the saga on"
    last = job.history[-1] if job.history else None
    if last is None:
        return f"its job {job.id} was dead-lettered"
    text = f"{last.error_type}: {last.message}" if last.error_type else (last.message or "")
    return f"{text} (attempt {last.attempt} of {job.max_attempts}, {last.outcome})"


class SagaSupervisor(PeriodicService):
    name: ClassVar[str] = "sagas"
    batch = 100

    def run_once(self) -> SagaReport:
        failed = undone = overdue = 0
        found = SagaStore(self.driver).stalled(self.batch)
        for stalled in found:
            job = None if stalled.job_id is None else self.driver.job_get(stalled.job_id)
            reason = failure_reason(stalled, job)

            def decide(saga: SagaRecord, reason: str = reason) -> machine.Decision | None:
                if saga.status is SagaStatus.RUNNING:
                    return machine.step_failed(saga, reason)
                if saga.status is SagaStatus.COMPENSATING:
                    return machine.compensation_failed(saga, reason)
                return None

            with self.driver.transaction() as conn:
                # The version check makes this lose cleanly to a step committing now; a
                # row held by a step running in its transaction is passed over this pass.
                moved = engine.apply(
                    self.driver,
                    conn,
                    stalled.saga_id,
                    stalled.version,
                    decide,
                    by_job=stalled.job_id,
                    wait=False,
                )
            if moved is None:
                continue
            if moved.status is SagaStatus.FAILED:
                undone += 1
            else:
                failed += 1
            if stalled.overdue and job is not None and not job.state.finished:
                overdue += 1
                # The saga no longer waits for it (its version moved on); stop the work.
                with contextlib.suppress(RotaError):
                    self.driver.job_cancel(job.id)
        return SagaReport(failed, undone, overdue, stalled=bool(found))

    def idle(self, report: object) -> bool:
        return isinstance(report, SagaReport) and not report.stalled

    def due(self) -> float | None:
        return SagaStore(self.driver).next_deadline()
