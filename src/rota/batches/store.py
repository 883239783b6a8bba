"""What the drivers store for batches: the parameters and rows (frozen dataclasses) and
the BatchStore protocol that drivers/<dialect>/batches.py implement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from rota.drivers.base import JobInsert
from rota.job import JobState


@dataclass(frozen=True)
class BatchInsert:
    """A new batch: its job template, spec (JSON) and items (one args JSON per index when
    the batch was made from items; None: every index runs with `args_json`)."""

    name: str | None
    task: str
    queue: str
    priority: int
    args_json: str
    spec_json: str
    parallelism: int
    suspended: bool
    completions: int
    item_args: Sequence[str] | None = None
    on_finish: str | None = None
    on_finish_queue: str | None = None
    on_finish_priority: int = 0
    on_finish_max_attempts: int = 20


@dataclass(frozen=True)
class BatchRecord:
    """A stored batch: definition and status."""

    id: int
    name: str | None
    task: str
    queue: str
    priority: int
    args_json: str
    spec: dict[str, Any]
    parallelism: int
    suspended: bool
    version: int
    succeeded: int
    failed: int
    ignored: int
    fails_since_success: int
    created_at: datetime
    last_failure_at: datetime | None = None
    interim: str | None = None
    interim_reason: str | None = None
    interim_message: str | None = None
    condition: str | None = None
    reason: str | None = None
    message: str | None = None
    start_time: datetime | None = None
    completion_time: datetime | None = None
    finished_at: datetime | None = None
    on_finish: str | None = None
    on_finish_queue: str | None = None
    on_finish_priority: int = 0
    on_finish_max_attempts: int = 20
    callback_job_id: int | None = None
    active: int = 0  # indexes with a live attempt
    created: bool = True  # False when a batch of that name existed already


@dataclass(frozen=True)
class BatchItemRecord:
    """One index and, while it is active, its job as last seen."""

    index: int
    state: str
    failures: int
    last_failure_at: datetime | None
    job_id: int | None
    args_json: str | None = None
    job_state: JobState | None = None
    cancel_requested: bool = False
    job_finished_at: datetime | None = None
    error_type: str | None = None
    error_message: str | None = None
    condition: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ItemChange:
    index: int
    state: str
    failures: int
    last_failure_at: datetime | None
    job_id: int | None


@dataclass(frozen=True)
class BatchApply:
    """One controller pass written at once, fenced by the batch's version: if anything
    changed the batch since it was read (a second controller, suspend, cancel), nothing
    is written and the next pass decides again."""

    batch_id: int
    version: int
    status: dict[str, Any]  # succeeded, failed, ignored, fails_since_success, ...
    items: Sequence[ItemChange] = ()
    start: Sequence[tuple[int, JobInsert]] = ()
    cancel: Sequence[int] = ()
    finished: bool = False
    callback: JobInsert | None = None


@dataclass(frozen=True)
class BatchFilter:
    open_only: bool = False
    limit: int = 50
    task: str | None = None


class BatchStore(Protocol):
    """Batches, their items and the jobs they started (see rota.batches)."""

    def apply(self, change: BatchApply, conn: Any = None) -> bool: ...

    def create(self, row: BatchInsert, conn: Any = None) -> BatchRecord: ...

    def get(self, ref: int | str, conn: Any = None) -> BatchRecord | None: ...

    def items(self, batch_id: int, conn: Any = None) -> list[BatchItemRecord]: ...

    def all(self, where: BatchFilter) -> list[BatchRecord]: ...

    def open_ids(self) -> list[int]: ...

    def prune_expired(self, limit: int) -> int: ...

    def request_cancel(self, batch_id: int, message: str) -> bool: ...

    def set_parallelism(self, batch_id: int, parallelism: int) -> bool: ...

    def set_suspended(self, batch_id: int, suspended: bool) -> bool: ...

    def job_ids(self, batch_id: int) -> list[int]: ...
