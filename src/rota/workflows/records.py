"""What the workflow store reads and writes: frozen rows and the one change set (`Advance`)
that every action (start, a controller pass, cancel, retry-step) is turned into."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rota.drivers.base import JobInsert


@dataclass(frozen=True)
class WorkflowRow:
    id: int
    name: str
    key: str | None
    state: str
    on_failure: str
    spec: dict[str, Any]
    args: dict[str, Any]
    version: int
    created_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    created: bool = True  # False when start() found a run with the same key


@dataclass(frozen=True)
class StepRow:
    step: str
    state: str
    total: int | None = None  # how many jobs it runs, once started
    result: Any = None  # the result (a list for fan-out steps), once completed
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class ElementRow:
    """One job of a step. `state` is what the controller recorded ("pending" until it saw
    the job finish); `job_*` is the job's row now (None once the job is pruned)."""

    step: str
    index: int
    job_id: int | None
    state: str
    result: Any = None
    error: str | None = None
    job_state: str | None = None
    job_result: Any = None
    job_error: str | None = None
    attempt: int = 0

    @property
    def current(self) -> str:
        """The state to show: the recorded outcome, or the live job's state."""
        if self.state != "pending" or self.job_state is None:
            return self.state
        return self.job_state


@dataclass(frozen=True)
class WorkflowSnapshot:
    workflow: WorkflowRow
    steps: dict[str, StepRow]
    elements: tuple[ElementRow, ...] = ()


@dataclass(frozen=True)
class WorkflowNew:
    name: str
    key: str | None
    on_failure: str
    spec_json: str
    args_json: str
    steps: tuple[str, ...]  # in topological order


@dataclass(frozen=True)
class WorkflowFilter:
    states: tuple[str, ...] = ()
    name: str | None = None
    limit: int = 50
    before_id: int | None = None


@dataclass(frozen=True)
class StepUpdate:
    step: str
    state: str
    total: int | None = None
    result_json: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ElementUpdate:
    step: str
    index: int
    state: str
    result_json: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ElementInsert:
    step: str
    index: int
    job: JobInsert


@dataclass(frozen=True)
class JobRetry:
    job_id: int
    budget: int  # attempts the job gets from now on (the step's max_attempts)


@dataclass(frozen=True)
class Advance:
    """One change of one workflow, applied in one transaction if the workflow's version is
    still `version` (optimistic locking: two controllers that read the same version cannot
    both apply, so a step's jobs are inserted exactly once)."""

    workflow_id: int
    version: int
    state: str | None = None  # the workflow's new state, if it changes
    error: str | None = None
    steps: tuple[StepUpdate, ...] = ()
    elements: tuple[ElementUpdate, ...] = ()
    inserts: tuple[ElementInsert, ...] = ()
    cancel_jobs: tuple[int, ...] = ()
    retry_jobs: tuple[JobRetry, ...] = ()
    notes: tuple[str, ...] = field(default=(), compare=False)  # what happened, for logs

    @property
    def empty(self) -> bool:
        return not (
            self.state
            or self.steps
            or self.elements
            or self.inserts
            or self.cancel_jobs
            or self.retry_jobs
        )


@dataclass(frozen=True)
class ScheduleTick:
    """The cron run that enqueued a job (for the tick's idempotency key)."""

    schedule: str
    run: str
    kind: str  # "scheduled" or "manual"
    scheduled_local: str
