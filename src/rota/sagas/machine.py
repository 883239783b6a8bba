"""The saga state machine as pure functions: from a saga's stored state and what just
happened, the next status, step, data, history entry and the job to queue (if any)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from rota.sagas.store import SagaRecord, SagaStatus


class Phase(enum.StrEnum):
    FORWARD = "forward"
    COMPENSATE = "compensate"


class Happened(enum.StrEnum):
    STEP_COMPLETED = "step_completed"
    STEP_FAILED = "step_failed"
    ABORTED = "aborted"
    COMPENSATION_COMPLETED = "compensation_completed"
    COMPENSATION_FAILED = "compensation_failed"
    RETRIED = "retried"


@dataclass(frozen=True)
class NextJob:
    """The job that performs the saga's next move."""

    step: str
    phase: Phase
    task: str
    queue: str
    priority: int
    max_attempts: int
    deadline: float | None


@dataclass(frozen=True)
class Decision:
    status: SagaStatus
    step: str | None
    data: dict[str, Any]
    error: str | None
    entry: dict[str, Any]
    job: NextJob | None


def _index(plan: list[dict[str, Any]], step: str | None) -> int:
    for i, entry in enumerate(plan):
        if entry["name"] == step:
            return i
    raise ValueError(f"step {step!r} is not in the saga's plan")


def forward_job(plan: list[dict[str, Any]], index: int) -> NextJob:
    entry = plan[index]
    return NextJob(
        step=entry["name"],
        phase=Phase.FORWARD,
        task=entry["task"],
        queue=entry["queue"],
        priority=entry["priority"],
        max_attempts=entry["max_attempts"],
        deadline=entry.get("deadline"),
    )


def _compensation_job(plan: list[dict[str, Any]], index: int) -> NextJob:
    entry = plan[index]
    undo = entry["compensate"]
    return NextJob(
        step=entry["name"],
        phase=Phase.COMPENSATE,
        task=undo["task"],
        queue=undo["queue"],
        priority=undo["priority"],
        max_attempts=undo["max_attempts"],
        deadline=None,
    )


def merge(data: dict[str, Any], step: str, result: Any) -> dict[str, Any]:
    """A step's result joins the data: a dict is merged in, any other value other than
    None is kept under the step's name."""
    merged = dict(data)
    if isinstance(result, dict):
        merged.update(result)
    elif result is not None:
        merged[step] = result
    return merged


def _undo_from(saga: SagaRecord, below: int, entry: dict[str, Any], error: str | None) -> Decision:
    """Compensate the steps before index `below`, newest first (steps without a
    compensation are passed over); with none left, the saga is compensated."""
    for i in range(below - 1, -1, -1):
        if saga.plan[i].get("compensate"):
            job = _compensation_job(saga.plan, i)
            entry = {**entry, "status": str(SagaStatus.COMPENSATING), "next": job.step}
            return Decision(SagaStatus.COMPENSATING, job.step, saga.data, error, entry, job)
    entry = {**entry, "status": str(SagaStatus.COMPENSATED)}
    return Decision(SagaStatus.COMPENSATED, None, saga.data, error, entry, None)


def step_completed(saga: SagaRecord, result: Any) -> Decision:
    index = _index(saga.plan, saga.step)
    data = merge(saga.data, saga.plan[index]["name"], result)
    entry: dict[str, Any] = {"event": str(Happened.STEP_COMPLETED), "step": saga.step}
    if index + 1 < len(saga.plan):
        job = forward_job(saga.plan, index + 1)
        entry |= {"status": str(SagaStatus.RUNNING), "next": job.step}
        return Decision(SagaStatus.RUNNING, job.step, data, None, entry, job)
    entry["status"] = str(SagaStatus.COMPLETED)
    return Decision(SagaStatus.COMPLETED, None, data, None, entry, None)


def step_failed(saga: SagaRecord, error: str, *, aborted: bool = False) -> Decision:
    """The running step failed for good (or the saga was aborted): undo the steps
    that completed before it."""
    index = _index(saga.plan, saga.step)
    happened = Happened.ABORTED if aborted else Happened.STEP_FAILED
    entry = {"event": str(happened), "step": saga.step, "error": error}
    return _undo_from(saga, index, entry, error)


def compensation_completed(saga: SagaRecord) -> Decision:
    index = _index(saga.plan, saga.step)
    entry = {"event": str(Happened.COMPENSATION_COMPLETED), "step": saga.step}
    return _undo_from(saga, index, entry, saga.error)


def compensation_failed(saga: SagaRecord, error: str) -> Decision:
    """An undo kept failing: stop and leave it for a human (`rota sagas retry`)."""
    entry = {
        "event": str(Happened.COMPENSATION_FAILED),
        "step": saga.step,
        "error": error,
        "status": str(SagaStatus.FAILED),
    }
    message = f"compensation of {saga.step!r} failed: {error}"
    return Decision(SagaStatus.FAILED, saga.step, saga.data, message, entry, None)


def retried(saga: SagaRecord) -> Decision:
    """Run the current step (or, for a failed saga, its compensation) again."""
    index = _index(saga.plan, saga.step)
    if saga.status is SagaStatus.RUNNING:
        job = forward_job(saga.plan, index)
        status = SagaStatus.RUNNING
    else:
        job = _compensation_job(saga.plan, index)
        status = SagaStatus.COMPENSATING
    entry = {"event": str(Happened.RETRIED), "step": saga.step, "status": str(status)}
    error = saga.error if status is SagaStatus.COMPENSATING else None
    return Decision(status, saga.step, saga.data, error, entry, job)
