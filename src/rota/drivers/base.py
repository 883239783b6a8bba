"""The Driver protocol: the only seam that speaks SQL. It talks in jobs, leases and
queues (never cursors), and its parameters and results are frozen dataclasses."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol

from rota.drivers.catalog import CatalogStore
from rota.drivers.database import Database
from rota.drivers.deadlines import Deadlines
from rota.job import Job, JobState, restore_each, restored

if TYPE_CHECKING:  # presence reads RescueReport from here
    from rota.drivers.presence import PresenceStore

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
    # Feature metadata (batch index, workflow step, trace context) as a JSON object.
    meta_json: str | None = None
    # Jobs of one partition key (per queue) run one at a time, in id order (rota.ops).
    partition_key: str | None = None
    # A job not started by then is dead-lettered with reason `expired`.
    expires_at: datetime | None = None
    # Labels a worker must advertise to claim the job (sorted; None: any worker).
    requires: tuple[str, ...] | None = None
    tenant: str | None = None  # who the job is for (fair queues, per-tenant caps)
    # `args_json` as JSON values, when the caller has them (Task.build): the job returned
    # by an enqueue carries them instead of parsing the text again.
    args: dict[str, Any] | None = dataclasses.field(
        default=None, compare=False, hash=False, repr=False
    )

    @classmethod
    def restore(cls, fields: dict[str, Any]) -> JobInsert:
        """A row from fields already validated (Task.build), without the frozen
        dataclass's `__init__`, which costs as much as validating the arguments."""
        return restored(cls, _INSERT_DEFAULTS, fields)

    @classmethod
    def restore_each(
        cls, shared: dict[str, Any], each: Iterable[dict[str, Any]]
    ) -> list[JobInsert]:
        """Rows that share most of their fields (one `enqueue_many`), as `restore` makes
        them, with the defaults and `shared` merged once instead of once a row."""
        return restore_each(cls, {**_INSERT_DEFAULTS, **shared}, each)


# The defaults of JobInsert's fields, for JobInsert.restore.
_INSERT_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(JobInsert) if f.default is not dataclasses.MISSING
}


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

    @classmethod
    def completed(cls, job_id: int, lease_token: str, result_json: str | None) -> Completion:
        """The completion of an attempt that returned (`result_json`: what it returned),
        made for every such attempt: built as Job.restore builds a job, without the frozen
        dataclass's `__init__` (1.5 -> 0.6 us)."""
        return restored(
            cls,
            _COMPLETED,
            {"job_id": job_id, "lease_token": lease_token, "result_json": result_json},
        )


# The history entry of an attempt that completed and has nothing more to say. The stores
# do not write it: the job's own attempt, worker, attempted_at and finished_at hold all of
# it, and its bytes were the largest part of a drain's writes (docs/benchmarks.md). Every
# reader puts it back (rows.job_from_row; the SQL that reads history, and job_retry, which
# stores it before a completed job runs again), so the history reads as before.
COMPLETED_ENTRY = '{"outcome": "completed"}'
# The fields every Completion.completed() shares.
_COMPLETED: dict[str, Any] = {
    "state": JobState.COMPLETED,
    "entry_json": COMPLETED_ENTRY,
    "delay": None,
    "refund_attempt": False,
}


# The queue modes the claim statements know (a queue's stored configuration decides which):
# plain, gated (per-job gates: partition keys, start deadlines, required labels), limited
# (a global concurrency or rate limit) and fair (by tenant). Features register the named
# claim statement of each mode they bring (Feature.claims); the engine brings "plain".
PLAIN = "plain"
CLAIM_QUERIES = {PLAIN: "job_claim_plain"}


@dataclass(frozen=True)
class Claim:
    """One claim of a worker from one queue, carrying the attempts that ended since its
    last claim (their completions are written in the same transaction)."""

    queue: str
    limit: int
    worker: str
    lease: float
    query: str = CLAIM_QUERIES[PLAIN]  # the named claim statement of the queue's mode
    capabilities: tuple[str, ...] | None = None  # None: no routing filter
    completions: Sequence[Completion] = ()


