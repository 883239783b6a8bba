"""The Driver protocol: the only seam that speaks SQL. It talks in jobs, leases and
queues (never cursors), and its parameters and results are frozen dataclasses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from rota.job import Job, JobState

# Called by a notifier when jobs may be waiting: with a queue name, or None for "any queue".
WakeFunc = Callable[[str | None], None]


@dataclass(frozen=True)
class JobInsert:
    """One job to insert. Exactly one of `at` / `delay` may be set; neither means now."""

    task: str
    queue: str
    args_json: str
    priority: int
    max_attempts: int
    key: str | None = None
    at: datetime | None = None
    delay: float | None = None
    # An active key blocks a second job; it is released once `key_ttl` seconds have
    # passed since its job was created, or when the job leaves `key_states`.
    key_ttl: float | None = None
    key_states: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Completion:
    """How one attempt ended, as the completer writes it (River's executor/completer split).

    The write is fenced: it applies only while the job is running under `lease_token`.
    """

    job_id: int
    lease_token: str
    state: JobState
    entry_json: str  # the history entry: outcome, error type, message, traceback
    delay: float | None = None  # for retryable / scheduled: seconds from now
    result_json: str | None = None
    # Snooze and graceful shutdown give the attempt back instead of spending it.
    refund_attempt: bool = False


@dataclass(frozen=True)
class LeaseRenewal:
    job_id: int
    lease_token: str
    cancel_requested: bool


@dataclass(frozen=True)
class JobFilter:
    states: tuple[JobState, ...] = ()
    queue: str | None = None
    task: str | None = None
    limit: int = 50
    before_id: int | None = None


@dataclass(frozen=True)
class QueueReport:
    name: str
    paused: bool
    counts: dict[str, int]
    oldest_available_age: float | None  # seconds the oldest runnable job has waited


@dataclass(frozen=True)
class RescueReport:
    rescued: int = 0
    discarded: int = 0
    cancelled: int = 0


class Notifier(Protocol):
    """Tells a worker that jobs may be waiting; polling remains the fallback."""

    async def run(self, wake: WakeFunc, control: Callable[[str], None]) -> None: ...


class Driver(Protocol):
    """Storage for one dialect. Methods are sorted noun_verb; all are blocking and
    thread-safe, and the worker calls them from a small thread pool."""

    dialect: str
    latest_schema_version: int

    def close(self) -> None: ...

    def inbox_prune(self, age: float, limit: int) -> int: ...

    def inbox_record(self, conn: Any, source: str, message_id: str) -> bool: ...

    def db_now(self) -> datetime: ...

    def job_cancel(self, job_id: int) -> Job: ...

    def job_checkpoint(self, job_id: int, lease_token: str, value_json: str) -> bool: ...

    def job_claim(self, job_id: int, worker: str, lease_seconds: float) -> Job | None: ...

    def job_complete_many(
        self, completions: Sequence[Completion], conn: Any = None
    ) -> set[int]: ...

    def job_fetch_available(
        self, queue: str, limit: int, worker: str, lease_seconds: float
    ) -> list[Job]: ...

    def job_get(self, job_id: int) -> Job | None: ...

    def job_insert_many(self, rows: Sequence[JobInsert], conn: Any = None) -> list[Job]: ...

    def job_lease_renew(
        self, leases: Sequence[tuple[int, str]], lease_seconds: float
    ) -> list[LeaseRenewal]: ...

    def job_list(self, where: JobFilter) -> list[Job]: ...

    def job_prune_finished(self, completed_age: float, discarded_age: float, limit: int) -> int: ...

    def job_rescue_expired(self, limit: int) -> RescueReport: ...

    def job_retry(self, job_id: int) -> Job: ...

    def job_stage_due(self, limit: int, horizon: float = 0.0) -> int: ...

    def leader_attempt_elect(self, name: str, leader: str, ttl_seconds: float) -> bool: ...

    def leader_resign(self, name: str, leader: str) -> None: ...

    def notifier(self) -> Notifier: ...

    def queue_list(self) -> list[QueueReport]: ...

    def queue_set_paused(self, name: str, paused: bool) -> None: ...

    def schema_migrate(self) -> list[int]: ...

    def schema_version(self) -> int: ...

    def step_list(self, job_id: int) -> dict[str, Any]: ...

    def step_record(self, job_id: int, lease_token: str, name: str, result_json: str) -> bool: ...

    def transaction(self) -> AbstractContextManager[Any]: ...


def wake_all(wake: WakeFunc) -> None:
    wake(None)


async def sleep_or(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to `seconds` for `event`; True if it was set."""
    try:
        await asyncio.wait_for(event.wait(), timeout=seconds)
    except TimeoutError:
        return False
    return True
