"""WorkflowRun: what `app.workflows.get()` returns, a workflow's state step by step with
each step's jobs, results and errors, and its JSON form for the CLI and HTTP API."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rota.errors import WorkflowError
from rota.workflows.records import WorkflowSnapshot
from rota.workflows.spec import FailurePolicy, StepState, WorkflowSpec, WorkflowState


@dataclass(frozen=True)
class StepJob:
    index: int
    job_id: int | None
    state: str  # the job's state now (or its recorded outcome once the job is pruned)
    attempt: int
    result: Any = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "job_id": self.job_id,
            "state": self.state,
            "attempt": self.attempt,
            "result": self.result,
            "error": self.error,
        }


@dataclass(frozen=True)
class StepStatus:
    name: str
    task: str
    state: StepState
    after: tuple[str, ...]
    total: int | None  # jobs it runs, once started
    jobs: tuple[StepJob, ...]
    result: Any = None
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for job in self.jobs:
            found[job.state] = found.get(job.state, 0) + 1
        return found

    def to_json(self, *, jobs: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "task": self.task,
            "state": str(self.state),
            "after": list(self.after),
            "total": self.total,
            "counts": self.counts,
            "result": self.result,
            "error": self.error,
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
        }
        if jobs:
            data["jobs"] = [j.to_json() for j in self.jobs]
        return data


@dataclass(frozen=True)
class WorkflowRun:
    """One run of a workflow, as stored."""

    id: int
    name: str
    key: str | None
    state: WorkflowState
    on_failure: FailurePolicy
    args: dict[str, Any]
    steps: tuple[StepStatus, ...]
    created_at: datetime
    finished_at: datetime | None = None
    error: str | None = None
    created: bool = True  # False when start() found an existing run with the same key

    def step(self, name: str) -> StepStatus:
        for step in self.steps:
            if step.name == name:
                return step
        known = ", ".join(s.name for s in self.steps)
        raise WorkflowError(f"workflow {self.id} has no step {name!r} (steps: {known})")

    @property
    def results(self) -> dict[str, Any]:
        """The results of the steps that completed, by step name."""
        return {s.name: s.result for s in self.steps if s.state is StepState.COMPLETED}

    def to_json(self, *, jobs: bool = True) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "key": self.key,
            "state": str(self.state),
            "on_failure": str(self.on_failure),
            "args": self.args,
            "created_at": _iso(self.created_at),
            "finished_at": _iso(self.finished_at),
            "error": self.error,
            "steps": [s.to_json(jobs=jobs) for s in self.steps],
        }

    @classmethod
    def of(cls, snapshot: WorkflowSnapshot) -> WorkflowRun:
        row = snapshot.workflow
        spec = WorkflowSpec.from_json(row.spec)
        by_step: dict[str, list[StepJob]] = {}
        for e in snapshot.elements:
            recorded = e.state != "pending"
            by_step.setdefault(e.step, []).append(
                StepJob(
                    index=e.index,
                    job_id=e.job_id,
                    state=e.current,
                    attempt=e.attempt,
                    result=e.result if recorded else e.job_result,
                    error=e.error if recorded else e.job_error,
                )
            )
        steps = []
        for s in spec.steps:
            stored = snapshot.steps.get(s.name)
            steps.append(
                StepStatus(
                    name=s.name,
                    task=s.task,
                    state=StepState(stored.state if stored else "pending"),
                    after=s.after,
                    total=stored.total if stored else None,
                    jobs=tuple(sorted(by_step.get(s.name, []), key=lambda j: j.index)),
                    result=stored.result if stored else None,
                    error=stored.error if stored else None,
                    started_at=stored.started_at if stored else None,
                    finished_at=stored.finished_at if stored else None,
                )
            )
        return cls(
            id=row.id,
            name=row.name,
            key=row.key,
            state=WorkflowState(row.state),
            on_failure=FailurePolicy(row.on_failure),
            args=row.args,
            steps=tuple(steps),
            created_at=row.created_at,
            finished_at=row.finished_at,
            error=row.error,
            created=row.created,
        )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
