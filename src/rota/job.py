"""The Job row as Python sees it, its states, and the one table of allowed transitions."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from rota.errors import InvalidTransitionError


class JobState(enum.StrEnum):
    SCHEDULED = "scheduled"
    AVAILABLE = "available"
    RUNNING = "running"
    RETRYABLE = "retryable"
    COMPLETED = "completed"
    DISCARDED = "discarded"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in FINISHED_STATES


# Stored arguments of an encrypted task are one JSON object holding this key (see
# rota.security.encryption); listings show MASKED_ARGS in their place.
SEALED_MARK = "$rota_sealed"
MASKED_ARGS = "<encrypted>"

FINISHED_STATES = frozenset({JobState.COMPLETED, JobState.DISCARDED, JobState.CANCELLED})

# Every legal move of a job. The drivers' SQL only ever performs these: each statement that
# moves jobs declares its moves (`-- moves: a, b -> c`), and tests/unit/test_transitions.py
# checks every declaration against this table and every state a statement sets against its
# declaration, so a new query cannot invent a transition silently.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # A waiting job past its start deadline is dead-lettered (`expires_at`, rota.ops); a
    # due one may be claimed by id at once (`rota run`, rota.testing.inline).
    JobState.SCHEDULED: frozenset(
        {JobState.AVAILABLE, JobState.RUNNING, JobState.CANCELLED, JobState.DISCARDED}
    ),
    JobState.AVAILABLE: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.DISCARDED}),
    JobState.RUNNING: frozenset(
        {
            JobState.COMPLETED,
            JobState.RETRYABLE,
            JobState.AVAILABLE,  # lease expired or worker shutdown, retried at once
            JobState.SCHEDULED,  # snoozed
            JobState.DISCARDED,
            JobState.CANCELLED,
        }
    ),
    JobState.RETRYABLE: frozenset(
        {JobState.AVAILABLE, JobState.RUNNING, JobState.CANCELLED, JobState.DISCARDED}
    ),
    # Finished jobs may be retried by an operator (`rota jobs retry`).
    JobState.COMPLETED: frozenset({JobState.AVAILABLE}),
    # A dead letter is retried or replayed (paced replays wait as scheduled), or
    # dismissed by an operator (cancelled: it no longer holds up its partition key).
    JobState.DISCARDED: frozenset({JobState.AVAILABLE, JobState.SCHEDULED, JobState.CANCELLED}),
    JobState.CANCELLED: frozenset({JobState.AVAILABLE}),
}


def check_transition(current: JobState, target: JobState) -> None:
    """Raise InvalidTransitionError unless `current -> target` is allowed."""
    if target not in TRANSITIONS[current]:
        raise InvalidTransitionError(f"a {current} job cannot become {target}")


class Outcome(enum.StrEnum):
    """How one attempt ended, as recorded in the job's history."""

    COMPLETED = "completed"
    FAILED = "failed"  # will be retried
    DISCARDED = "discarded"  # attempts exhausted or permanent error
    SNOOZED = "snoozed"
    CANCELLED = "cancelled"
    LOST = "lost"  # lease expired: the worker died or stalled
    SHUTDOWN = "shutdown"  # returned to the queue by a draining worker


