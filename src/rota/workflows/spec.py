"""The stored form of a workflow's definition: a JSON snapshot taken when a run starts, so
the controller advances it without the caller's code, and a deploy that changes the
definition never changes a run already under way."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from rota.errors import WorkflowError

SPEC_VERSION = 1


class FailurePolicy(enum.StrEnum):
    """What a failed step does to the rest of its workflow."""

    FAIL = "fail"  # fail the workflow at once and cancel every pending and running step
    CONTINUE = "continue"  # let independent branches finish; skip what needs the failed step


class WorkflowState(enum.StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self is not WorkflowState.RUNNING


class StepState(enum.StrEnum):
    PENDING = "pending"  # waiting for the steps it runs after
    RUNNING = "running"  # its jobs are inserted; some have not finished
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"  # the workflow failed or was cancelled before it could finish
    SKIPPED = "skipped"  # on_failure="continue": a step it needs failed

    @property
    def finished(self) -> bool:
        return self not in (StepState.PENDING, StepState.RUNNING)


@dataclass(frozen=True)
class StepSpec:
    """One step as stored: its task, dependencies, fan-out and job options."""

    name: str
    task: str
    after: tuple[str, ...] = ()
    fan_out: int | None = None  # static: this many jobs
    each: str | None = None  # dynamic: one job per element of the parent's result list
    args: dict[str, Any] = field(default_factory=dict)  # fixed arguments of every job
    params: tuple[str, ...] = ()  # the task's parameter names (what a job may be given)
    queue: str = "default"
    priority: int = 0
    max_attempts: int = 20

    @property
    def fans_out(self) -> bool:
        """True when the step runs as a list of jobs (its result is a list)."""
        return self.fan_out is not None or self.each is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "task": self.task,
            "after": list(self.after),
            "fan_out": self.fan_out,
            "each": self.each,
            "args": self.args,
            "params": list(self.params),
            "queue": self.queue,
            "priority": self.priority,
            "max_attempts": self.max_attempts,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepSpec:
        return cls(
            name=data["name"],
            task=data["task"],
            after=tuple(data.get("after") or ()),
            fan_out=data.get("fan_out"),
            each=data.get("each"),
            args=dict(data.get("args") or {}),
            params=tuple(data.get("params") or ()),
            queue=data.get("queue", "default"),
            priority=int(data.get("priority", 0)),
            max_attempts=int(data.get("max_attempts", 20)),
        )


@dataclass(frozen=True)
class WorkflowSpec:
    """A workflow's steps in topological order, and its failure policy."""

    name: str
    steps: tuple[StepSpec, ...]
    on_failure: FailurePolicy = FailurePolicy.FAIL

    def step(self, name: str) -> StepSpec:
        for step in self.steps:
            if step.name == name:
                return step
        known = ", ".join(s.name for s in self.steps)
        raise WorkflowError(f"workflow {self.name!r} has no step {name!r} (steps: {known})")

    @property
    def edges(self) -> dict[str, tuple[str, ...]]:
        return {s.name: s.after for s in self.steps}

    def to_json(self) -> dict[str, Any]:
        return {
            "version": SPEC_VERSION,
            "name": self.name,
            "on_failure": str(self.on_failure),
            "steps": [s.to_json() for s in self.steps],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkflowSpec:
        if data.get("version") != SPEC_VERSION:
            raise WorkflowError(
                f"stored workflow definition has version {data.get('version')!r}; this rota "
                f"reads version {SPEC_VERSION}: upgrade rota"
            )
        return cls(
            name=data["name"],
            steps=tuple(StepSpec.from_json(s) for s in data["steps"]),
            on_failure=FailurePolicy(data.get("on_failure", "fail")),
        )
