"""BatchStatus: what `app.batches.get()`, the CLI and the finish callback see — counts,
completed and failed indexes in the Kubernetes interval form, condition and times."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rota.batches.reconcile import ItemState
from rota.batches.spec import format_indexes
from rota.batches.store import BatchRecord


@dataclass(frozen=True)
class BatchStatus:
    id: int
    name: str | None
    task: str
    queue: str
    indexed: bool
    completions: int
    parallelism: int
    suspended: bool
    active: int
    succeeded: int  # indexes that succeeded
    failed: int  # failed attempts counted toward backoff_limit
    ignored: int  # failed attempts an ignore rule excused
    completed_indexes: str | None  # "0-3,5"; None when not read (listings)
    failed_indexes: str | None
    condition: str | None  # "Complete" or "Failed" once finished
    reason: str | None
    message: str | None
    interim: str | None  # "FailureTarget" or "SuccessCriteriaMet" while finishing
    created_at: datetime
    start_time: datetime | None
    completion_time: datetime | None  # set on success only, like Kubernetes
    finished_at: datetime | None  # when Complete or Failed was set
    callback_job_id: int | None
    spec: dict[str, Any]
    created: bool = True  # False: a batch of this name existed, and this is it
    # While the batch waits out the back-off after a failure: when it starts jobs again.
    backoff_until: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.condition is not None

    @property
    def state(self) -> str:
        """One word: suspended, running, terminating, complete or failed."""
        if self.condition is not None:
            return self.condition.lower()
        if self.interim is not None:
            return "terminating"
        return "suspended" if self.suspended else "running"

    @classmethod
    def of(cls, record: BatchRecord, items: Iterable[tuple[int, str]] | None = None) -> BatchStatus:
        completed: str | None = None
        failed: str | None = None
        active = record.active
        if items is not None:
            pairs = list(items)
            completed = format_indexes(i for i, s in pairs if s == ItemState.SUCCEEDED)
            failed = format_indexes(i for i, s in pairs if s == ItemState.FAILED)
            active = sum(1 for _, s in pairs if s == ItemState.ACTIVE)
        return cls(
            id=record.id,
            name=record.name,
            task=record.task,
            queue=record.queue,
            indexed=bool(record.spec.get("indexed")),
            completions=int(record.spec.get("completions", 0)),
            parallelism=record.parallelism,
            suspended=record.suspended,
            active=active,
            succeeded=record.succeeded,
            failed=record.failed,
            ignored=record.ignored,
            completed_indexes=completed,
            failed_indexes=failed,
            condition=record.condition,
            reason=record.reason if record.condition else record.interim_reason,
            message=record.message if record.condition else record.interim_message,
            interim=record.interim,
            created_at=record.created_at,
            start_time=record.start_time,
            completion_time=record.completion_time,
            finished_at=record.finished_at,
            callback_job_id=record.callback_job_id,
            spec=record.spec,
            created=record.created,
            backoff_until=_backoff_until(record),
        )

    def to_json(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "id": self.id,
            "name": self.name,
            "task": self.task,
            "queue": self.queue,
            "mode": "Indexed" if self.indexed else "NonIndexed",
            "completions": self.completions,
            "parallelism": self.parallelism,
            "suspended": self.suspended,
            "state": self.state,
            "active": self.active,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "ignored": self.ignored,
            "completed_indexes": self.completed_indexes,
            "failed_indexes": self.failed_indexes,
            "condition": self.condition,
            "interim": self.interim,
            "reason": self.reason,
            "message": self.message,
            "created_at": iso(self.created_at),
            "start_time": iso(self.start_time),
            "completion_time": iso(self.completion_time),
            "finished_at": iso(self.finished_at),
            "callback_job_id": self.callback_job_id,
            "spec": self.spec,
            "backoff_until": iso(self.backoff_until),
        }


def _backoff_until(record: BatchRecord) -> datetime | None:
    """The end of the batch-wide back-off after its last failure (Kubernetes' pod
    back-off), while it matters: the batch runs, has indexes left and failed lately."""
    from datetime import timedelta

    from rota.batches.spec import BatchSpec

    if record.condition is not None or record.interim is not None or record.suspended:
        return None
    if record.last_failure_at is None or record.fails_since_success <= 0:
        return None
    try:
        spec = BatchSpec.from_json(record.spec)
    except Exception:  # an older or odd spec: say nothing rather than something wrong
        return None
    if spec.backoff_limit_per_index is not None:
        return None  # per-index back-off: each index has its own
    delay = spec.delay(record.fails_since_success)
    return record.last_failure_at + timedelta(seconds=delay) if delay else None