@dataclass(frozen=True)
class Attempt:
    """One execution of a job by one worker."""

    attempt: int
    worker: str | None
    started_at: datetime | None
    finished_at: datetime | None
    outcome: Outcome
    error_type: str | None = None
    message: str | None = None
    traceback: str | None = None

    @classmethod
    def from_entry(
        cls, entry: dict[str, Any], parse_time: Callable[[Any], datetime | None]
    ) -> Attempt:
        """An attempt from a stored history entry; each dialect stores times its own way."""
        return cls(
            attempt=int(entry.get("attempt") or 0),
            worker=entry.get("worker"),
            started_at=parse_time(entry.get("started_at")),
            finished_at=parse_time(entry.get("finished_at")),
            outcome=Outcome(entry.get("outcome", "failed")),
            error_type=entry.get("error_type"),
            message=entry.get("message"),
            traceback=entry.get("traceback"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "worker": self.worker,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "outcome": str(self.outcome),
            "error_type": self.error_type,
            "message": self.message,
            "traceback": self.traceback,
        }


@dataclass(frozen=True)
class Job:
    """A stored request to run a task with JSON arguments."""

    id: int
    task: str
    queue: str
    args: dict[str, Any]
    state: JobState
    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    attempted_at: datetime | None = None
    finished_at: datetime | None = None
    key: str | None = None
    worker: str | None = None
    lease_token: str | None = None
    lease_expires_at: datetime | None = None
    cancel_requested: bool = False
    result: Any = None
    history: tuple[Attempt, ...] = field(default=())
    checkpoint: Any = None  # the last value stored with ctx.checkpoint()
    # What features attached to the job (batch index, workflow step, trace context).
    meta: dict[str, Any] = field(default_factory=dict)
    # False when enqueue found an existing job with the same idempotency key.
    created: bool = True
    # The last ctx.progress() the job reported: a fraction 0..1, a message, and when.
    progress: float | None = None
    progress_message: str | None = None
    progress_at: datetime | None = None
    # Jobs with the same partition key (per queue) run one at a time, in id order.
    partition_key: str | None = None
    expires_at: datetime | None = None  # not started by then: dead-lettered as `expired`
    requires: tuple[str, ...] = ()  # labels a worker must advertise to claim it
    tenant: str | None = None  # who the job is for (fair queues, per-tenant caps)

    @classmethod
    def restore(cls, fields: dict[str, Any]) -> Job:
        """A job from fields the storage layer has already decoded and checked, without
        the dataclass's `__init__`: a frozen dataclass sets each of its 29 fields through
        `object.__setattr__`, which is a third of the Python time of an enqueue or a claim.
        Fields not given take their defaults; `meta` must be given (its default is a
        fresh dict)."""
        return restored(cls, _JOB_DEFAULTS, fields)

    @classmethod
    def restore_each(cls, shared: dict[str, Any], each: Iterable[dict[str, Any]]) -> list[Job]:
        """Jobs that share most of their fields (one bulk enqueue), as `restore` makes
        them, with the defaults and `shared` merged once instead of once a job."""
        return restore_each(cls, {**_JOB_DEFAULTS, **shared}, each)

    @property
    def args_encrypted(self) -> bool:
        """True when the stored arguments are sealed (`@app.task(encrypted=True)`)."""
        return SEALED_MARK in self.args

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view for the CLI and HTTP API (the lease token stays private)."""
        return {
            "id": self.id,
            "task": self.task,
            "queue": self.queue,
            # Sealed arguments are never shown, not even as ciphertext.
            "args": MASKED_ARGS if self.args_encrypted else self.args,
            "args_encrypted": self.args_encrypted,
            "state": str(self.state),
            "priority": self.priority,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "run_at": self.run_at.isoformat(),
            "created_at": self.created_at.isoformat(),
            "attempted_at": self.attempted_at.isoformat() if self.attempted_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "key": self.key,
            "worker": self.worker,
            "lease_expires_at": (
                self.lease_expires_at.isoformat() if self.lease_expires_at else None
            ),
            "cancel_requested": self.cancel_requested,
            "result": self.result,
            "checkpoint": self.checkpoint,
            "meta": self.meta,
            "progress": self.progress,
            "progress_message": self.progress_message,
            "progress_at": self.progress_at.isoformat() if self.progress_at else None,
            "partition_key": self.partition_key,
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
            "requires": list(self.requires),
            "tenant": self.tenant,
            "history": [a.to_json() for a in self.history],
        }


_Restored = TypeVar("_Restored")


def restored(cls: type[_Restored], template: dict[str, Any], fields: dict[str, Any]) -> _Restored:
    """An instance of the frozen dataclass `cls` without its `__init__` (which sets every
    field through `object.__setattr__`): `template`'s fields, then its own."""
    item = object.__new__(cls)
    values = item.__dict__
    values.update(template)
    values.update(fields)
    return item


def restore_each(
    cls: type[_Restored], template: dict[str, Any], each: Iterable[dict[str, Any]]
) -> list[_Restored]:
    """`restored` for many instances that share `template`."""
    return [restored(cls, template, fields) for fields in each]


# The defaults of Job's fields, for Job.restore (`meta`, whose default is a factory, excepted).
_JOB_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(Job) if f.default is not dataclasses.MISSING
}