@dataclass(frozen=True)
class Claimed:
    """What one claim did: the jobs claimed (each with a fresh lease), the completions it
    wrote, and, when the database said so, how the queue is claimed now."""

    jobs: list[Job]
    accepted: set[int]
    mode: str | None = None  # the queue's mode, when it differs from the one claimed with
    paused: bool = False
    waiting: bool | None = None  # jobs still available after the claim (None: not asked)


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
class BacklogReport:
    """One queue's scaling signals (SEMANTICS §3.3-3.4), the numbers KEDA scales on."""

    queue: str
    backlog: int  # runnable: available, or waiting and due; 0 while the queue is paused
    running: int
    oldest_age_s: float  # seconds the oldest runnable job has waited (0 when none waits)

    @property
    def demand(self) -> int:
        """Work that needs a worker now: runnable plus running (the default signal)."""
        return self.backlog + self.running


@dataclass(frozen=True)
class DurationReport:
    """How long one queue's recently completed jobs took to run (their last attempt)."""

    queue: str
    window_s: float
    samples: int
    mean_s: float | None  # None when no job completed in the window


@dataclass(frozen=True)
class RescueReport:
    rescued: int = 0
    discarded: int = 0
    cancelled: int = 0


@dataclass(frozen=True)
class TokenRecord:
    """An API token as stored: its name, role and lifetime, never the secret. `expired`
    and `stale` (its last use is over a minute old) are read with the database clock."""

    name: str
    role: str
    created_at: datetime
    revoked_at: datetime | None = None
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    expired: bool = False
    stale: bool = False

    def to_json(self) -> dict[str, Any]:
        def iso(value: datetime | None) -> str | None:
            return None if value is None else value.isoformat()

        return {
            "name": self.name,
            "role": self.role,
            "created_at": self.created_at.isoformat(),
            "revoked_at": iso(self.revoked_at),
            "expires_at": iso(self.expires_at),
            "last_used_at": iso(self.last_used_at),
            "expired": self.expired,
        }


@dataclass(frozen=True)
class LoginLinkRecord:
    """A login link and the token it stands for (`name` None: that token is gone)."""

    name: str | None
    role: str | None
    used: bool
    expired: bool
    token_live: bool


@dataclass(frozen=True)
class ProgressUpdate:
    """The latest progress of one running job, written fenced by its lease token."""

    job_id: int
    lease_token: str
    fraction: float
    message: str | None


@dataclass(frozen=True)
class CopyColumn:
    name: str
    type: str  # the dialect's type name: "timestamptz", "jsonb", "bool", ...; "real", "text"


class CopyWriter(Protocol):
    """Writes copied rows into the target, all in one transaction (`rota db copy`)."""

    def write(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> int: ...

    def count(self, table: str) -> int: ...

    def advance_sequences(self) -> None: ...

    def recount(self) -> None:
        """Derive what the database keeps about the jobs (counts per state, throughput
        per minute, workers seen) from the copied rows' own times, not from their arrival."""
        ...


class CopyStore(Protocol):
    """Table-driven reads and bulk writes of rota's own tables, to move an installation
    between databases. Table names come from the catalog, never from input."""

    def columns(self) -> dict[str, list[CopyColumn]]: ...

    def dependencies(self) -> list[tuple[str, str]]: ...

    def count(self, table: str) -> int: ...

    def read(
        self, table: str, columns: Sequence[str], after: int, limit: int
    ) -> list[tuple[int, tuple[Any, ...]]]: ...

    def writer(self) -> AbstractContextManager[CopyWriter]: ...


class Notifier(Protocol):
    """Tells a worker that jobs may be waiting; polling remains the fallback."""

    # True when `wake(None)` follows every commit to the database by anyone (SQLite's
    # change watcher), not only new jobs: then a service with nothing to do may rest
    # until the next wake-up instead of looking every interval.
    sees_every_commit: bool

    async def run(self, wake: WakeFunc, control: Callable[[str], None]) -> None: ...


class DoneWatcher(Protocol):
    """Tells `app.wait` that awaited jobs may have finished (LISTEN on PostgreSQL, the
    change watcher on SQLite). Blocking: the target of one thread."""

    def watch(
        self,
        stop: threading.Event,
        changed: Callable[[int | None], None],
        ready: Callable[[], None],
    ) -> None:
        """Call `ready()` once listening, then `changed(job_id)` (None: any job may have
        finished) until `stop` is set."""
        ...


class Driver(Protocol):
    """Storage for one dialect. Methods are sorted noun_verb; all are blocking and
    thread-safe, and the worker calls them from a small thread pool."""

    dialect: str
    latest_schema_version: int

    @property
    def database(self) -> Database[Any]:
        """The dialect seam every feature store is written over (rota.drivers.database)."""
        ...

    async def aclose(self) -> None:
        """close() from async code: what the driver opened on an event loop (the async
        pool of enqueue_async) is closed on it."""
        ...

    # Feature stores: each a small class in drivers/<dialect>/<feature>.py that borrows
    # the driver's connections, so one feature's SQL plumbing stays out of driver.py.

    @property
    def catalog(self) -> CatalogStore: ...

    @property
    def copy(self) -> CopyStore: ...

    @property
    def presence(self) -> PresenceStore:
        """Who is alive: a dead worker's jobs are rescued at once (rota.drivers.presence)."""
        ...

    def close(self) -> None: ...

    def deadlines_set(self, deadlines: Deadlines) -> None:
        """Use these deadlines for connections and calls from now on (rota.drivers.deadlines;
        a dialect without network connections ignores them)."""
        ...

    def inbox_prune(self, age: float, limit: int) -> int: ...

    def inbox_record(self, conn: object, source: str, message_id: str) -> bool: ...

    def db_now(self) -> datetime: ...

    def job_cancel(self, job_id: int) -> Job: ...

    def job_checkpoint(self, job_id: int, lease_token: str, value_json: str) -> bool: ...

    def job_claim(self, job_id: int, worker: str, lease_seconds: float) -> Job | None: ...

    def job_complete_many(
        self, completions: Sequence[Completion], conn: object = None
    ) -> set[int]: ...

    def job_fetch(self, claim: Claim) -> Claimed:
        """Write the claim's completions and claim jobs with its statement, in one
        transaction (one round trip on PostgreSQL)."""
        ...

    def job_get(self, job_id: int) -> Job | None: ...

    def job_get_many(self, ids: Sequence[int]) -> list[Job]: ...

    def job_await_mark(self, job_id: int) -> Job | None: ...

    def job_insert_many(self, rows: Sequence[JobInsert], conn: object = None) -> list[Job]: ...

    async def job_insert_many_async(
        self, rows: Sequence[JobInsert], conn: object = None
    ) -> list[Job]: ...

    def job_lease_renew(
        self, leases: Sequence[tuple[int, str]], lease_seconds: float
    ) -> list[LeaseRenewal]: ...

    def job_list(self, where: JobFilter) -> list[Job]: ...

    def job_progress_record_many(self, updates: Sequence[ProgressUpdate]) -> set[int]: ...

    def job_prune(self, state: str, age: float, limit: int) -> int: ...

    def job_prune_finished(self, completed_age: float, discarded_age: float, limit: int) -> int: ...

    def job_rescue_expired(self, limit: int) -> RescueReport: ...

    def job_retry(self, job_id: int) -> Job: ...

    def job_stage_due(self, limit: int, horizon: float = 0.0) -> int: ...

    def job_next_due(self) -> float | None: ...

    def leader_attempt_elect(self, name: str, leader: str, ttl_seconds: float) -> bool: ...

    def leader_resign(self, name: str, leader: str) -> None: ...

    def notifier(self) -> Notifier: ...

    def done_watcher(self) -> DoneWatcher: ...

    def queue_backlog(self, queue: str) -> BacklogReport: ...

    def queue_durations(self, queue: str, window: float) -> DurationReport: ...

    def queue_list(self) -> list[QueueReport]: ...

    def queue_hold_drop(self, queue: str, source: HoldSource) -> bool: ...

    def queue_hold_list(self, queue: str | None = None) -> list[QueueHold]: ...

    def queue_hold_put(
        self, queue: str, source: HoldSource, reason: str, until: datetime | None
    ) -> bool: ...

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


# Who holds a queue paused: an operator, a processing window or a circuit breaker.
HoldSource = Literal["manual", "window", "breaker"]
HOLD_SOURCES: tuple[HoldSource, ...] = ("manual", "window", "breaker")


@dataclass(frozen=True)
class QueueHold:
    """One reason a queue is paused. The queue starts nothing while it has any hold."""

    queue: str
    source: HoldSource
    reason: str
    since: datetime
    until: datetime | None = None  # when the holder expects to let go (informational)

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "source": self.source,
            "reason": self.reason,
            "since": self.since.isoformat(),
            "until": None if self.until is None else self.until.isoformat(),
        }
